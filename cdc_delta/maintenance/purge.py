"""When a soft-deleted row (tombstone) may be purged.

A tombstone is purged only when all hold:
- its source change is older than ``maintenance.tombstone_retention_hours``;
- the stream had read past it on every partition when the table was last merged: its source time is
  before the smallest per-partition source time recorded by the landing the table holds up to (an
  older change of the same key can then no longer arrive and resurrect the row);
- where the table has nightly snapshots (a stock export, or a snapshot published), a published
  snapshot has absorbed it: its source time is before that snapshot's cut-off.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from pyspark.sql import Row

from cdc_delta.config import AppConfig, TableConfig
from cdc_delta.delta.commits import AppCommit
from cdc_delta.delta.snapshot_log import absorbed_before


def landing_watermarks(landings: Iterable[AppCommit]) -> dict[int, int]:
    """Per landing: the smallest per-partition source time its batch recorded."""
    out: dict[int, int] = {}
    for commit in landings:
        record = commit.record
        times = [ts for parts in record.partition_max_source_ts_ms.values() for ts in parts.values()]
        if record.operation == "land" and record.land_seq is not None and times:
            out[record.land_seq] = min(times)
    return out


@dataclass(frozen=True)
class PurgeDecision:
    """Tombstones whose source change is before ``cutoff`` may be purged; where none may (``cutoff``
    None), ``waits_for`` says what they wait for."""

    cutoff: dt.datetime | None
    waits_for: str | None = None


def purge_decision(
    now: dt.datetime,
    retention_hours: float,
    watermark_ms: int | None,
    snapshot_required: bool = False,
    absorbed_before: dt.datetime | None = None,
) -> PurgeDecision:
    """Which tombstones may be purged now: those before the earliest of the retention, the stream's
    position (``watermark_ms``) and, with ``snapshot_required``, the cut-off of the published snapshot
    that absorbed them (``absorbed_before``): the next snapshot starts from that one (or from the stock
    export), and a purged tombstone would bring the deleted row back.
    """
    if watermark_ms is None:
        return PurgeDecision(None, "no stream position yet")
    if snapshot_required and absorbed_before is None:
        return PurgeDecision(None, "no published snapshot yet")
    by_retention = now - dt.timedelta(hours=retention_hours)
    by_stream = dt.datetime.fromtimestamp(watermark_ms / 1000, tz=dt.timezone.utc)
    by_snapshot = [absorbed_before] if snapshot_required and absorbed_before else []
    return PurgeDecision(min(by_retention, by_stream, *by_snapshot))


def snapshot_condition(config: AppConfig, table: TableConfig, history: list[Row]) -> tuple[bool, dt.datetime | None]:
    """(whether purging waits for the nightly snapshot, the latest published snapshot's cut-off), from
    the table's ``history`` in the snapshot log.

    It waits when the table is a snapshot table with a stock export (the first snapshot starts from
    it) or with a snapshot already published (the next one starts from that).
    """
    if not config.in_snapshot(table):
        return False, None
    absorbed = absorbed_before(history)
    return table.stock is not None or absorbed is not None, absorbed
