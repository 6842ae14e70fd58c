"""HTTP to the Kafka Connect REST API, in one place: retries, timeouts, auth, TLS, and errors.

- A worker that cannot be reached (connection refused, timeout) is retried with a bounded backoff for
  ``connect.retry_seconds``, then a :class:`ConnectorError` names the URL.
- 409 (a rebalance or a concurrent config change in progress), and 500 "a rebalance is expected"
  (what a worker answers a GET while it rebalances), are retried the same way, then
  :class:`ConnectorConflict`.
- Every other answer of 400 and above becomes an exception in :func:`error_for` (404 naming the
  connector, the rest carrying the worker's own message), which a caller may replace.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import requests

from cdc_delta.config import ConnectConfig
from cdc_delta.exceptions import ConnectorConflict, ConnectorError, ConnectorNotFound

logger = logging.getLogger(__name__)

FIRST_DELAY_S = 0.5
MAX_DELAY_S = 5.0


def _worker_message(response: requests.Response) -> str:
    """The worker's own error message (``{"error_code": ..., "message": ...}``), else the body's start."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return str(body)[:300]


def rebalancing(response: requests.Response) -> bool:
    """The worker is rebalancing or its config is changing: the same request succeeds shortly."""
    if response.status_code == 409:
        return True
    return response.status_code == 500 and "rebalance" in _worker_message(response).lower()


def error_for(response: requests.Response, what: str, connector: str | None) -> ConnectorError:
    """The exception for an answer of 400 or above to ``what`` (e.g. ``PUT /connectors/x/config``)."""
    message = _worker_message(response)
    if response.status_code == 404 and connector is not None:
        return ConnectorNotFound(
            f"connector {connector!r} does not exist on {response.url.split('/connectors')[0]} "
            f"({message}); `cdc-delta connectors list` shows the ones that do"
        )
    if rebalancing(response):
        code = response.status_code
        return ConnectorConflict(f"{what}: the Connect cluster is rebalancing or busy (HTTP {code}): {message}")
    hint = " (the cause is in the Connect worker's log)" if response.status_code >= 500 else ""
    return ConnectorError(f"{what} failed with HTTP {response.status_code}: {message}{hint}")


class ConnectHttp:
    """Requests to one Connect cluster, configured from the ``connect:`` section."""

    def __init__(
        self,
        config: ConnectConfig,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
        errors: Callable[[requests.Response, str, str | None], ConnectorError] = error_for,
    ) -> None:
        self.config = config
        self.url = config.url
        self.session = session or requests.Session()
        self._sleep = sleep
        self._errors = errors
        if config.username:
            self.session.auth = (config.username, config.password() or "")
        self.session.verify = config.verify
        if config.client_cert:
            self.session.cert = (config.client_cert, config.client_key) if config.client_key else config.client_cert
        self.session.headers.update({"Accept": "application/json", "Content-Type": "application/json"})

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, str] | None = None,
        connector: str | None = None,
    ) -> Any:
        """Send one request; returns the decoded JSON body (None for an empty one)."""
        what = f"{method} {path}"
        deadline = time.monotonic() + self.config.retry_seconds
        delay = FIRST_DELAY_S
        while True:
            try:
                response = self.session.request(
                    method, self.url + path, json=body, params=params, timeout=self.config.timeout_seconds
                )
            except (requests.ConnectionError, requests.Timeout) as exc:
                if time.monotonic() + delay > deadline:
                    raise ConnectorError(
                        f"cannot reach Kafka Connect at {self.url} ({type(exc).__name__}) after retrying for "
                        f"{self.config.retry_seconds:g}s: is the worker running? Check connect.url or --connect-url"
                    ) from None
                logger.debug("%s: %s; retrying in %.1fs", what, exc, delay)
            else:
                if not rebalancing(response) or time.monotonic() + delay > deadline:
                    return self._decoded(response, what, connector)
                logger.info("%s: the Connect cluster is rebalancing; retrying in %.1fs", what, delay)
            self._sleep(delay)
            delay = min(delay * 2, MAX_DELAY_S)

    def _decoded(self, response: requests.Response, what: str, connector: str | None) -> Any:
        if response.status_code >= 400:
            raise self._errors(response, what, connector)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise ConnectorError(f"{what}: the worker answered {response.status_code} with no JSON body") from None
