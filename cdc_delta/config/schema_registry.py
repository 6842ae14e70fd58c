"""The schema registry that holds the Avro schemas of ``kafka.value_format: avro``."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from cdc_delta.config.http_service import HttpServiceConfig


class SchemaRegistryConfig(HttpServiceConfig):
    """A Confluent-compatible schema registry (Confluent Schema Registry, Karapace, Apicurio's
    ``/apis/ccompat/v7``, Redpanda): schemas are read by id with ``GET <url>/schemas/ids/<id>``."""

    SECTION: ClassVar[str] = "schema_registry"
    url: str = "http://127.0.0.1:8081"
    """Base URL of the registry."""
    timeout_seconds: float = Field(default=10, gt=0)
    """Per request."""
    retry_seconds: float = Field(default=60, ge=0)
    """How long a registry that cannot be reached, or answers 5xx, is retried before the batch fails
    (the stream then exits non-zero; its records are read again on the next start)."""
