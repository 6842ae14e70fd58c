"""The metrics endpoint's safe defaults, without Spark: this machine only, and a client that sends
nothing is dropped while scrapes go on."""

from __future__ import annotations

import socket

import requests

from cdc_delta.config import parse_config
from cdc_delta.metrics.health import Health
from cdc_delta.metrics.server import MetricsServer
from cdc_delta.metrics.stream import StreamMetrics


def test_the_endpoint_listens_on_this_machine_and_drops_a_silent_client() -> None:
    config = parse_config(
        {
            "app_id": "m",
            "storage": {"root": "/tmp/unused"},
            "tables": [{"name": "a.b", "topics": ["t"], "key": ["id"]}],
            "metrics": {"port": 0, "request_timeout_seconds": 1},
        }
    )
    endpoint = MetricsServer(config, StreamMetrics(config).registry)
    assert endpoint._httpd.server_address[0] == "127.0.0.1"  # noqa: SLF001 (the bound address is the point)
    # Started as the stream starts it (a health with no query to watch), so that close() stops the serving
    # thread: one started apart, its socket closed under it, spun on a core for the rest of a CI run.
    endpoint.start(lambda: Health(True, "ok"))
    try:
        silent = socket.create_connection(("127.0.0.1", endpoint.port), timeout=30)
        scrape = requests.get(f"http://127.0.0.1:{endpoint.port}/metrics", timeout=10)
        assert scrape.status_code == 200 and "cdc_delta_batches_total" in scrape.text
        assert silent.recv(1) == b"", "the server kept a connection that sent nothing"  # closed: not a timeout
        silent.close()
    finally:
        endpoint.close()
