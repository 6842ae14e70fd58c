"""The snapshot log: a Delta table with one row per published table and day (Delta version, the landing
included, stream positions, location, row count), which the next night's base and the tombstone purge
read. Its ``batch_id`` column holds the changelog landing the snapshot includes (the micro-batch before
the changelog; the name stays so that older logs keep their schema)."""

from __future__ import annotations

import datetime as dt

from delta.tables import DeltaTable
from pyspark.sql import Row, SparkSession

from cdc_delta.config import AppConfig
from cdc_delta.delta.tables import create_if_missing

LOG_SCHEMA = (
    "table string, dt string, run_id string, hive_table string, location string, base string, "
    "delta_version bigint, batch_id bigint, cutoff timestamp, positions string, rows bigint, published_at timestamp, "
    "absorbed_before timestamp"
)
"""``absorbed_before``: every change of the table before it is in the snapshot (the cut-off, or, for a
snapshot cut at a source transaction, the oldest change it left out where that is older: a statement that
ran before the cut-off in a transaction committed after the point). Null in rows written before it was
kept: the cut-off then."""


def log_path(config: AppConfig) -> str:
    return config.under_root(config.snapshot.log_path, "_cdc_snapshots")


def published_all(spark: SparkSession, config: AppConfig) -> dict[str, list[Row]]:
    """Per table, every snapshot published, the latest run of each day, oldest day first: the log is
    read once (a job run reads it once for all its tables)."""
    path = log_path(config)
    if not DeltaTable.isDeltaTable(spark, path):
        return {}
    latest: dict[tuple[str, str], Row] = {}
    rows = spark.read.format("delta").load(path).collect()
    for row in sorted(rows, key=lambda r: (r["dt"], r["published_at"], r["run_id"])):
        latest[(row["table"], row["dt"])] = row
    out: dict[str, list[Row]] = {}
    for (table, _), row in sorted(latest.items()):
        out.setdefault(table, []).append(row)
    return out


def published(spark: SparkSession, config: AppConfig, table: str) -> list[Row]:
    """Every snapshot published for ``table``, the latest run of each day, oldest day first."""
    return published_all(spark, config).get(table, [])


def absorbed_before(history: list[Row]) -> dt.datetime | None:
    """Changes before this instant are in a published snapshot of ``history`` (the latest: its
    ``absorbed_before``, else its cut-off)."""
    if not history:
        return None
    latest = max(history, key=lambda r: r["cutoff"]).asDict()
    cutoff = latest["cutoff"]
    kept = latest.get("absorbed_before")
    when = cutoff if kept is None else min(kept, cutoff)
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def ensure_log(spark: SparkSession, config: AppConfig) -> None:
    """Create the log if it does not exist yet, before tables are published concurrently: appends to
    a Delta table do not conflict, but two appends that both create it do."""
    create_if_missing(spark, log_path(config), spark.createDataFrame([], LOG_SCHEMA).schema)


def record(spark: SparkSession, config: AppConfig, entries: list[tuple[object, ...]]) -> None:
    """Append published snapshots (rows of :data:`LOG_SCHEMA`) to the log, in one commit."""
    rows = spark.createDataFrame(entries, LOG_SCHEMA)
    # A log written before absorbed_before was kept gains the column.
    rows.write.format("delta").mode("append").option("mergeSchema", "true").save(log_path(config))
