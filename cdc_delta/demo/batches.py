"""A self-contained demo of the merge: generate Debezium envelopes, apply them in batches, query."""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from cdc_delta.config import AppConfig, parse_config
from cdc_delta.demo.generator import ORDER_COLUMNS, ChangeGenerator, SourceTable
from cdc_delta.merger import Merger
from cdc_delta.merger.with_stream import MergeAfterLandings
from cdc_delta.stream.batch import BatchProcessor
from cdc_delta.stream.results import BatchResult

logger = logging.getLogger(__name__)

DEMO_TABLES = (
    SourceTable("inventory", "orders", ORDER_COLUMNS),
    SourceTable("shop_0", "orders_000", ORDER_COLUMNS),
    SourceTable("shop_1", "orders_017", ORDER_COLUMNS),
)


def demo_tables(server: str = "dbserver1") -> list[dict[str, object]]:
    """Two logical tables: one plain, one folded from shards that reuse primary keys."""
    prefix = server.replace(".", r"\.")
    return [
        {"name": "inventory.orders", "topics": [f"{server}.inventory.orders"], "key": ["id"]},
        {
            "name": "shop.orders",
            "topic_pattern": prefix + r"\.shop_\d+\.orders_\d+",
            "source_database": r"shop_\d+",
            "source_table": r"orders_\d{3}",
            "key": ["id"],
            "key_includes_source": True,
        },
    ]


def demo_config(root: Path) -> AppConfig:
    """The demo's config (the tables of streaming/demo-config.yaml) with tables under ``root``."""
    return parse_config(
        {
            "app_id": "cdc-delta-demo",
            "storage": {"root": str(root)},
            "merge": {"max_delay_seconds": 0},
            "tables": demo_tables(),
        },
        source="demo",
    )


def kafka_frame(spark: SparkSession, records: list[tuple[str, int, int, bytes | None, bytes | None]]) -> DataFrame:
    """A DataFrame shaped like Spark's Kafka source output, for feeding the batch function directly."""
    now = dt.datetime.now(dt.timezone.utc)
    return spark.createDataFrame(
        [(topic, part, off, now, key, value) for topic, part, off, key, value in records],
        "topic string, partition int, offset bigint, timestamp timestamp, key binary, value binary",
    )


def generated_records(
    generator: ChangeGenerator, events: int, offsets: dict[str, int]
) -> list[tuple[str, int, int, bytes | None, bytes | None]]:
    """The generator's next ``events`` changes as Kafka records of partition 0 (:func:`kafka_frame`'s
    rows), each topic's offsets going on from ``offsets`` (which this advances)."""
    records: list[tuple[str, int, int, bytes | None, bytes | None]] = []
    for change in generator.changes(events):
        offset = offsets.get(change.topic, 0)
        offsets[change.topic] = offset + 1
        records.append((change.topic, 0, offset, change.key, change.value))
    return records


def run_demo(spark: SparkSession, root: Path, events: int, batches: int) -> list[BatchResult]:
    """Apply ``events`` generated changes (plus one bad record and one tombstone) in ``batches`` batches."""
    config = demo_config(root)
    generator = ChangeGenerator(DEMO_TABLES, seed=42)
    offsets: dict[str, int] = {}
    records = generated_records(generator, events, offsets)
    bad_topic = "dbserver1.inventory.orders"
    records.append((bad_topic, 0, offsets.get(bad_topic, 0), b'{"id": 1}', b"{not json"))
    records.append((bad_topic, 0, offsets.get(bad_topic, 0) + 1, b'{"id": 1}', None))
    processor = BatchProcessor(config, listener=MergeAfterLandings(Merger(spark, config)))
    size = max(1, -(-len(records) // batches))
    results = []
    for batch_id, start in enumerate(range(0, len(records), size)):
        result = processor.process(kafka_frame(spark, records[start : start + size]), batch_id)
        logger.info("%s", result.summary())
        results.append(result)
    return results
