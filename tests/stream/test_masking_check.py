"""The stream's check at start (:mod:`cdc_delta.stream.masking_check`) against a real broker and a Connect
worker's REST answers: a masked column that arrives unmasked stops it in one line unless a connector masks
it now; a misspelt column in ``mask:`` stops it; masked records pass."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from confluent_kafka import Producer

from cdc_delta.config import AppConfig, parse_config
from cdc_delta.connect.masking_settings import masking_settings
from cdc_delta.demo.generator import Column, SourceTable, envelope
from cdc_delta.exceptions import ConfigError
from cdc_delta.stream.masking_check import check_masking

pytestmark = pytest.mark.integration

SALT = "check.salt"


class Worker:
    """A Connect worker's REST API with one connector, whose config the test sets."""

    def __init__(self) -> None:
        self.config: dict[str, str] = {"connector.class": "io.debezium.connector.mariadb.MariaDbConnector"}
        worker = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                body = ["c"] if self.path == "/connectors" else worker.config
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def worker() -> Iterator[Worker]:
    found = Worker()
    yield found
    found.server.shutdown()


def config(kafka: str, url: str, prefix: str, mask: dict[str, str]) -> AppConfig:
    return parse_config(
        {
            "app_id": f"check-{prefix}",
            "storage": {"root": "/unused"},
            "kafka": {"bootstrap_servers": kafka, "topics": [f"{prefix}.shop.users"]},
            "connect": {"url": url, "retry_seconds": 0},
            "masking": {"password_env": "CHECK_SALT"},
            "tables": [
                {
                    "name": "shop.users",
                    "topics": [f"{prefix}.shop.users"],
                    "key": ["id"],
                    "source_database": "shop",
                    "source_table": "users",
                    "mask": mask,
                }
            ],
        },
        env={"CHECK_SALT": SALT},
    )


def produce(kafka: str, prefix: str, masked: bool) -> None:
    email = Column("email", "string", params={"masked": "true"} if masked else {})
    table = SourceTable("shop", "users", (Column("id", "int64"), email))
    value = envelope(table, "c", None, {"id": 1, "email": "e0f1" if masked else "jo@example.com"}, server=prefix)
    producer = Producer({"bootstrap.servers": kafka})
    producer.produce(f"{prefix}.shop.users", key=b'{"id":1}', value=json.dumps(value).encode())
    producer.flush(30)


def test_the_check_at_start(
    kafka_bootstrap: str, worker: Worker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("CHECK_SALT", SALT)
    produce(kafka_bootstrap, "unmasked", masked=False)
    cfg = config(kafka_bootstrap, worker.url, "unmasked", {"email": "hash"})
    with pytest.raises(ConfigError) as refused:
        check_masking(cfg, "cdc.yaml")
    assert str(refused.value).startswith("table shop.users: column email arrives without Debezium's masked parameter")
    assert "(topic unmasked.shop.users partition 0, offset 0): no connector masks it. Run `cdc-delta connectors " in (
        str(refused.value)
    )
    assert SALT not in str(refused.value)

    # Once the connector masks it, the stream starts; what arrived unmasked before is dead-lettered masked.
    worker.config.update(masking_settings(cfg))
    with caplog.at_level(logging.WARNING):
        check_masking(cfg, "cdc.yaml")
    assert "and a connector masks it now" in caplog.text

    # A worker that does not answer is said, not waited for.
    gone = config(kafka_bootstrap, "http://127.0.0.1:9", "unmasked", {"email": "hash"})
    with pytest.raises(
        ConfigError, match=r"no connector masks it \(Kafka Connect at http://127.0.0.1:9 did not answer\)"
    ):
        check_masking(gone, "cdc.yaml")

    produce(kafka_bootstrap, "masked", masked=True)
    check_masking(config(kafka_bootstrap, worker.url, "masked", {"email": "hash"}), "cdc.yaml")
    with pytest.raises(ConfigError, match=r"mask: names column\(s\) emial, which its records do not have"):
        check_masking(config(kafka_bootstrap, worker.url, "masked", {"emial": "hash"}), "cdc.yaml")


def test_a_masked_column_in_the_record_key_is_refused(kafka_bootstrap: str, worker: Worker) -> None:
    """A pattern entry takes each table's key from Debezium's record key, which Debezium never masks."""
    produce(kafka_bootstrap, "keyed", masked=True)
    cfg = parse_config(
        {
            "app_id": "check-keyed",
            "storage": {"root": "/unused"},
            "kafka": {"bootstrap_servers": kafka_bootstrap, "topic_pattern": r"keyed\..*"},
            "connect": {"url": worker.url},
            "tables": [
                {
                    "name": "{db}.{table}",
                    "topic_pattern": r"keyed\.shop\.[^.]+",
                    "source_database": "shop",
                    "source_table": "[^.]+",
                    "mask": {"ID": "stars 3"},
                }
            ],
        }
    )
    with pytest.raises(ConfigError, match=r"mask: ID is in the record key \(topic keyed.shop.users partition 0"):
        check_masking(cfg, "cdc.yaml")
