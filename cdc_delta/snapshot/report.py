"""What a snapshot run published, per table and in all: the JSON report's content and the log line."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableSnapshot:
    """What the run published for one table."""

    table: str
    hive_table: str
    location: str
    base: str
    """``stock``, ``snapshot dt=<day>`` or ``none``."""
    delta_version: int | None
    rows: int
    base_rows: int
    changed_keys: int
    """Keys the Delta side holds (every key changed since capture began, deleted ones included)."""
    deletes_applied: int
    """Base rows dropped because their key's final state in Delta is deleted."""
    duplicate_keys: int
    stock_rejects: int = 0
    source_count: int | None = None
    count_difference: int | None = None
    """rows - source_count (None without a source count)."""
    ddl: str = ""
    duration_s: float = 0.0


@dataclass(frozen=True)
class SnapshotReport:
    """One run over every snapshot table."""

    date: str
    run_id: str
    cutoff: str
    land_seq: int | None
    """The changelog landing at which the stream passed the cut-off: what the snapshot includes."""
    positions: dict[str, dict[str, int]]
    idle_partitions: list[str]
    tables: list[TableSnapshot] = field(default_factory=list)
    duration_s: float = 0.0
    transaction: str | None = None
    """The source's last transaction before the cut-off, where every table is cut (None: as of the landing,
    without transaction metadata or with ``--at-landing``)."""
    transaction_ts_ms: int | None = None
    """When it committed (epoch milliseconds)."""


def log_published(t: TableSnapshot, day: str, replaced: bool) -> None:
    logger.info(
        "snapshot %s dt=%s: %d rows (base %s: %d, %d changed keys, %d deletes applied) from Delta v%s%s, %s%s",
        t.hive_table,
        day,
        t.rows,
        t.base,
        t.base_rows,
        t.changed_keys,
        t.deletes_applied,
        t.delta_version,
        f", {t.stock_rejects} stock rejects" if t.stock_rejects else "",
        "replaced the partition" if replaced else "new partition",
        f", source count {t.source_count} (difference {t.count_difference})" if t.source_count is not None else "",
    )
