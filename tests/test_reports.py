"""Job reports: whole files, readable by their owner only (they can hold key values)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from cdc_delta.reports import write_report


def test_a_report_is_readable_by_its_owner_only_whatever_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0)
    try:
        first = write_report(str(tmp_path / "reports"), "check-1", {"differing_keys": [{"id": 7}]})
        again = write_report(str(tmp_path / "reports"), "check-1", {"differing_keys": []})
    finally:
        os.umask(previous)
    assert first == again == tmp_path / "reports" / "check-1.json"
    assert json.loads(again.read_text()) == {"differing_keys": []}
    assert again.stat().st_mode & 0o777 == 0o600, oct(again.stat().st_mode)
    assert [p.name for p in again.parent.iterdir()] == ["check-1.json"]  # no staging file left
