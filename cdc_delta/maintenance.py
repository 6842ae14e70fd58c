"""The hourly maintenance of the replicated tables: OPTIMIZE, tombstone purge, VACUUM, checkpoint.

Safe beside the running stream: every command is retried when it loses a write race; OPTIMIZE and
the purge, which a busy stream can beat every time, hold the stream's writes to the table briefly
once they have lost a few (:mod:`cdc_delta.write_hold`); a lock keeps two runs apart.

A soft-deleted row (tombstone) is purged only when all hold:
- its source change is older than ``maintenance.tombstone_retention_hours``;
- the stream has read past it on every partition: its source time is before the smallest
  per-partition source time recorded by the table's latest stream commit (an older event of the
  same key can then no longer arrive and resurrect the row);
- where the table has nightly snapshots (a stock export, or a snapshot published), a published
  snapshot has absorbed it: its source time is before that snapshot's cut-off.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TypeVar

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from cdc_delta import columns as C
from cdc_delta.config import AppConfig, TableConfig, is_uri
from cdc_delta.exceptions import ConfigError
from cdc_delta.lock import exclusive_lock
from cdc_delta.reports import write_report
from cdc_delta.retry import is_conflict, retry_on_conflict
from cdc_delta.snapshot import absorbed_before
from cdc_delta.table_status import last_stream_commit
from cdc_delta.write_hold import hold_path, holding_writes

logger = logging.getLogger(__name__)
T = TypeVar("T")

RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
OPTIMIZE_MAX_FILE_SIZE = "spark.databricks.delta.optimize.maxFileSize"
# VACUUM lists a table's files in this many tasks; Spark's default of 10,000 costs ~30 s of empty
# tasks per table on 2 cores, for tables that are one folder each (unpartitioned).
LISTING_PARALLELISM = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
# OPTIMIZE commits after every this many target-sized files' worth of input, so a lost write race
# costs one batch of work, not the whole table's.
OPTIMIZE_BATCH_SIZE = "spark.databricks.delta.optimize.batchSize"
OPTIMIZE_BATCH_FILES = 16
# Lost write races after which OPTIMIZE or the purge holds the stream's writes to the table.
RACES_BEFORE_HOLD = 3


@dataclass(frozen=True)
class TableReport:
    """What one maintenance run did to one table."""

    table: str
    files_before: int = 0
    bytes_before: int = 0
    files_after: int = 0
    bytes_after: int = 0
    files_compacted: int = 0
    rows_purged: int = 0
    purge_cutoff: str | None = None
    files_vacuumed: int = 0
    checkpoint_version: int | None = None
    """The table version the run's own Delta checkpoint (written after VACUUM) holds."""
    duration_s: float = 0.0
    skipped: str | None = None


@dataclass(frozen=True)
class MaintenanceReport:
    """One run over every table."""

    started_at: str
    tables: list[TableReport] = field(default_factory=list)
    duration_s: float = 0.0


def _size(spark: SparkSession, path: str) -> tuple[int, int]:
    row = DeltaTable.forPath(spark, path).detail().select("numFiles", "sizeInBytes").first()
    return (int(row["numFiles"]), int(row["sizeInBytes"])) if row else (0, 0)


def stream_watermark_ms(spark: SparkSession, path: str, app_id: str) -> int | None:
    """The smallest per-partition source time the table's latest stream commit recorded."""
    meta = last_stream_commit(spark, path, app_id) or {}
    per_partition = [ts for parts in (meta.get("partition_max_source_ts_ms") or {}).values() for ts in parts.values()]
    return min(per_partition) if per_partition else None


def purge_cutoff(
    now: dt.datetime,
    retention_hours: float,
    watermark_ms: int | None,
    snapshot_required: bool = False,
    absorbed_before: dt.datetime | None = None,
) -> dt.datetime | None:
    """Tombstones whose source change is before this instant may be purged (None: none may).

    With ``snapshot_required`` only those a published snapshot absorbed (before its cut-off) may go:
    the next snapshot starts from that one (or from the stock export), and a purged tombstone would
    bring the deleted row back.
    """
    if watermark_ms is None or (snapshot_required and absorbed_before is None):
        return None
    by_retention = now - dt.timedelta(hours=retention_hours)
    by_stream = dt.datetime.fromtimestamp(watermark_ms / 1000, tz=dt.timezone.utc)
    return min(by_retention, by_stream, *([absorbed_before] if snapshot_required and absorbed_before else []))


