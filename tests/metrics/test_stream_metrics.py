"""The stream's /metrics and /healthz while it runs against the real broker: the counters add up to
what the batch log lines say, the gauges to the Delta tables, and health follows the query."""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from pathlib import Path

import pytest
import requests
import yaml
from confluent_kafka import Producer
from delta.tables import DeltaTable

from cdc_delta.config import load_config
from cdc_delta.demo.batches import DEMO_TABLES
from cdc_delta.demo.generator import ChangeGenerator, topic_of
from cdc_delta.demo.producer import ensure_topics, produce
from cdc_delta.merger import merging_for
from cdc_delta.metrics.server import MetricsServer, query_health
from cdc_delta.metrics.stream import UNROUTED, StreamMetrics
from cdc_delta.stream.query import start_stream
from tests.prom import samples
from tests.services import wait_for, write_config

pytestmark = [pytest.mark.integration, pytest.mark.spark]

LINE = re.compile(r"batch (\d+): (\d+) in, (\d+) landed \([^)]*\), (\d+) dead-lettered, (\d+) skipped")
TABLE_PART = re.compile(r"([\w.]+): (\d+) changes")


def scrape(port: int) -> dict[str, dict[tuple, float]]:
    return defaultdict(dict, samples(requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text))


def events(got: dict, outcome: str, table: str | None = None) -> float:
    return sum(
        v
        for labels, v in got["cdc_delta_events_total"].items()
        if dict(labels)["outcome"] == outcome and (table is None or dict(labels)["table"] == table)
    )


def test_counters_equal_the_batch_lines_and_health_follows_the_query(
    spark, kafka_bootstrap: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = "metrics"
    generator = ChangeGenerator(DEMO_TABLES, seed=11, tombstones=True, server=server)
    changes = list(generator.changes(900))
    ensure_topics(kafka_bootstrap, [topic_of(t, server) for t in DEMO_TABLES], 2)
    produce(kafka_bootstrap, changes)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topic_of(DEMO_TABLES[0], server), key=b'{"id": -1}', value=b"{this is not json")
    producer.flush(30)
    records = len(changes) + 1

    path = write_config(tmp_path, kafka_bootstrap, server, max_per_batch=400)
    data = yaml.safe_load(path.read_text())
    data["metrics"] = {"port": 0, "host": "127.0.0.1", "lag_refresh_seconds": 1, "unhealthy_after_seconds": 600}
    path.write_text(yaml.safe_dump(data))
    data["merge"] = {"max_delay_seconds": 0}  # every batch merged after it lands: its line counts both
    path.write_text(yaml.safe_dump(data))
    config = load_config(path, env={})
    metrics = StreamMetrics(config)
    endpoint = MetricsServer(config, metrics.registry)
    caplog.set_level(logging.INFO, logger="cdc_delta.stream.query")
    merging = merging_for(spark, config, metrics)
    stream = start_stream(spark, config, listener=merging, metrics=metrics)
    query = stream.query
    endpoint.start(lambda: query_health(config, metrics, query), lag_of=metrics)
    try:
        wait_for(lambda: events(scrape(endpoint.port), "in") == records, 300, "every record counted")
        # the lag is read from the broker once the last batch's offsets are committed
        wait_for(
            lambda: (lag := scrape(endpoint.port)["cdc_delta_consumer_lag"]) and sum(lag.values()) == 0,
            60,
            "a lag reading of 0",
        )
        got = scrape(endpoint.port)
        lines = [m for r in caplog.records if (m := LINE.search(r.getMessage()))]
        texts = [r.getMessage() for r in caplog.records if LINE.search(r.getMessage())]
        assert len(lines) >= 3  # 400 records a batch
        assert got["cdc_delta_batches_total"][(("result", "ok"),)] == len(lines)
        assert got["cdc_delta_batches_total"][(("result", "failed"),)] == 0
        assert got["cdc_delta_batch_duration_seconds_count"][()] == len(lines)
        assert got["cdc_delta_last_batch_id"][()] == max(int(m[1]) for m in lines)
        for i, outcome in enumerate(("in", "landed", "dead_lettered", "skipped"), start=2):
            assert events(got, outcome) == sum(int(m[i]) for m in lines), outcome
        assert events(got, "dead_lettered", UNROUTED) == 1  # the record that is not JSON
        assert events(got, "skipped") > 0  # tombstones
        per_table: dict[str, int] = defaultdict(int)
        for text in texts:
            for name, n in TABLE_PART.findall(text.split("; merge through", 1)[1]):
                per_table[name] += int(n)
        assert set(per_table) == {"inventory.orders", "shop.orders"}
        for table in config.tables:
            label = (("table", table.name),)
            assert events(got, "landed", table.name) == per_table[table.name]  # each change merged once
            assert got["cdc_delta_table_pending_changes"][label] == 0
            version = DeltaTable.forPath(spark, config.storage.table_path(table)).history(1).first()["version"]
            assert got["cdc_delta_table_version"][label] == version
            assert got["cdc_delta_table_stopped"][label] == 0
            assert got["cdc_delta_table_freshness_seconds"][label] > 0
        assert len(got["cdc_delta_consumer_lag"]) == 2 * len(DEMO_TABLES)  # every partition
        health = requests.get(f"http://127.0.0.1:{endpoint.port}/healthz", timeout=10)
        assert health.status_code == 200 and health.text.startswith("ok: last batch"), health.text

        query.stop()  # the query is gone; the process (here: the test) is not
        health = requests.get(f"http://127.0.0.1:{endpoint.port}/healthz", timeout=10)
        assert health.status_code == 503 and "the streaming query has ended" in health.text, health.text
    finally:
        query.stop()
        if merging is not None:
            merging.close()
        endpoint.close()
