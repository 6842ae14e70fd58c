"""Where the stream serves its Prometheus metrics and health, and where the jobs leave theirs."""

from __future__ import annotations

from pydantic import Field, field_validator

from cdc_delta.config.common import Frozen, absolute


class MetricsConfig(Frozen):
    """Prometheus metrics of the stream (an HTTP endpoint) and of the hourly and nightly jobs (files
    for node_exporter's textfile collector)."""

    port: int | None = Field(default=None, ge=0, le=65535)
    """Port of the stream's HTTP endpoint (and of ``cdc-delta merge``'s, a job of its own): ``/metrics``
    (Prometheus text format) and ``/healthz``. Unset: no endpoint. ``0`` picks a free port (logged at
    start). A merge job beside the stream on one machine needs a port of its own: set it with
    ``CDC_DELTA__METRICS__PORT`` in the merge job's environment."""
    host: str = "127.0.0.1"
    """Address the endpoint listens on: this machine only by default; ``0.0.0.0`` (every interface) where
    a Prometheus on another host scrapes it, or in a container whose port is published."""
    request_timeout_seconds: float = Field(default=10, gt=0)
    """A client that sends no complete request (or reads no answer) for this long is disconnected, so
    that a slow or stuck client cannot hold the endpoint's threads."""
    unhealthy_after_seconds: float = Field(default=600, gt=0)
    """``/healthz`` answers 503 once no batch has finished for this long while a batch runs or records
    wait in Kafka (an idle stream with nothing to read stays healthy), and at once when the query has
    ended. Make it longer than the slowest batch you expect (a first batch, a widening rewrite). For
    ``cdc-delta merge``: 503 once a merge round has run this long."""
    lag_refresh_seconds: float = Field(default=15, gt=0)
    """How often the consumer lag per partition is read from the broker for the metrics."""
    textfile_dir: str | None = None
    """Folder where ``maintain`` and ``snapshot`` write ``cdc_delta_<job>.prom`` after each run (point
    node_exporter's ``--collector.textfile.directory`` at it). Unset: the jobs write no metrics."""

    @field_validator("textfile_dir")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        return absolute(value)
