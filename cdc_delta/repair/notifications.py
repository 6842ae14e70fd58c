"""Debezium's snapshot notifications, read from the connector's notification topic.

A notification (debezium/debezium, tag v3.5.0.Final, ``SinkNotificationChannel``, ``Notification``) is
``{"id", "aggregate_type", "type", "additional_data": {...}, "timestamp"}``, written by the connector's
value converter (JsonConverter: under ``payload``). An incremental snapshot's carry ``aggregate_type``
``Incremental Snapshot`` and the signal's id (``IncrementalSnapshotNotificationService``): ``STARTED``,
``IN_PROGRESS`` (``current_collection_in_progress``, ``maximum_key``, ``last_processed_key``),
``TABLE_SCAN_COMPLETED`` (``scanned_collection``, ``total_rows_scanned``, ``status``: ``SUCCEEDED``,
``EMPTY``, ``NO_PRIMARY_KEY``, ``SKIPPED``, ``SQL_EXCEPTION``, ``UNKNOWN_SCHEMA``), ``COMPLETED``,
``ABORTED``. A blocking snapshot reports as the initial one does (``InitialSnapshotNotificationService``:
``aggregate_type`` ``Initial Snapshot``, an id of its own): ``STARTED``, ``IN_PROGRESS``,
``TABLE_SCAN_COMPLETED``, ``COMPLETED``, ``ABORTED``, ``SKIPPED``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException

from cdc_delta.config import AppConfig
from cdc_delta.exceptions import KafkaUnavailable
from cdc_delta.kafka.client import brokers

INCREMENTAL = "Incremental Snapshot"
BLOCKING = "Initial Snapshot"
ENDS = ("COMPLETED", "ABORTED", "SKIPPED")
"""The types after which a snapshot sends nothing more."""


@dataclass(frozen=True)
class Notification:
    id: str
    aggregate_type: str
    type: str
    data: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, value: bytes | None) -> Notification | None:
        """A notification record's value (JsonConverter's, with or without its schema); None for anything else."""
        try:
            message = json.loads(value or b"")
        except (ValueError, UnicodeDecodeError):
            return None
        if isinstance(message, dict) and "payload" in message and "schema" in message:
            message = message["payload"]
        if not isinstance(message, dict) or not {"id", "aggregate_type", "type"} <= message.keys():
            return None
        data = message.get("additional_data") or {}
        return cls(
            str(message["id"]),
            str(message["aggregate_type"]),
            str(message["type"]),
            {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {},
        )

    def progress(self) -> str:
        """The notification as one line of progress."""
        d = self.data
        if self.type == "TABLE_SCAN_COMPLETED":
            scanned = d.get("scanned_collection") or d.get("data_collections", "")
            return f"{scanned}: read {d.get('total_rows_scanned', '?')} rows ({d.get('status', '?')})"
        if self.type == "IN_PROGRESS" and d.get("last_processed_key"):
            return (
                f"{d.get('current_collection_in_progress', '')}: read up to key {d['last_processed_key']} "
                f"of {d.get('maximum_key', '?')}"
            )
        where = d.get("current_collection_in_progress") or d.get("data_collections", "")
        return f"{self.type.lower().replace('_', ' ')}{f': {where}' if where else ''}"


class Notifications:
    """The notifications written to ``topic`` from now on (the end of each partition when made)."""

    def __init__(self, config: AppConfig, topic: str) -> None:
        from confluent_kafka import Consumer, TopicPartition

        target = brokers(config.kafka)
        self.topic = topic
        self._consumer = Consumer(
            {
                **target.settings,
                "bootstrap.servers": target.bootstrap,
                "group.id": f"{config.app_id}-resnapshot",
                "enable.auto.commit": False,
                "log_level": 0,
            }
        )
        self._assigned: set[int] = set()
        self._new_partition = TopicPartition
        try:
            self._assign(at_end=True)
        except BaseException:
            self._consumer.close()
            raise

    def _assign(self, at_end: bool) -> None:
        """Read every partition of the topic: from its end now (``at_end``), from its start for one that
        appears later (the topic is made with the first notification)."""
        try:
            metadata = self._consumer.list_topics(self.topic, timeout=10).topics.get(self.topic)
        except KafkaException as exc:
            raise KafkaUnavailable(f"cannot read the notification topic {self.topic} from Kafka: {exc}") from None
        partitions = set(metadata.partitions) if metadata is not None and metadata.error is None else set()
        new = sorted(partitions - self._assigned)
        if not new:
            return
        starts = []
        for p in new:
            low, high = self._consumer.get_watermark_offsets(self._new_partition(self.topic, p), timeout=10)
            starts.append(self._new_partition(self.topic, p, high if at_end else low))
        self._assigned |= set(new)
        self._consumer.assign([*self._consumer.assignment(), *starts])

    def poll(self, timeout_s: float) -> Iterator[Notification]:
        """The notifications that arrive within ``timeout_s``."""
        self._assign(at_end=False)
        for msg in self._consumer.consume(num_messages=500, timeout=timeout_s):
            if msg.error() is None:
                found = Notification.parse(msg.value())
                if found is not None:
                    yield found

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> Notifications:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
