"""The Delta commands of a maintenance run, each safe beside the stream that keeps writing: OPTIMIZE,
the tombstone purge, VACUUM and a checkpoint. A command that loses a write race is retried; OPTIMIZE and
the purge, which a busy stream can beat every time, hold the stream's writes to the table once they
have lost a few (:mod:`cdc_delta.delta.hold`)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import TypeVar

from delta.tables import DeltaTable
from pyspark.sql import Row, SparkSession

from cdc_delta import columns as C
from cdc_delta import hadoop_fs
from cdc_delta.config import AppConfig, MaintenanceConfig, TableConfig
from cdc_delta.delta.hold import hold_path, holding_writes
from cdc_delta.delta.tables import latest_snapshot, writer_features
from cdc_delta.lock import lock_path
from cdc_delta.retry import is_conflict, retry_on_conflict
from cdc_delta.spark_session import console_quiet

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


def table_size(spark: SparkSession, path: str) -> tuple[int, int]:
    """The table's files and bytes now, from its snapshot (0.02 s a table; DESCRIBE DETAIL took 0.4-1 s)."""
    snapshot = latest_snapshot(spark, path)
    return int(snapshot.numOfFiles()), int(snapshot.sizeInBytes())


def beside_stream(action: Callable[[], T], what: str, config: AppConfig, name: str) -> T:
    """Run a command that the stream's commits can beat: retried when it loses a write race; after
    RACES_BEFORE_HOLD lost races, run again while the stream's writes to ``name`` (a table, or the
    changelog: :data:`~cdc_delta.delta.hold.CHANGELOG`) are held."""
    try:
        return retry_on_conflict(action, what, attempts=RACES_BEFORE_HOLD)
    except Exception as exc:  # the JVM's conflict errors carry no Python type of their own
        if not is_conflict(exc):
            raise
    hold = hold_path(lock_path(config, "maintenance"), name)
    with holding_writes(hold, config.maintenance.stream_hold_max_seconds, f"{what} lost {RACES_BEFORE_HOLD} races"):
        return retry_on_conflict(action, what)


def optimize(
    spark: SparkSession, config: AppConfig, table: TableConfig, path: str, files: int, history: bool = False
) -> int:
    """OPTIMIZE the table (``files``: how many it holds), or its history (``history``: compacted, never
    Z-ordered: it grows with every merge, and a Z-order rewrites it all); returns the files it replaced.

    A table of one file or none has nothing to compact, so OPTIMIZE is not run for it (its planning
    alone costs ~0.3 s a table, summed, a third of an idle hourly run of quiet tables), unless OPTIMIZE may
    rewrite a lone file: to Z-order or cluster it, or (in some Delta versions) to drop the rows its
    deletion vector deletes. Z-ordering rewrites every file of the table, so it is not run for a table
    that has not changed since its last (:func:`still_zordered`)."""
    zorder = list(table.zorder_by or table.key) if config.maintenance.zorder and not history else []
    if zorder and still_zordered(spark, path, zorder, files):
        return 0
    if files <= 1 and not zorder and not _may_rewrite_lone_file(spark, path):
        return 0
    target = DeltaTable.forPath(spark, path)
    run = (lambda: target.optimize().executeZOrderBy(*zorder)) if zorder else target.optimize().executeCompaction
    what = f"OPTIMIZE {table.name}{' history' if history else ''}"
    metrics = beside_stream(run, what, config, table.name).select("metrics").first()
    return int(metrics["metrics"]["numFilesRemoved"]) if metrics else 0


ZORDER_HISTORY_DEPTH = 48
"""Commit entries :func:`still_zordered` reads: a day of hourly runs' VACUUM commits (two a run). A table idle
for longer is Z-ordered again once its last OPTIMIZE is out of reach: once a day with VACUUM every run, about
every 24 days with ``vacuum_interval_hours`` 24."""
VACUUM_OPERATIONS = frozenset({"VACUUM START", "VACUUM END"})


