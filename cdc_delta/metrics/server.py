"""The HTTP endpoint of the stream and of ``cdc-delta merge``: ``/metrics`` for Prometheus and
``/healthz`` for probes (200 or 503 with one line saying why), plus, for the stream, the thread that
reads the consumer lag from the broker."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from pyspark.sql.streaming import StreamingQuery

from cdc_delta.config import AppConfig
from cdc_delta.exceptions import ConfigError, KafkaUnavailable
from cdc_delta.kafka.client import brokers
from cdc_delta.kafka.offsets import partition_lag
from cdc_delta.metrics.health import Health, judge, judge_merger
from cdc_delta.metrics.merge import MergeMetrics
from cdc_delta.metrics.stream import StreamMetrics

logger = logging.getLogger(__name__)


class MetricsServer:
    """Serves a registry's metrics, and the health :meth:`start` is given, until :meth:`close`.

    The port is taken when the server is made, before Spark starts, so that a port in use is a
    one-line error at once."""

    def __init__(self, config: AppConfig, registry: CollectorRegistry) -> None:
        self.config = config
        self.registry = registry
        self._health: Callable[[], Health] = lambda: Health(False, "starting")
        self._closed = threading.Event()
        where = f"{config.metrics.host}:{config.metrics.port}"
        try:
            self._httpd = ThreadingHTTPServer((config.metrics.host, config.metrics.port or 0), _handler(self))
        except OSError as exc:
            raise ConfigError(
                f"cannot serve metrics on {where} ({exc.strerror or exc}): set metrics.port to a free port "
                "(or metrics.host to an address of this machine)"
            ) from None
        self._httpd.daemon_threads = True
        self._serving = False
        self.port = int(self._httpd.server_address[1])

    def start(self, health: Callable[[], Health], lag_of: StreamMetrics | None = None) -> MetricsServer:
        """Serve, with ``/healthz`` answering ``health()``; with ``lag_of``, read the stream's consumer
        lag from the broker into it every ``metrics.lag_refresh_seconds``."""
        self._health = health
        self._serving = True
        threading.Thread(target=self._httpd.serve_forever, name="cdc-delta-metrics", daemon=True).start()
        if lag_of is not None:
            threading.Thread(target=self._read_lag, args=(lag_of,), name="cdc-delta-lag", daemon=True).start()
        logger.info("metrics on http://%s:%d/metrics, health on /healthz", self.config.metrics.host, self.port)
        return self

    def close(self) -> None:
        """Stop serving (if it started) and free the port."""
        self._closed.set()
        if self._serving:  # shutdown() waits for serve_forever to end: for ever where it never began
            self._httpd.shutdown()
        self._httpd.server_close()

    def health(self) -> Health:
        return self._health()

    def _read_lag(self, metrics: StreamMetrics) -> None:
        kafka, warned = self.config.kafka, False
        while not self._closed.is_set():
            try:
                lags = partition_lag(brokers(kafka), self.config.app_id, kafka.topics, kafka.topic_pattern, 1)
                metrics.partition_lag.update(lags)
                warned = False
            except KafkaUnavailable as exc:
                if not warned:  # once per outage, not once per reading
                    logger.warning("consumer lag metrics: cannot read offsets from the broker: %s", exc)
                warned = True
            self._closed.wait(self.config.metrics.lag_refresh_seconds)


def query_health(config: AppConfig, metrics: StreamMetrics, query: StreamingQuery) -> Health:
    """The stream's health: its query runs and its batches keep finishing (:func:`~.health.judge`)."""
    active = query.isActive
    failure = None
    if not active:
        exc = query.exception()
        failure = str(exc).split("\n")[0] if exc is not None else None
    return judge(
        active=active,
        failure=failure,
        trigger_active=bool(active and query.status.get("isTriggerActive")),
        since_last_batch_s=time.monotonic() - metrics.last_finished,
        waiting_records=metrics.waiting_records(),
        limit_s=config.metrics.unhealthy_after_seconds,
    )


def merger_health(config: AppConfig, metrics: MergeMetrics) -> Health:
    """A merge job's health: its rounds keep finishing (:func:`~.health.judge_merger`)."""
    now, started = time.monotonic(), metrics.round_started
    return judge_merger(
        running_for_s=None if started is None else now - started,
        since_last_round_s=None if metrics.last_round_end is None else now - metrics.last_round_end,
        pending_tables=metrics.pending_tables(),
        limit_s=config.metrics.unhealthy_after_seconds,
    )


def _handler(server: MetricsServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = server.config.metrics.request_timeout_seconds  # socket timeout of each connection

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            path = self.path.split("?")[0]
            if path == "/metrics":
                self._answer(200, generate_latest(server.registry), CONTENT_TYPE_LATEST)
            elif path in ("/healthz", "/health"):
                health = server.health()
                self._answer(200 if health.healthy else 503, (health.reason + "\n").encode(), "text/plain")
            else:
                self._answer(404, b"cdc-delta serves /metrics and /healthz\n", "text/plain")

        def _answer(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's signature)
            logger.debug("metrics endpoint: " + format, *args)

    return Handler
