"""The dead-letter Delta table: every record the stream could not apply, with its raw bytes and why."""

from __future__ import annotations

import datetime as dt

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdc_delta.decode.decoded import field

COLUMNS = (
    "app_id",
    "batch_id",
    "topic",
    "partition",
    "offset",
    "kafka_timestamp",
    "key",
    "value",
    "table",
    "reason",
    "dead_lettered_at",
)


def dead_letter_rows(events: DataFrame, app_id: str, batch_id: int, at: dt.datetime, reason: Column) -> DataFrame:
    """Dead-letter rows for decoded Kafka records, with the raw key and value kept byte for byte."""
    return events.select(
        F.lit(app_id).alias("app_id"),
        F.lit(batch_id).cast("bigint").alias("batch_id"),
        F.col("topic"),
        F.col("partition").cast("int").alias("partition"),
        F.col("offset"),
        F.col("timestamp").alias("kafka_timestamp"),
        F.col("key").cast("binary").alias("key"),
        F.col("value").cast("binary").alias("value"),
        field("table").alias("table"),
        reason.alias("reason"),
        F.lit(at).cast("timestamp").alias("dead_lettered_at"),
    )


def write_dead_letters(rows: DataFrame, path: str, txn_app_id: str, batch_id: int) -> None:
    """Append to the dead-letter table, idempotently per batch (a replayed batch appends nothing):
    ``txn_app_id`` is the stream's (:func:`cdc_delta.delta.commits.txn_app_id`), the batch id its version."""
    (
        rows.write.format("delta")
        .mode("append")
        .option("txnAppId", txn_app_id)
        .option("txnVersion", str(batch_id))
        .save(path)
    )