def snapshot_condition(spark: SparkSession, config: AppConfig, table: TableConfig) -> tuple[bool, dt.datetime | None]:
    """(whether purging waits for the nightly snapshot, the latest published snapshot's cut-off).

    It waits when the table is a snapshot table with a stock export (the first snapshot starts from
    it) or with a snapshot already published (the next one starts from that).
    """
    if table.name not in {t.name for t in config.snapshot_tables()}:
        return False, None
    absorbed = absorbed_before(spark, config, table.name)
    return table.stock is not None or absorbed is not None, absorbed


def beside_stream(action: Callable[[], T], what: str, config: AppConfig, table: TableConfig) -> T:
    """Run a command that the stream's commits can beat: retried when it loses a write race; after
    RACES_BEFORE_HOLD lost races, run again while the stream's writes to the table are held."""
    try:
        return retry_on_conflict(action, what, attempts=RACES_BEFORE_HOLD)
    except Exception as exc:  # the JVM's conflict errors carry no Python type of their own
        if not is_conflict(exc):
            raise
    hold = hold_path(lock_path(config), table.name)
    with holding_writes(hold, config.maintenance.stream_hold_max_seconds, f"{what} lost {RACES_BEFORE_HOLD} races"):
        return retry_on_conflict(action, what)


def _optimize(spark: SparkSession, config: AppConfig, table: TableConfig, path: str) -> int:
    target = DeltaTable.forPath(spark, path)
    zorder = list(table.zorder_by or table.key) if config.maintenance.zorder else []
    run = (lambda: target.optimize().executeZOrderBy(*zorder)) if zorder else target.optimize().executeCompaction
    metrics = beside_stream(run, f"OPTIMIZE {table.name}", config, table).select("metrics").first()
    return int(metrics["metrics"]["numFilesRemoved"]) if metrics else 0


def _purge(spark: SparkSession, config: AppConfig, table: TableConfig, path: str, cutoff: dt.datetime) -> int:
    """Delete the tombstones before ``cutoff``; returns how many (from the DELETE's own result, not
    the history, where a concurrent stream commit may be newest)."""
    micros = round(cutoff.timestamp() * 1_000_000)
    statement = (
        f"DELETE FROM {C.delta_path_identifier(path)} WHERE {C.DELETED} AND {C.SOURCE_TS} < timestamp_micros({micros})"
    )
    result = beside_stream(lambda: spark.sql(statement).first(), f"tombstone purge of {table.name}", config, table)
    return int(result["num_affected_rows"]) if result else 0


def _vacuum(spark: SparkSession, config: AppConfig, table: TableConfig, path: str) -> int:
    hours = config.maintenance.vacuum_retention_hours
    target = DeltaTable.forPath(spark, path)
    retry_on_conflict(lambda: target.vacuum(hours), f"VACUUM {table.name}")
    for row in target.history(5).select("operation", "operationMetrics").collect():
        if row["operation"] == "VACUUM END":
            return int((row["operationMetrics"] or {}).get("numDeletedFiles", 0))
    return 0


