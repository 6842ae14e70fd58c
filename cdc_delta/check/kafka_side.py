"""Kafka's side of a probe: the newest row event of each of the table's partitions (which records the
stream must have applied, and whether it has: :mod:`cdc_delta.kafka.applied`)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from cdc_delta.config import AppConfig, TableConfig
from cdc_delta.decode.plan import decode_plan
from cdc_delta.events.envelope import OK, Decoded, DecodePlan, decode_record
from cdc_delta.kafka.applied import Partition
from cdc_delta.kafka.client import brokers


@dataclass(frozen=True)
class NewestEvent:
    """The newest row event of one partition for the table, below the end offset the stream passed."""

    topic: str
    partition: int
    offset: int
    key: dict[str, Any]


def newest_events(
    config: AppConfig, table: TableConfig, ends: dict[Partition, int], look_back: int = 20
) -> list[NewestEvent]:
    """Per partition, the newest of its last ``look_back`` records that is a row event of ``table``."""
    plan = decode_plan(config)
    decode = _decoder(config, plan)
    target = brokers(config.kafka)  # with kafka.security, as every client
    consumer = Consumer(
        {
            **target.settings,
            "bootstrap.servers": target.bootstrap,
            "group.id": f"{config.app_id}-check",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    out = []
    try:
        for (topic, partition), end in sorted(ends.items()):
            if end <= 0:
                continue
            start = max(0, end - look_back)
            consumer.assign([TopicPartition(topic, partition, start)])
            newest: NewestEvent | None = None
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                msg = consumer.poll(1)
                if msg is None or msg.error() is not None:
                    continue
                offset = int(msg.offset() or 0)
                if offset >= end:
                    break
                decoded = decode(topic, partition, offset, msg.value())
                if decoded.status == OK and decoded.table == table.name and decoded.row_json:
                    values = json.loads(decoded.row_json)
                    newest = NewestEvent(topic, partition, offset, {k: values[k] for k in table.key})
                if offset == end - 1:
                    break
            if newest is not None:
                out.append(newest)
    finally:
        consumer.close()
    return out


def _decoder(config: AppConfig, plan: DecodePlan) -> Any:
    """``decode(topic, partition, offset, value) -> Decoded`` for the stream's value format."""
    if config.kafka.value_format == "json":
        return lambda topic, partition, offset, value: decode_record(topic, partition, offset, value, plan)
    from cdc_delta.decode.schema_registry import AvroSchemas
    from cdc_delta.events.avro import AvroEnvelope, UnsupportedSchema, decode_avro, registry_id

    schemas = AvroSchemas(config.schema_registry, config.kafka.unescape_field_names)

    def decode(topic: str, partition: int, offset: int, value: bytes | None) -> Decoded:
        found = registry_id(value) if value is not None else None
        envelopes: dict[int, AvroEnvelope | str] = {}
        if found is not None:
            reasons = schemas.read([found])
            text = schemas.texts.get(found)
            try:
                envelope = AvroEnvelope.from_text(found, text, config.kafka.unescape_field_names) if text else None
            except UnsupportedSchema as exc:
                envelope = None
                reasons[found] = f"not a Debezium envelope schema: {exc}"
            envelopes[found] = envelope or reasons[found]
        return decode_avro(topic, partition, offset, value, envelopes, plan)

    return decode
