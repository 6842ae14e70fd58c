"""Where the stream is: its landings (the changelog's history) and Kafka's view of each partition (end
offset, the stream's consumer-group offset), the inputs of the readiness check."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from confluent_kafka import KafkaException

from cdc_delta.config import AppConfig
from cdc_delta.exceptions import KafkaUnavailable
from cdc_delta.kafka.client import brokers
from cdc_delta.kafka.offsets import partition_lag
from cdc_delta.snapshot.readiness import KafkaPosition, Partition

KafkaPositions = Callable[[], Mapping[Partition, KafkaPosition] | None]


def kafka_positions_of(config: AppConfig) -> KafkaPositions:
    """Reads, per partition of the subscribed topics, the end offset and the stream's group offset."""

    def read() -> dict[Partition, KafkaPosition]:
        kafka = config.kafka
        try:
            lags = partition_lag(brokers(kafka), config.app_id, kafka.topics, kafka.topic_pattern)
        except (KafkaException, KafkaUnavailable) as exc:
            raise KafkaUnavailable(
                f"cannot reach Kafka at {kafka.bootstrap_servers} to check readiness: {exc}. "
                "Fix kafka.bootstrap_servers, or pass --skip-kafka-check to judge from the Delta commits alone "
                "(quiet partitions never pass then)"
            ) from None
        return {(p.topic, p.partition): KafkaPosition(p.end, p.committed) for p in lags}

    return read
