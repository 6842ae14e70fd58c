"""The dead-letter Delta table: every record the stream could not apply, with its raw bytes and why."""

from __future__ import annotations

import datetime as dt

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_delta.columns import REPLAYED_AT, delta_path_identifier
from cdc_delta.decode.decoded import field
from cdc_delta.retry import retry_on_conflict


def dead_letter_rows(
    events: DataFrame, app_id: str, batch_id: int | Column, at: dt.datetime, reason: Column
) -> DataFrame:
    """Dead-letter rows for decoded Kafka records, with the raw key and value kept byte for byte;
    ``batch_id`` the micro-batch they came in (a column where they came in several)."""
    batch = batch_id if isinstance(batch_id, Column) else F.lit(batch_id)
    return events.select(
        F.lit(app_id).alias("app_id"),
        batch.cast("bigint").alias("batch_id"),
        F.col("topic"),
        F.col("partition").cast("int").alias("partition"),
        F.col("offset"),
        F.col("timestamp").alias("kafka_timestamp"),
        F.col("key").cast("binary").alias("key"),
        F.col("value").cast("binary").alias("value"),
        field("table").alias("table"),
        reason.alias("reason"),
        F.lit(at).cast("timestamp").alias("dead_lettered_at"),
        F.lit(None).cast("timestamp").alias(REPLAYED_AT),
    )


def write_dead_letters(rows: DataFrame, path: str, txn_app_id: str, batch_id: int) -> None:
    """Append to the dead-letter table, idempotently per batch (a replayed batch appends nothing):
    ``txn_app_id`` is the stream's (:func:`cdc_delta.delta.commits.txn_app_id`), the batch id its version
    (or a table's merges', the landing its merge holds up to). The stream and the merges beside it
    both append: a race lost is retried (the first appends race to create the table)."""
    writer = (
        rows.write.format("delta")
        .mode("append")
        .option("txnAppId", txn_app_id)
        .option("txnVersion", str(batch_id))
        .option("mergeSchema", "true")  # a table written before replayed_at gains it
    )
    retry_on_conflict(lambda: writer.save(path), f"appending to the dead letters {path}")


def mark_replayed(spark: SparkSession, path: str, records: DataFrame, at: dt.datetime) -> int:
    """Set ``replayed_at`` on the dead letters of ``records`` (topic, partition, offset) dead-lettered before
    ``at`` and not replayed yet; returns how many. Retried when the stream's append wins a race."""
    table = DeltaTable.forPath(spark, path)
    if REPLAYED_AT not in table.toDF().columns:
        spark.sql(f"ALTER TABLE {delta_path_identifier(path)} ADD COLUMNS ({REPLAYED_AT} TIMESTAMP)")
    keys = records.select("topic", "partition", "offset").distinct()
    condition = (
        "d.topic = r.topic AND d.partition = r.partition AND d.offset = r.offset "
        f"AND d.{REPLAYED_AT} IS NULL AND d.dead_lettered_at < r.replay_started"
    )

    def merge() -> int:
        source = keys.withColumn("replay_started", F.lit(at).cast("timestamp")).alias("r")
        metrics = (
            DeltaTable.forPath(spark, path)
            .alias("d")
            .merge(source, condition)
            .whenMatchedUpdate(set={REPLAYED_AT: F.col("r.replay_started")})
            .execute()
            .first()
        )
        return int(metrics["num_updated_rows"]) if metrics is not None else 0

    return retry_on_conflict(merge, "marking the replayed dead letters")
