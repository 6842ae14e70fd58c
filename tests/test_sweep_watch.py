"""The end-of-run sweep passes over a table read while the tests ran only while nothing it depends on
changed: its fingerprint moves with a commit, a file added or removed, a file's size."""

from __future__ import annotations

import tempfile
from pathlib import Path

from tests.delta_rs_sweep import fingerprint


def test_a_tables_fingerprint_moves_with_every_write() -> None:
    # Outside the run's folder: the sweep at the end reads every Delta log under it, and this one is no table.
    with tempfile.TemporaryDirectory() as folder:
        _moves_with_every_write(Path(folder) / "t")


def _moves_with_every_write(table: Path) -> None:
    (table / "_delta_log").mkdir(parents=True)
    (table / "_delta_log" / "00000000000000000000.json").write_text("{}")
    (table / "part-0.parquet").write_bytes(b"abc")
    seen = {fingerprint(table)}
    assert fingerprint(table) in seen  # read again, unchanged

    (table / "_delta_log" / "00000000000000000001.json").write_text("{}")  # a commit
    seen.add(fingerprint(table))
    (table / "dt=2026-12-01").mkdir()
    (table / "dt=2026-12-01" / "part-1.parquet").write_bytes(b"x")  # a file in a partition
    seen.add(fingerprint(table))
    (table / "part-0.parquet").write_bytes(b"abcd")  # a file rewritten (Delta never does; a test might)
    seen.add(fingerprint(table))
    (table / "part-0.parquet").unlink()  # a file vacuumed
    seen.add(fingerprint(table))
    assert len(seen) == 5
