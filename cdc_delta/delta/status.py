"""What the replicated tables look like now: last commit, the landing merged, freshness, row counts.

Read with delta-rs (``deltalake``, :mod:`cdc_delta.delta.delta_rs`) from the Delta log and the files'
statistics, without Spark, so that ``cdc-delta status`` answers in seconds.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdc_delta import columns as C
from cdc_delta.config import AppConfig, TableConfig, is_uri
from cdc_delta.delta import stop_records
from cdc_delta.delta.commits import StreamCommit, merge_txn_app_id, parse_commit
from cdc_delta.delta.delta_rs import count, open_table, read
from cdc_delta.delta.registry import parse_registration, registry_file, registry_path
from cdc_delta.delta.tables import STOPPED_PROPERTY, STOPPED_REASON_PROPERTY
from cdc_delta.exceptions import one_line

HISTORY_DEPTH = 50
"""Commits read back to find the stream's last one (maintenance commits come between)."""


@dataclass(frozen=True)
class TableStatus:
    """One table's latest state."""

    table: str
    version: int | None = None
    last_commit: dt.datetime | None = None
    max_source_ts_ms: int | None = None
    """The newest source time among the changes the table's last merge applied."""
    merged_seq: int | None = None
    """The newest landing the table holds (None: it has merged none)."""
    pending: int = 0
    """Changes landed in the changelog but not merged into the table yet."""
    oldest_pending_s: float | None = None
    """How long ago the oldest of them landed (the merge lag; None when none is pending)."""
    rows: int | None = None
    deleted: int | None = None
    stopped_reason: str | None = None
    """Why the table is stopped (its ``cdc_delta.stopped_reason``); None while it is not."""
    unreadable: str | None = None
    """Why its rows cannot be counted (a data file lost, say); None when they can."""


def table_status(config: AppConfig, tables: list[TableConfig]) -> list[TableStatus]:
    """The state of ``tables`` (every table: :meth:`~cdc_delta.catalog.TableCatalog.tables`), several
    read at once (delta-rs waits on files without the GIL);
    its pending changes are the changelog's to count (:func:`cdc_delta.changelog.status.with_pending`)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(lambda t: _one(config, t.name, config.storage.table_path(t)), tables))


def _one(config: AppConfig, name: str, path: str) -> TableStatus:
    """One table's state; a table whose Delta log cannot be read (a torn commit file, a permission) is
    one that says why, never the end of ``status``."""
    recorded = stop_records.recorded(config, name)  # a stop the table could not hold
    try:
        status = _read_one(config, name, path)
    except Exception as exc:  # noqa: BLE001 (reported per table: the others are still shown)
        status = TableStatus(name, unreadable=f"its Delta log at {path} cannot be read: {one_line(exc)}")
    if recorded is not None and status.stopped_reason is None:
        status = dataclasses.replace(status, stopped_reason=recorded)
    return status


def _read_one(config: AppConfig, name: str, path: str) -> TableStatus:
    import pyarrow.compute as pc

    table = open_table(config, path)
    if table is None:
        return TableStatus(name, stopped_reason=_vanished(config, name, path))
    history = table.history(HISTORY_DEPTH)
    latest = history[0] if history else {}
    record: StreamCommit | None = None
    for entry in history:
        commit = parse_commit(
            entry.get("version", 0),
            _when(entry.get("timestamp")),
            entry.get("operation", ""),
            entry.get("userMetadata"),
            entry.get("operationMetrics"),
            config.app_id,
        )
        if commit is not None:
            record = commit.record
            break
    rows, deleted, unreadable = None, None, None
    try:
        dataset = table.to_pyarrow_dataset()
        # The one column read, summed (count_rows with a filter answered 0 on these tables: its statistics
        # pruning is wrong for booleans).
        flags = read(dataset, [C.DELETED]).column(0)
        deleted = pc.sum(flags.cast("int64")).as_py() or 0
        rows = count(dataset)
    except Exception as exc:  # noqa: BLE001 (a damaged table is reported, not the end of status)
        unreadable = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    merged = table.transaction_version(merge_txn_app_id(config.app_id, name))
    return TableStatus(
        table=name,
        version=table.version(),
        last_commit=_when(latest.get("timestamp")),
        max_source_ts_ms=record.table_max_source_ts_ms if record is not None else None,
        merged_seq=merged,
        rows=rows,
        deleted=deleted,
        stopped_reason=_stopped(table.metadata().configuration),
        unreadable=unreadable,
    )


def _vanished(config: AppConfig, name: str, path: str) -> str | None:
    """Why a table the stream registered has no Delta table now (a local root's registry is read; an
    object store's is the stream's to tell), or None."""
    folder = registry_path(config)
    if is_uri(folder):
        return None
    try:
        registered = parse_registration(Path(registry_file(folder, name)).read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError):
        return None
    return (
        f"registered at {registered.registered_at}, but there is no Delta table at {path} now: the stream "
        f"stops it; restore the table from a backup, or accept the loss with `cdc-delta resume-table --table {name}`"
    )


def _stopped(properties: dict[str, str]) -> str | None:
    if properties.get(STOPPED_PROPERTY) != "true":
        return None
    return properties.get(STOPPED_REASON_PROPERTY) or "no reason recorded"


def _when(millis: Any) -> dt.datetime | None:
    if not isinstance(millis, int):
        return None
    return dt.datetime.fromtimestamp(millis / 1000, dt.timezone.utc).replace(tzinfo=None)


def dead_letter_count(config: AppConfig) -> int:
    """Dead letters still to do: those ``replay-dead-letters`` has not replayed."""
    import pyarrow.compute as pc

    table = open_table(config, config.storage.dead_letters)
    if table is None:
        return 0
    dataset = table.to_pyarrow_dataset()
    if C.REPLAYED_AT not in dataset.schema.names:
        return count(dataset)
    column = read(dataset, [C.REPLAYED_AT]).column(0)
    return len(column) - pc.count(column).as_py()  # count: the non-null ones
