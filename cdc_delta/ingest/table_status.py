"""What the replicated tables look like now: last commit, stream position, freshness, row counts."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.config import AppConfig
from cdc_delta.ingest.commit_log import app_commits


@dataclass(frozen=True)
class TableStatus:
    """One table's latest state."""

    table: str
    version: int | None = None
    last_commit: dt.datetime | None = None
    max_source_ts_ms: int | None = None
    offsets: dict[str, dict[str, int]] | None = None
    rows: int | None = None
    deleted: int | None = None


def last_stream_commit(spark: SparkSession, path: str, app_id: str) -> dict | None:
    """The metadata of the newest commit this app's stream made to the table (None if none)."""
    commit = next(app_commits(DeltaTable.forPath(spark, path), app_id, limit=50), None)
    return commit.metadata if commit else None


def table_status(spark: SparkSession, config: AppConfig) -> list[TableStatus]:
    out = []
    for table in config.tables:
        path = config.storage.table_path(table)
        if not DeltaTable.isDeltaTable(spark, path):
            out.append(TableStatus(table.name))
            continue
        latest = DeltaTable.forPath(spark, path).history(1).first()
        meta = last_stream_commit(spark, path, config.app_id) or {}
        counts = (
            spark.read.format("delta")
            .load(path)
            .agg(F.count(F.lit(1)).alias("rows"), F.sum(F.col(C.DELETED).cast("int")).alias("deleted"))
            .first()
        )
        out.append(
            TableStatus(
                table=table.name,
                version=latest["version"] if latest else None,
                last_commit=latest["timestamp"] if latest else None,
                max_source_ts_ms=meta.get("table_max_source_ts_ms"),
                offsets=meta.get("offsets"),
                rows=counts["rows"] if counts else None,
                deleted=(counts["deleted"] or 0) if counts else None,
            )
        )
    return out


def delta_positions(tables: list[TableStatus]) -> dict[tuple[str, int], int]:
    """Per topic partition, the next offset after the highest one any table's last commit recorded."""
    out: dict[tuple[str, int], int] = {}
    for status in tables:
        for topic, partitions in (status.offsets or {}).items():
            for partition, offset in partitions.items():
                key = (topic, int(partition))
                out[key] = max(out.get(key, 0), offset + 1)
    return out


def dead_letter_count(spark: SparkSession, config: AppConfig) -> int:
    path = config.storage.dead_letters
    if not DeltaTable.isDeltaTable(spark, path):
        return 0
    return spark.read.format("delta").load(path).count()
