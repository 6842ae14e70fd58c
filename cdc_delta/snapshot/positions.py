"""Where the stream is: its commits to every table (from the Delta history) and Kafka's view of each
partition (end offset, the stream's consumer-group offset), the inputs of the readiness check."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import KafkaException
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from cdc_delta.config import AppConfig, TableConfig
from cdc_delta.delta.commits import AppCommit, app_commits
from cdc_delta.exceptions import KafkaUnavailable, SnapshotError
from cdc_delta.kafka.offsets import partition_lag
from cdc_delta.snapshot.readiness import KafkaPosition, Partition

HISTORY_LIMIT = 20_000
"""Stream commits read per table to find where the stream passed the cut-off."""

KafkaPositions = Callable[[], Mapping[Partition, KafkaPosition] | None]


def stream_commits(spark: SparkSession, config: AppConfig, threads: int = 8) -> dict[str, list[AppCommit]]:
    """Newest first, this app's stream commits of every configured table that exists. The tables'
    histories are read by a few threads at once (each read is the driver's, mostly waiting on files)."""

    def read(table: TableConfig) -> tuple[str, list[AppCommit] | None]:
        path = config.storage.table_path(table)
        if not DeltaTable.isDeltaTable(spark, path):
            return table.name, None
        return table.name, list(app_commits(DeltaTable.forPath(spark, path), config.app_id, HISTORY_LIMIT))

    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="cdc-history") as pool:
        return {name: commits for name, commits in pool.map(read, config.tables) if commits is not None}


def kafka_positions_of(config: AppConfig) -> KafkaPositions:
    """Reads, per partition of the subscribed topics, the end offset and the stream's group offset."""

    def read() -> dict[Partition, KafkaPosition]:
        kafka = config.kafka
        try:
            lags = partition_lag(kafka.bootstrap_servers, config.app_id, kafka.topics, kafka.topic_pattern)
        except (KafkaException, KafkaUnavailable) as exc:
            raise SnapshotError(
                f"cannot reach Kafka at {kafka.bootstrap_servers} to check readiness: {exc}. "
                "Fix kafka.bootstrap_servers, or pass --skip-kafka-check to judge from the Delta commits alone "
                "(quiet partitions never pass then)"
            ) from None
        return {(p.topic, p.partition): KafkaPosition(p.end, p.committed) for p in lags}

    return read
