"""Write generated Debezium change events to Kafka, at a chosen rate, for demos, tests and benchmarks."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from cdc_delta.demo.generator import Change
from cdc_delta.exceptions import KafkaUnavailable
from cdc_delta.kafka.client import Brokers, as_brokers, quiet_logging

logger = logging.getLogger(__name__)


def ensure_topics(bootstrap: Brokers | str, topics: Iterable[str], partitions: int) -> None:
    """Create the topics that do not exist yet, with ``partitions`` partitions each."""
    target = as_brokers(bootstrap)
    admin = AdminClient({**target.settings, "bootstrap.servers": target.bootstrap, **quiet_logging(logger)})
    existing = set(admin.list_topics(timeout=15).topics)
    missing = [NewTopic(t, num_partitions=partitions, replication_factor=1) for t in sorted(set(topics) - existing)]
    if not missing:
        return
    for topic, future in admin.create_topics(missing).items():
        try:
            future.result(timeout=30)
            logger.info("created topic %s with %d partitions", topic, partitions)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise


def produce(bootstrap: Brokers | str, changes: Iterable[Change], rate: float | None = None) -> int:
    """Send every change (keyed, so a key's events stay in order on one partition); returns the count.

    ``rate`` limits events per second; None sends as fast as the broker takes them.
    """
    target = as_brokers(bootstrap)
    producer = Producer(
        {
            **target.settings,
            "bootstrap.servers": target.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            **quiet_logging(logger),
        }
    )
    sent = 0
    started = time.monotonic()
    for change in changes:
        while True:
            try:
                producer.produce(change.topic, key=change.key, value=change.value)
                break
            except BufferError:
                producer.poll(0.1)
        sent += 1
        if rate:
            ahead = sent / rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
        if sent % 10_000 == 0:
            producer.poll(0)
            logger.info("produced %d events", sent)
    remaining = producer.flush(60)
    if remaining:
        raise KafkaUnavailable(f"{remaining} events were not acknowledged by Kafka at {target.bootstrap} within 60 s")
    return sent
