"""The stream's HTTP endpoint: ``/metrics`` for Prometheus and ``/healthz`` for probes (200 or 503
with one line saying why), plus the thread that reads the consumer lag from the broker."""

from __future__ import annotations

import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pyspark.sql.streaming import StreamingQuery

from cdc_delta.config import AppConfig
from cdc_delta.exceptions import ConfigError, KafkaUnavailable
from cdc_delta.kafka.client import brokers
from cdc_delta.kafka.offsets import partition_lag
from cdc_delta.metrics.health import Health, judge
from cdc_delta.metrics.stream import StreamMetrics

logger = logging.getLogger(__name__)


class MetricsServer:
    """Serves ``metrics`` and the health of the query given to :meth:`start` until :meth:`close`.

    The port is taken when the server is made, before Spark starts, so that a port in use is a
    one-line error at once."""

    def __init__(self, config: AppConfig, metrics: StreamMetrics) -> None:
        self.config = config
        self.metrics = metrics
        self.query: StreamingQuery | None = None
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
        self.port = int(self._httpd.server_address[1])

    def start(self, query: StreamingQuery) -> MetricsServer:
        self.query = query
        threading.Thread(target=self._httpd.serve_forever, name="cdc-delta-metrics", daemon=True).start()
        threading.Thread(target=self._read_lag, name="cdc-delta-lag", daemon=True).start()
        logger.info("metrics on http://%s:%d/metrics, health on /healthz", self.config.metrics.host, self.port)
        return self

    def close(self) -> None:
        self._closed.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def health(self) -> Health:
        query = self.query
        if query is None:
            return Health(False, "the streaming query has not started yet")
        active = query.isActive
        failure = None
        if not active:
            exc = query.exception()
            failure = str(exc).split("\n")[0] if exc is not None else None
        return judge(
            active=active,
            failure=failure,
            trigger_active=bool(active and query.status.get("isTriggerActive")),
            since_last_batch_s=time.monotonic() - self.metrics.last_finished,
            waiting_records=self.metrics.waiting_records(),
            limit_s=self.config.metrics.unhealthy_after_seconds,
        )

    def _read_lag(self) -> None:
        kafka, warned = self.config.kafka, False
        while not self._closed.is_set():
            try:
                lags = partition_lag(brokers(kafka), self.config.app_id, kafka.topics, kafka.topic_pattern, 1)
                self.metrics.partition_lag.update(lags)
                warned = False
            except KafkaUnavailable as exc:
                if not warned:  # once per outage, not once per reading
                    logger.warning("consumer lag metrics: cannot read offsets from the broker: %s", exc)
                warned = True
            self._closed.wait(self.config.metrics.lag_refresh_seconds)


def _handler(server: MetricsServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = server.config.metrics.request_timeout_seconds  # socket timeout of each connection

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            path = self.path.split("?")[0]
            if path == "/metrics":
                self._answer(200, generate_latest(server.metrics.registry), CONTENT_TYPE_LATEST)
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
