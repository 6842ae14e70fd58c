"""What ``check-config`` checks against the lake as it is, beside the file itself: that the storage
locations can be written here, and that every table's key and ``zorder_by`` columns are columns of its
Delta table where the table exists (its schema known). Read with delta-rs: no Spark session."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cdc_delta.config import AppConfig, TableConfig, is_uri
from cdc_delta.delta.delta_rs import open_table


def lake_problems(config: AppConfig) -> list[str]:
    """The problems found, each naming the setting and the fix (none: the lake agrees with the config)."""
    problems = [p for p in (_unwritable(what, path) for what, path in _locations(config)) if p]
    if problems:  # nothing to read there yet
        return problems
    from cdc_delta.changelog.table_index import indexed_without_spark

    tables = indexed_without_spark(config).tables()
    with ThreadPoolExecutor(max_workers=8) as pool:
        return [p for found in pool.map(lambda t: _columns(config, t), tables) for p in found]


def _locations(config: AppConfig) -> list[tuple[str, str]]:
    storage = config.storage
    out = [("storage.root", storage.root), ("storage.dead_letter_path", storage.dead_letters)]
    out.append(("storage.checkpoint_root", config.under_root(storage.checkpoint_root, "_cdc_checkpoints")))
    return out


def _unwritable(what: str, location: str) -> str | None:
    """Why ``location`` (a local path) cannot be written by this user, or None; object stores are not
    checked here (their credentials are the jobs')."""
    if is_uri(location) and not location.startswith("file:"):
        return None
    path = Path(location.removeprefix("file:"))
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is None:
        return None
    if not existing.is_dir():
        return f"{what} {location}: {existing} is a file, not a folder: point {what} at a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        where = "it" if existing == path else f"its nearest existing folder {existing}"
        return (
            f"{what} {location} cannot be written by this user ({where} is not writable): run the jobs as a user "
            f"that may write there, or point {what} elsewhere"
        )
    return None


def _columns(config: AppConfig, table: TableConfig) -> list[str]:
    """``table``'s key and zorder_by columns that its Delta table does not have (none when it does not exist)."""
    path = config.storage.table_path(table)
    try:
        found = open_table(config, path)
    except Exception as exc:  # noqa: BLE001 (unreadable here: the jobs will say why; not the config's fault)
        return [f"tables[{table.name}]: its Delta table at {path} cannot be read to check its columns ({exc})"]
    if found is None:
        return []
    columns = {f.name for f in found.schema().fields}
    out = []
    for setting, names in (("key", table.key), ("zorder_by", table.zorder_by)):
        missing = [c for c in names if c not in columns]
        if missing:
            out.append(
                f"tables[{table.name}].{setting}: {missing} not among the columns of its Delta table at {path} "
                f"({', '.join(sorted(c for c in columns if not c.startswith('_cdc_')))}): write them as the "
                "source names them"
            )
    return out
