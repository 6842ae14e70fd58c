"""The JSON report every job run writes next to its one-line log summary."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from cdc_delta.config import is_uri

logger = logging.getLogger(__name__)


def write_report(folder: str, name: str, payload: dict[str, Any]) -> Path | None:
    """Write ``<folder>/<name>.json``, readable by its owner only (a report can hold key values of
    the replicated rows: ``check``'s differing keys); a folder on object storage is skipped with a log
    line (the report is in the log too). Returns the file written."""
    if is_uri(folder):
        logger.info("report folder %s is not local: report not written (it is in the log above)", folder)
        return None
    out = Path(folder) / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.with_name(f".{out.name}.{os.getpid()}")
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        os.fchmod(fd, 0o600)  # an older staging file of the same name kept its mode
        file.write(json.dumps(payload, indent=2, default=str) + "\n")
    staging.replace(out)
    logger.info("report: %s", out)
    return out
