"""Count each table's changes per 15 minutes of source time into ``<storage.root>/_cdc_activity``: run
by the hourly maintenance before it deletes merged changes from the changelog, over the landings since
its last run. Snapshot reads (op ``r``) are not counted: the source did not change.

Each run adds the counts of landings (through, newest] with one MERGE whose Delta transaction id
``<app_id>:activity`` records ``newest`` as its version, so that a run repeated after a crash adds
nothing twice (Delta skips a transaction version it has recorded) and the next run starts after it.
Buckets older than ``activity.history_days`` (and a day) before the table's newest change are deleted:
a table that stopped keeps the history that shows it was busy, so it stays silent."""

from __future__ import annotations

import logging
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from cdc_delta.activity.judge import BUCKET_MS, DAY_MS
from cdc_delta.changelog.table import LAND_SEQ, TABLE, changelog_path
from cdc_delta.config import AppConfig
from cdc_delta.delta.commits import Commit, StreamCommit, delta_transaction, txn_version
from cdc_delta.delta.tables import create_if_missing

logger = logging.getLogger(__name__)

ACTIVITY_SCHEMA = StructType(
    [StructField(TABLE, StringType())] + [StructField(c, LongType()) for c in ("bucket_ms", "changes", "last_ms")]
)
"""Per table and bucket (its start, ms since the epoch): changes, and the newest change's source time."""


def activity_path(config: AppConfig) -> str:
    return config.under_root(None, "_cdc_activity")


def activity_txn_id(config: AppConfig) -> str:
    """The Delta transaction id of the counts; its version is the newest landing they hold."""
    return f"{config.app_id}:activity"


def refresh(spark: SparkSession, config: AppConfig, now_ms: int) -> tuple[int, int]:
    """Add the counts of the landings since the last run. Returns (the newest landing counted, -1:
    none; the changes counted by this run)."""
    source = changelog_path(config)
    if not DeltaTable.isDeltaTable(spark, source):
        return -1, 0
    path = activity_path(config)
    create_if_missing(spark, path, ACTIVITY_SCHEMA)
    through = txn_version(spark, path, activity_txn_id(config))
    landed = spark.read.format("delta").load(source).where(F.col(LAND_SEQ) > through)
    newest = _single(landed.agg(F.max(LAND_SEQ)))
    if newest is None:
        return through, 0
    ts = F.coalesce(F.col("source_ts_ms"), F.unix_millis(F.col("landed_at")))
    counts = (
        landed.where((F.col(LAND_SEQ) <= newest) & (F.col("op") != "r") & F.col(TABLE).isNotNull())
        .select(F.col(TABLE), ts.alias("ts"))
        .groupBy(F.col(TABLE), (F.col("ts") - F.col("ts") % BUCKET_MS).alias("bucket_ms"))
        .agg(F.count(F.lit(1)).alias("changes"), F.max("ts").alias("last_ms"))
    ).cache()
    try:
        added = _single(counts.agg(F.sum("changes"))) or 0
        record = StreamCommit(config.app_id, land_seq=int(newest), operation="activity")
        target = DeltaTable.forPath(spark, path)
        with delta_transaction(spark, Commit(activity_txn_id(config), int(newest), record)):
            (
                target.alias("t")
                .merge(counts.alias("s"), f"t.`{TABLE}` = s.`{TABLE}` AND t.bucket_ms = s.bucket_ms")
                .whenMatchedUpdate(
                    set={"changes": "t.changes + s.changes", "last_ms": "greatest(t.last_ms, s.last_ms)"}
                )
                .whenNotMatchedInsertAll()
                .execute()
            )
    finally:
        counts.unpersist()
    _prune(spark, path, now_ms, config.activity.history_days)
    logger.info("activity: counted %d changes of landings %d..%d", added, through + 1, newest)
    return int(newest), int(added)


def _single(frame: DataFrame) -> Any:
    row = frame.first()
    return None if row is None else row[0]


def _prune(spark: SparkSession, path: str, now_ms: int, history_days: int) -> None:
    """Delete each table's buckets older than ``history_days`` (and a day) before its newest one (at most
    before now)."""
    counts = spark.read.format("delta").load(path)
    keep_from = counts.groupBy(TABLE).agg(
        (F.least(F.max("bucket_ms"), F.lit(now_ms)) - (history_days + 1) * DAY_MS).alias("keep_from")
    )
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(keep_from.alias("k"), f"t.`{TABLE}` = k.`{TABLE}` AND t.bucket_ms < k.keep_from")
        .whenMatchedDelete()
        .execute()
    )
