"""The snapshot log: a Delta table with one row per published table and day (Delta version, batch,
stream positions, location, row count), which the next night's base and the tombstone purge read."""

from __future__ import annotations

import datetime as dt

from delta.tables import DeltaTable
from pyspark.sql import Row, SparkSession
from pyspark.sql import functions as F

from cdc_delta.config import AppConfig

LOG_SCHEMA = (
    "table string, dt string, run_id string, hive_table string, location string, base string, "
    "delta_version bigint, batch_id bigint, cutoff timestamp, positions string, rows bigint, published_at timestamp"
)


def log_path(config: AppConfig) -> str:
    return config.under_root(config.snapshot.log_path, "_cdc_snapshots")


def published(spark: SparkSession, config: AppConfig, table: str) -> list[Row]:
    """Every snapshot published for ``table``, the latest run of each day, oldest day first."""
    path = log_path(config)
    if not DeltaTable.isDeltaTable(spark, path):
        return []
    rows = spark.read.format("delta").load(path).where(F.col("table") == table).collect()
    latest: dict[str, Row] = {}
    for row in sorted(rows, key=lambda r: (r["dt"], r["published_at"], r["run_id"])):
        latest[row["dt"]] = row
    return [latest[d] for d in sorted(latest)]


def absorbed_before(spark: SparkSession, config: AppConfig, table: str) -> dt.datetime | None:
    """Changes before this instant are in a published snapshot (the latest cut-off; None: none)."""
    cutoffs = [r["cutoff"] for r in published(spark, config, table)]
    if not cutoffs:
        return None
    latest = max(cutoffs)
    return latest if latest.tzinfo else latest.replace(tzinfo=dt.timezone.utc)


def record(spark: SparkSession, config: AppConfig, entry: tuple[object, ...]) -> None:
    """Append one published snapshot (a row of :data:`LOG_SCHEMA`) to the log."""
    spark.createDataFrame([entry], LOG_SCHEMA).write.format("delta").mode("append").save(log_path(config))
