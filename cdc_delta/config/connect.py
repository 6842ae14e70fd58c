"""The Kafka Connect worker that runs the Debezium connectors, for ``cdc-delta connectors``."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, field_validator, model_validator

from cdc_delta.config.common import PasswordSource


class ConnectConfig(PasswordSource):
    """Where the Kafka Connect REST API is and how to talk to it (basic auth, TLS)."""

    SECTION: ClassVar[str] = "connect"
    url: str = "http://127.0.0.1:8083"
    """Base URL of any worker of the Connect cluster (it forwards to the leader)."""
    username: str | None = None
    """Basic-auth user; its password comes from ``password_env`` or ``password_file``."""
    verify: bool | str = True
    """TLS: verify the worker's certificate (true), against a CA bundle (a file path), or not (false)."""
    client_cert: str | None = None
    """TLS client certificate (PEM), for workers that require one."""
    client_key: str | None = None
    """Its private key (PEM), when not in the certificate file."""
    timeout_seconds: float = Field(default=30, gt=0)
    """Per request."""
    retry_seconds: float = Field(default=60, ge=0)
    """How long a worker that cannot be reached, or answers 409 (a rebalance), is retried."""

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"connect.url {value!r} must start with http:// or https://")
        if "@" in value.split("//", 1)[1].split("/", 1)[0]:
            raise ValueError("connect.url must not hold credentials: set connect.username and password_env")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _auth(self) -> ConnectConfig:
        if (self.password_env or self.password_file) and not self.username:
            raise ValueError("connect.password_env/password_file need connect.username")
        return self
