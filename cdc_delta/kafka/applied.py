"""Whether the stream has read a table's records: the end offsets of the table's topics now, and a wait
until the stream's consumer group is past them (``check``'s probes, ``resnapshot``'s wait for the rows
Debezium read again)."""

from __future__ import annotations

import re
import time

from cdc_delta.config import AppConfig, TableConfig
from cdc_delta.kafka.client import brokers
from cdc_delta.kafka.offsets import partition_lag

Partition = tuple[str, int]


def table_subscription(config: AppConfig, table: TableConfig) -> tuple[list[str], str | None]:
    """The table's own topics (or pattern, anchored: the router matches whole names), else the stream's."""
    if table.topics:
        return list(table.topics), None
    if table.topic_pattern:
        return [], f"^(?:{table.topic_pattern})$"
    return list(config.kafka.topics), config.kafka.topic_pattern


def reads_topic(config: AppConfig, table: TableConfig, topic: str) -> bool:
    """Whether ``table``'s records may come from ``topic`` (its subscription takes it)."""
    topics, pattern = table_subscription(config, table)
    return topic in topics or (pattern is not None and re.search(pattern, topic) is not None)


def end_offsets(config: AppConfig, table: TableConfig) -> dict[Partition, int]:
    topics, pattern = table_subscription(config, table)
    lags = partition_lag(brokers(config.kafka), config.app_id, topics, pattern)
    return {(p.topic, p.partition): p.end for p in lags}


def wait_applied(config: AppConfig, table: TableConfig, ends: dict[Partition, int], wait_s: float) -> int:
    """Wait until the stream's consumer group is at or past ``ends`` on every partition (the stream
    commits its position there after each batch). Returns the records still short of them (0: done)."""
    topics, pattern = table_subscription(config, table)
    deadline = time.monotonic() + wait_s
    while True:
        lags = partition_lag(brokers(config.kafka), config.app_id, topics, pattern)
        done = {(p.topic, p.partition): p.committed or 0 for p in lags}
        short = sum(max(0, end - done.get(tp, 0)) for tp, end in ends.items())
        if short == 0 or time.monotonic() >= deadline:
            return short
        time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