def still_zordered(spark: SparkSession, path: str, columns: list[str], files: int) -> bool:
    """Whether the table (of ``files`` files now) is as its last OPTIMIZE ZORDER BY ``columns`` left it
    (:func:`unchanged_since_zorder` of its newest :data:`ZORDER_HISTORY_DEPTH` commit entries: one Spark
    job). Delta's Z-order takes every file of the table, so a second run on an unchanged table rewrites it
    all again."""
    history = DeltaTable.forPath(spark, path).history(ZORDER_HISTORY_DEPTH)
    entries = history.select("version", "readVersion", "operation", "operationParameters", "operationMetrics")
    return unchanged_since_zorder(entries.collect(), columns, files)


def unchanged_since_zorder(history: list[Row], columns: list[str], files: int) -> bool:
    """From a table's newest commit entries, newest first, and its file count now: whether the newest commit
    that does not keep the Z-order (:func:`_keeps_zorder`: VACUUM's, a DELETE that rewrote files) is an
    OPTIMIZE of the whole table Z-ordered by ``columns``; no commit but that run's own and those lies between
    the version it read and its own (a merge that committed while it ran added files it did not Z-order);
    and the files it wrote, with what the DELETEs after it added and removed, are the table's files now (a
    merge before the version it recorded as read, where its commit was retried from a newer version, shows
    there). Unknown (a commit between out of reach, no read version, no file counts) is not unchanged."""
    since = [c for c in history if not _keeps_zorder(c)]
    if not since or not _zordered_by(since[0], columns) or since[0]["readVersion"] is None:
        return False
    read, version = int(since[0]["readVersion"]), int(since[0]["version"])
    run = {int(c["version"]): c for c in history if read < int(c["version"]) <= version}
    if any(v not in run for v in range(read + 1, version + 1)):
        return False
    if not all(_zordered_by(c, columns) or _keeps_zorder(c) for c in run.values()):
        return False
    written = [_metric(c, "numAddedFiles") for c in run.values() if c["operation"] == "OPTIMIZE"]
    after = [
        _metric(c, "numAddedFiles") - _metric(c, "numRemovedFiles") for c in history if int(c["version"]) > version
    ]
    return files == sum(written) + sum(after)


def _keeps_zorder(commit: Row) -> bool:
    """A commit after which the table's files are as Z-ordered as before: VACUUM's (it changes none of them),
    a DELETE that rewrote files (the tombstone purge: it only removes rows, what is left keeps its order).
    A DELETE that wrote deletion vectors leaves the rows in the files, which the Z-order would drop."""
    if commit["operation"] in VACUUM_OPERATIONS:
        return True
    return commit["operation"] == "DELETE" and _metric(commit, "numDeletionVectorsAdded") == 0


def _metric(commit: Row, name: str) -> int:
    """One of the history entry's operation metrics (0 where it has none)."""
    return int((commit["operationMetrics"] or {}).get(name) or 0)


def _zordered_by(commit: Row, columns: list[str]) -> bool:
    """Whether the history entry is an OPTIMIZE of the whole table (no WHERE) that Z-ordered by ``columns``."""
    if commit["operation"] != "OPTIMIZE":
        return False
    parameters = commit["operationParameters"] or {}
    order, where = parameters.get("zOrderBy"), parameters.get("predicate", "[]")
    return isinstance(order, str) and json.loads(order) == columns and json.loads(where or "[]") == []


LONE_FILE_FEATURES = frozenset({"deletionVectors", "clustering"})
"""Table features under which OPTIMIZE may rewrite a table's only file."""


def _may_rewrite_lone_file(spark: SparkSession, path: str) -> bool:
    """Whether the table's protocol has a feature under which OPTIMIZE may rewrite a lone file (its
    snapshot as :func:`table_size` just read it: no second listing of the log)."""
    return not LONE_FILE_FEATURES.isdisjoint(writer_features(spark, path))


