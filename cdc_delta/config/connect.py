"""The Kafka Connect worker that runs the Debezium connectors, for ``cdc-delta connectors``."""

from __future__ import annotations

from typing import ClassVar

from cdc_delta.config.http_service import HttpServiceConfig


class ConnectConfig(HttpServiceConfig):
    """Where the Kafka Connect REST API is and how to talk to it (basic auth, TLS). ``retry_seconds``
    also covers answers of 409 (a rebalance)."""

    SECTION: ClassVar[str] = "connect"
    url: str = "http://127.0.0.1:8083"
    """Base URL of any worker of the Connect cluster (it forwards to the leader)."""