def _checkpoint(spark: SparkSession, path: str) -> int:
    """Write a Delta checkpoint of the table's latest version; returns that version.

    Delta writes one by itself only every ``delta.checkpointInterval`` commits (10); one right after
    the run's OPTIMIZE, purge and VACUUM commits means a reader (the stream's next MERGE, a query, the
    snapshot's time travel) rebuilds the table's state from it instead of replaying those commits.
    There is no Python or SQL API for it: the JVM ``DeltaLog`` is called, through the method that
    raises on failure (``DeltaLog.checkpoint`` logs the error and returns). Safe beside the stream:
    a checkpoint is no commit, and Delta also reads the log past an older ``_last_checkpoint``. Like
    Delta's own checkpoints, it then removes log entries older than ``delta.logRetentionDuration``.
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    none = jvm.scala.Option.empty()
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
    snapshot = log.update(False, none, none)
    log.checkpointAndCleanUpDeltaLog(snapshot, none)
    return int(snapshot.version())


def maintain_table(spark: SparkSession, config: AppConfig, table: TableConfig, now: dt.datetime) -> TableReport:
    """OPTIMIZE, purge old tombstones, VACUUM, checkpoint one table; returns what it did."""
    path = config.storage.table_path(table)
    if not DeltaTable.isDeltaTable(spark, path):
        return TableReport(table.name, skipped="no table yet")
    started = time.monotonic()
    files_before, bytes_before = _size(spark, path)
    compacted = _optimize(spark, config, table, path)
    required, absorbed = snapshot_condition(spark, config, table)
    watermark = stream_watermark_ms(spark, path, config.app_id)
    cutoff = purge_cutoff(now, config.maintenance.tombstone_retention_hours, watermark, required, absorbed)
    purged = _purge(spark, config, table, path, cutoff) if cutoff is not None else 0
    vacuumed = _vacuum(spark, config, table, path)
    checkpoint = _checkpoint(spark, path)
    files_after, bytes_after = _size(spark, path)
    report = TableReport(
        table=table.name,
        files_before=files_before,
        bytes_before=bytes_before,
        files_after=files_after,
        bytes_after=bytes_after,
        files_compacted=compacted,
        rows_purged=purged,
        purge_cutoff=cutoff.isoformat() if cutoff else None,
        files_vacuumed=vacuumed,
        checkpoint_version=checkpoint,
        duration_s=round(time.monotonic() - started, 2),
    )
    logger.info(
        "maintained %s: files %d -> %d, bytes %d -> %d, %d tombstones purged (before %s), %d files vacuumed, "
        "checkpoint at version %d, %.1fs",
        table.name,
        files_before,
        files_after,
        bytes_before,
        bytes_after,
        purged,
        report.purge_cutoff
        or ("nothing: no stream position yet" if watermark is None else "nothing: no published snapshot yet"),
        vacuumed,
        checkpoint,
        report.duration_s,
    )
    return report


def lock_path(config: AppConfig) -> str:
    """The lock file of maintenance runs (must be on a filesystem every runner shares)."""
    if config.maintenance.lock_path:
        return config.maintenance.lock_path
    root = config.storage.root
    if is_uri(root):
        raise ConfigError(f"storage.root {root!r} is not local: set maintenance.lock_path to a shared local path")
    return os.path.join(root, "_cdc_maintenance.lock")


def run_maintenance(
    spark: SparkSession, config: AppConfig, now: dt.datetime | None = None, wait_s: float = 0.0
) -> MaintenanceReport:
    """Maintain every table under the maintenance lock, and write the JSON report."""
    now = now or dt.datetime.now(dt.timezone.utc)
    m = config.maintenance
    if m.vacuum_retention_hours < 168:
        logger.warning(
            "VACUUM keeps only %.1f h of history (below Delta's 168 h check, allowed by config): "
            "time travel and slow readers cannot go further back",
            m.vacuum_retention_hours,
        )
    started = time.monotonic()
    with exclusive_lock(lock_path(config), m.lock_stale_after_minutes * 60, wait_s):
        spark.conf.set(RETENTION_CHECK, str(not m.allow_short_retention).lower())
        spark.conf.set(OPTIMIZE_MAX_FILE_SIZE, str(m.target_file_size_mb * 1024 * 1024))
        spark.conf.set(OPTIMIZE_BATCH_SIZE, str(OPTIMIZE_BATCH_FILES * m.target_file_size_mb * 1024 * 1024))
        if not spark.sparkContext.getConf().contains(LISTING_PARALLELISM):  # unless spark.conf sets it
            spark.conf.set(LISTING_PARALLELISM, str(spark.sparkContext.defaultParallelism))
        tables = [maintain_table(spark, config, table, now) for table in config.tables]
    report = MaintenanceReport(now.isoformat(timespec="seconds"), tables, round(time.monotonic() - started, 2))
    folder = config.under_root(m.report_dir, "_cdc_maintenance_reports")
    write_report(folder, f"maintenance-{now.strftime('%Y%m%dT%H%M%SZ')}", asdict(report))
    return report