def purge(spark: SparkSession, config: AppConfig, table: TableConfig, path: str, cutoff: dt.datetime) -> int:
    """Delete the tombstones before ``cutoff``; returns how many (from the DELETE's own result, not
    the history, where a concurrent stream commit may be newest)."""
    micros = round(cutoff.timestamp() * 1_000_000)
    statement = (
        f"DELETE FROM {C.delta_path_identifier(path)} WHERE {C.DELETED} AND {C.SOURCE_TS} < timestamp_micros({micros})"
    )
    result = beside_stream(lambda: spark.sql(statement).first(), f"tombstone purge of {table.name}", config, table.name)
    return int(result["num_affected_rows"]) if result else 0


def vacuum_due(spark: SparkSession, config: AppConfig, path: str, now: dt.datetime) -> bool:
    """Whether the table's last VACUUM is ``maintenance.vacuum_interval_hours`` old or more (or unknown:
    Delta writes ``_delta_log/_last_vacuum_info`` at each VACUUM)."""
    interval = config.maintenance.vacuum_interval_hours
    if interval <= 0:
        return True
    last_ms = hadoop_fs.modified_ms(spark, f"{path.rstrip('/')}/_delta_log/_last_vacuum_info")
    return last_ms is None or now.timestamp() * 1000 - last_ms >= interval * 3_600_000


def vacuum(spark: SparkSession, config: AppConfig, name: str, path: str) -> int:
    hours = config.maintenance.vacuum_retention_hours
    target = DeltaTable.forPath(spark, path)
    with console_quiet(spark):
        retry_on_conflict(lambda: target.vacuum(hours), f"VACUUM {name}")
    for row in target.history(5).select("operation", "operationMetrics").collect():
        if row["operation"] == "VACUUM END":
            return int((row["operationMetrics"] or {}).get("numDeletedFiles", 0))
    return 0


def checkpoint(spark: SparkSession, path: str) -> int:
    """Write a Delta checkpoint of the table's latest version; returns that version.

    Delta writes one by itself only every ``delta.checkpointInterval`` commits (10); one right after
    the run's OPTIMIZE, purge and VACUUM commits means a reader (the stream's next MERGE, a query, the
    snapshot's time travel) rebuilds the table's state from it instead of replaying those commits.
    There is no Python or SQL API for it: the JVM ``DeltaLog`` is called, through the method that
    raises on failure (``DeltaLog.checkpoint`` logs the error and returns). Safe beside the stream:
    a checkpoint is no commit, and Delta also reads the log past an older ``_last_checkpoint``. Like
    Delta's own checkpoints, it then removes log entries older than ``delta.logRetentionDuration``.
    """
    snapshot = latest_snapshot(spark, path)
    snapshot.deltaLog().checkpointAndCleanUpDeltaLog(snapshot, spark.sparkContext._jvm.scala.Option.empty())  # type: ignore[union-attr]
    return int(snapshot.version())


def configure_session(spark: SparkSession, m: MaintenanceConfig) -> None:
    """The session settings the commands run under: VACUUM's retention check, OPTIMIZE's file sizes
    and commit steps, and VACUUM's listing parallelism (unless ``spark.conf`` sets it)."""
    spark.conf.set(RETENTION_CHECK, str(not m.allow_short_retention).lower())
    spark.conf.set(OPTIMIZE_MAX_FILE_SIZE, str(m.target_file_size_mb * 1024 * 1024))
    spark.conf.set(OPTIMIZE_BATCH_SIZE, str(OPTIMIZE_BATCH_FILES * m.target_file_size_mb * 1024 * 1024))
    if not spark.sparkContext.getConf().contains(LISTING_PARALLELISM):
        spark.conf.set(LISTING_PARALLELISM, str(spark.sparkContext.defaultParallelism))
