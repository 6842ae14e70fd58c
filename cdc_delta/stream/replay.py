"""Re-apply parked dead letters (after a stopped table was fixed, or a decoding bug was)."""

from __future__ import annotations

import datetime as dt
import logging

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc_delta.config import AppConfig
from cdc_delta.exceptions import CdcDeltaError
from cdc_delta.stream.batch import BatchProcessor
from cdc_delta.stream.results import BatchResult

logger = logging.getLogger(__name__)


def replay_dead_letters(
    spark: SparkSession, config: AppConfig, table: str | None, since: dt.datetime | None
) -> BatchResult:
    """Run the dead letters (of one table, dead-lettered since a time) through the batch function again.

    Safe to repeat: the guarded MERGE ignores events not newer than what a table holds. Records that
    still cannot be applied are dead-lettered again, under the app id ``<app_id>.replay``.
    """
    path = config.storage.dead_letters
    if not DeltaTable.isDeltaTable(spark, path):
        raise CdcDeltaError(f"there are no dead letters at {path}")
    if table is not None:
        config.table(table)  # a clear error for an unknown table name
    letters = spark.read.format("delta").load(path)
    if table is not None:
        letters = letters.where(F.col("table") == table)
    if since is not None:
        letters = letters.where(F.col("dead_lettered_at") >= F.lit(since))
    # A record parked twice (by the stream and by an earlier replay) is replayed once.
    records = letters.select(
        "topic", "partition", "offset", F.col("kafka_timestamp").alias("timestamp"), "key", "value"
    ).dropDuplicates(["topic", "partition", "offset"])
    replay_config = config.model_copy(update={"app_id": f"{config.app_id}.replay"})
    batch_id = int(dt.datetime.now(dt.timezone.utc).timestamp())  # above every earlier replay's
    result = BatchProcessor(replay_config).process(records, batch_id)
    logger.info("replay of dead letters: %s", result.summary())
    return result
