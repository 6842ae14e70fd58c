"""The newest records of a table's partitions, decoded as the stream decodes them (``check``'s probes, the
stream's check at start that masked columns arrive masked)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NamedTuple

from confluent_kafka import Consumer, TopicPartition

from cdc_delta.config import AppConfig
from cdc_delta.decode.plan import decode_plan
from cdc_delta.events.envelope import Decoded, DecodePlan, decode_record
from cdc_delta.kafka.applied import Partition
from cdc_delta.kafka.client import brokers

Decode = Callable[[str, int, int, bytes | None], Decoded]


class Newest(NamedTuple):
    offset: int
    key: bytes | None
    decoded: Decoded


def newest_decoded(
    config: AppConfig, ends: dict[Partition, int], keep: Callable[[Decoded], bool], group: str, look_back: int = 20
) -> dict[Partition, Newest]:
    """Per partition (its end offset in ``ends``), the newest of its last ``look_back`` records whose
    decoding ``keep`` takes, with its offset and key; a partition with none is left out. ``group``: the
    consumer group named (nothing is committed to it)."""
    decode = record_decoder(config, decode_plan(config))
    target = brokers(config.kafka)  # with kafka.security, as every client
    consumer = Consumer(
        {
            **target.settings,
            "bootstrap.servers": target.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    out: dict[Partition, Newest] = {}
    try:
        for (topic, partition), end in sorted(ends.items()):
            if end <= 0:
                continue
            consumer.assign([TopicPartition(topic, partition, max(0, end - look_back))])
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                msg = consumer.poll(1)
                if msg is None or msg.error() is not None:
                    # Past the end (its last offset a transaction marker, or gone to retention): done.
                    if consumer.position([TopicPartition(topic, partition)])[0].offset >= end:
                        break
                    continue
                offset = int(msg.offset() or 0)
                if offset >= end:
                    break
                decoded = decode(topic, partition, offset, msg.value())
                if keep(decoded):
                    out[(topic, partition)] = Newest(offset, msg.key(), decoded)
                if offset == end - 1:
                    break
    finally:
        consumer.close()
    return out


def record_decoder(config: AppConfig, plan: DecodePlan) -> Decode:
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
