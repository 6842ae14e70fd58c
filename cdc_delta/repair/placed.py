"""Whether the rows a snapshot read were placed at their binlog position: read back from the table's
topics, past where they ended before the signal, the first snapshot read of the table decoded as the
stream decodes it (:func:`cdc_delta.events.ordering.placed_read`). A read left below the binlog (a
blocking snapshot where the connector had streamed no transaction with a GTID) repairs nothing, and the
rows the lake holds would then all look missing."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition

from cdc_delta.config import AppConfig, TableConfig
from cdc_delta.decode.plan import decode_plan
from cdc_delta.events.envelope import OK, decode_record
from cdc_delta.kafka.applied import Partition
from cdc_delta.kafka.client import brokers

LOOK_S = 30.0


def reads_placed(config: AppConfig, table: TableConfig, since: dict[Partition, int]) -> bool | None:
    """Whether the first snapshot read of ``table`` after offsets ``since`` sits in phase 1; None where
    none is found within a few seconds, or the records are not JSON."""
    if config.kafka.value_format != "json":
        return None
    plan = decode_plan(config)
    target = brokers(config.kafka)
    consumer = Consumer(
        {
            **target.settings,
            "bootstrap.servers": target.bootstrap,
            "group.id": f"{config.app_id}-resnapshot",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    try:
        consumer.assign([TopicPartition(t, p, offset) for (t, p), offset in sorted(since.items())])
        deadline = time.monotonic() + LOOK_S
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error() is not None:
                continue
            topic, partition, offset = str(msg.topic()), int(msg.partition() or 0), int(msg.offset() or 0)
            decoded = decode_record(topic, partition, offset, msg.value(), plan)
            if decoded.status == OK and decoded.table == table.name and decoded.op == "r" and decoded.seq:
                return decoded.seq.phase == 1
    finally:
        consumer.close()
    return None
