"""The repair log: a Delta table of the lake's gaps and repairs. ``accept-gap`` records each gap it moved
past (topic, partition, the offsets lost, the tables they fed, when) and each re-snapshot it started;
``resnapshot`` records each table whose re-read rows it saw merged. A table a gap touched needs a
re-snapshot until one is recorded after the gap: ``status`` and the metrics say so. Written with Spark;
read with delta-rs too (``status``)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from pyspark.sql import SparkSession

from cdc_delta.config import AppConfig
from cdc_delta.delta.delta_rs import open_table, read

SCHEMA = (
    "kind string, at timestamp, table string, topic string, partition int, first_lost bigint, first_kept bigint, "
    "note string"
)
GAP = "gap"
RESNAPSHOT = "resnapshot"
STARTED = "resnapshot-started"
"""A re-snapshot ``accept-gap`` had Debezium read, which ``resnapshot`` finishes (:mod:`cdc_delta.repair.started`)."""


def log_path(config: AppConfig) -> str:
    return config.under_root(None, "_cdc_repairs")


@dataclass(frozen=True)
class Entry:
    kind: str
    at: dt.datetime
    table: str | None
    topic: str | None = None
    partition: int | None = None
    first_lost: int | None = None
    first_kept: int | None = None
    note: str | None = None


def record(spark: SparkSession, config: AppConfig, entries: list[Entry]) -> None:
    """Append ``entries`` in one commit."""
    if not entries:
        return
    rows = [(e.kind, e.at, e.table, e.topic, e.partition, e.first_lost, e.first_kept, e.note) for e in entries]
    spark.createDataFrame(rows, SCHEMA).write.format("delta").mode("append").save(log_path(config))


def entries(config: AppConfig) -> list[Entry]:
    """Every entry, oldest first (none where nothing was recorded), read with delta-rs."""
    table = open_table(config, log_path(config))
    if table is None:
        return []
    columns = ["kind", "at", "table", "topic", "partition", "first_lost", "first_kept", "note"]
    rows = read(table.to_pyarrow_dataset(), columns).to_pylist()
    return sorted((Entry(**row) for row in rows), key=lambda e: e.at)


def resnapshot_needed(log: list[Entry]) -> dict[str, dt.datetime]:
    """The tables a gap touched with no re-snapshot recorded since, each with the time of its last gap."""
    needed: dict[str, dt.datetime] = {}
    for entry in log:
        if entry.table is None:
            continue
        if entry.kind == GAP:
            needed[entry.table] = entry.at
        elif entry.kind == RESNAPSHOT:
            needed.pop(entry.table, None)
    return needed
