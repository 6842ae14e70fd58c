"""Stops the table itself could not hold: where a table fails and its stopped flag cannot be written to
it (its Delta log torn, a permission), the stop is recorded in the lake instead, at
``<storage.root>/_cdc_stopped/<table>.txt`` (its reason), so that the merger keeps the table stopped
across restarts, ``status`` shows why, and ``resume-table`` clears it, as the stop message says."""

from __future__ import annotations

from cdc_delta.config import AppConfig
from cdc_delta.delta.lake_files import LakeFiles


def _path(name: str) -> str:
    return f"_cdc_stopped/{name}.txt"


def record(config: AppConfig, name: str, reason: str) -> None:
    LakeFiles(config).write(_path(name), reason)


def recorded(config: AppConfig, name: str) -> str | None:
    """Why the table was stopped where its own flag could not say it; None where it was not."""
    return LakeFiles(config).read(_path(name))


def clear(config: AppConfig, name: str) -> str | None:
    """Clear the table's recorded stop; returns its reason (None: there was none)."""
    files = LakeFiles(config)
    reason = files.read(_path(name))
    if reason is not None:
        files.delete(_path(name))
    return reason
