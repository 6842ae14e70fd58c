"""The changelog's share of the hourly maintenance: delete what every table has merged once it is older
than ``changelog.retention_hours``, compact the small files of the landings (bin-packing, in the landings'
row-group size: each landing's rows stay sorted by table, so a reader of one table's changes still skips
most of the others' row groups; a ZORDER would
rewrite the whole changelog every hour), VACUUM and checkpoint. Safe beside the
stream: its landings are blind appends that OPTIMIZE does not conflict with; the DELETE, which they can
beat, holds them after a few lost races, as the tables' commands do."""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc_delta.changelog.table import LAND_SEQ, TABLE, changelog_path, record_deleted, row_group_confs
from cdc_delta.config import AppConfig
from cdc_delta.consistency.read import consistent_point
from cdc_delta.delta.hold import CHANGELOG
from cdc_delta.maintenance import commands
from cdc_delta.spark_session import session_confs

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChangelogReport:
    """What one maintenance run did to the changelog."""

    files_before: int = 0
    files_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    rows_deleted: int = 0
    retention_cutoff: str | None = None
    files_compacted: int = 0
    files_vacuumed: int = 0
    checkpoint_version: int | None = None
    duration_s: float = 0.0
    skipped: str | None = None

    def summary(self) -> str:
        """What the run did to the changelog, in one line (the log's and ``cdc-delta maintain``'s)."""
        if self.skipped:
            return f"skipped ({self.skipped})"
        return (
            f"files {self.files_before} -> {self.files_after}, bytes {self.bytes_before} -> {self.bytes_after}, "
            f"{self.rows_deleted} merged changes deleted (landed before {self.retention_cutoff}), "
            f"{self.files_vacuumed} files vacuumed, checkpoint at version {self.checkpoint_version}, "
            f"{self.duration_s:.1f}s"
        )


def maintain_changelog(
    spark: SparkSession, config: AppConfig, merged: dict[str, int], now: dt.datetime
) -> ChangelogReport:
    """``merged``: per configured table, the newest landing it holds (-1: none). A change is deleted only
    when its table holds it and it landed before the retention; a table missing from ``merged`` (not in
    the config) keeps its changes."""
    path = changelog_path(config)
    if not DeltaTable.isDeltaTable(spark, path):
        return ChangelogReport(skipped="no changelog yet")
    started = time.monotonic()
    files_before, bytes_before = commands.table_size(spark, path)
    cutoff = now - dt.timedelta(hours=config.changelog.retention_hours)
    with session_confs(spark, row_group_confs(config)):  # the files rewritten keep the landings' row groups
        deleted = _delete_merged(spark, config, path, merged, cutoff)
        target = DeltaTable.forPath(spark, path)
        optimized = (
            commands.beside_stream(
                lambda: target.optimize().executeCompaction(), "OPTIMIZE the changelog", config, CHANGELOG
            )
            .select("metrics")
            .first()
        )
    vacuumed = commands.vacuum(spark, config, "the changelog", path)
    checkpoint = commands.checkpoint(spark, path)
    files_after, bytes_after = commands.table_size(spark, path)
    report = ChangelogReport(
        files_before=files_before,
        files_after=files_after,
        bytes_before=bytes_before,
        bytes_after=bytes_after,
        rows_deleted=deleted,
        retention_cutoff=cutoff.isoformat(),
        files_compacted=int(optimized["metrics"]["numFilesRemoved"]) if optimized else 0,
        files_vacuumed=vacuumed,
        checkpoint_version=checkpoint,
        duration_s=round(time.monotonic() - started, 2),
    )
    logger.info("maintained the changelog: %s", report.summary())
    return report


def _point_reads_from(config: AppConfig) -> int | None:
    """The oldest landing the consistent point and a read at it may read again (its ``scan_from``); None
    where there is no point (no transaction metadata); 0 where it could not be read: nothing goes."""
    try:
        found = consistent_point(config)
    except Exception as e:  # noqa: BLE001 (the retention keeps the changes this run, and goes on)
        logger.warning("the changelog's retention deletes nothing this run: the consistent point was not read: %s", e)
        return 0
    return found.point.scan_from if found.point is not None else None


def _delete_merged(
    spark: SparkSession, config: AppConfig, path: str, merged: dict[str, int], cutoff: dt.datetime
) -> int:
    """Delete the changes each table holds that landed before ``cutoff`` and before what the consistent
    point may read again, and the transaction ENDs of the landings all of them hold, in one commit (a MERGE whose
    source is the tables' merged landings); returns how many. What may go is recorded first, per table
    (:func:`~cdc_delta.changelog.table.record_deleted`: a rebuild from the changelog refuses past it)."""
    old = spark.read.format("delta").load(path).where(F.col("landed_at") < F.lit(cutoff).cast("timestamp"))
    found = old.agg(F.max(LAND_SEQ).alias("newest")).first()  # the files' statistics skip the newer ones
    newest_old = found["newest"] if found is not None else None
    if newest_old is None:
        return 0
    # What the consistent point may read again stays: a point held by a change that has not landed keeps the
    # ENDs and the changes a read at it needs.
    reads_from = _point_reads_from(config)
    limit = int(newest_old) if reads_from is None else min(int(newest_old), reads_from - 1)
    held = {name: min(position, limit) for name, position in merged.items() if min(position, limit) >= 0}
    if not held:
        return 0
    record_deleted(spark, config, held)
    # The transactions' ENDs (no table) go with the changes of the landings every table holds.
    bounds: list[tuple[str | None, int]] = [*sorted(held.items()), (None, min(held.values()))]
    positions = spark.createDataFrame(bounds, f"`{TABLE}` string, merged bigint")
    condition = (
        F.col(f"c.`{TABLE}`").eqNullSafe(F.col(f"p.`{TABLE}`"))
        & (F.col(f"c.{LAND_SEQ}") <= F.col("p.merged"))
        & (F.col("c.landed_at") < F.lit(cutoff).cast("timestamp"))
    )
    target = DeltaTable.forPath(spark, path)

    def delete() -> int:
        result = target.alias("c").merge(F.broadcast(positions).alias("p"), condition).whenMatchedDelete().execute()
        row = result.first()
        return int(row["num_deleted_rows"]) if row else 0

    return commands.beside_stream(delete, "the changelog's retention", config, CHANGELOG)
