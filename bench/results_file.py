"""Write a benchmark's results file: what was measured, and on what machine."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
from pathlib import Path
from typing import Any


def write_results(path: Path, benchmark: str, results: Any, **extra: Any) -> None:
    """``path`` gets {benchmark, measured_at, cores, machine, python, **extra, results} as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "benchmark": benchmark,
        "measured_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        **extra,
        "results": results,
    }
    path.write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {path}")
