"""HTTP to the services the commands use (Kafka Connect, a schema registry), in one place: auth, TLS,
timeouts, and retries with a bounded backoff.

A server that cannot be reached (connection refused, timeout), or whose answer :meth:`HttpClient.retry_answer`
calls passing, is retried for the section's ``retry_seconds``; then :meth:`HttpClient.unreachable`
names the URL. Any other answer of 400 and above becomes :meth:`HttpClient.error`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import requests

from cdc_delta.config.http_service import HttpServiceConfig
from cdc_delta.exceptions import CdcDeltaError

logger = logging.getLogger(__name__)

FIRST_DELAY_S = 0.5
MAX_DELAY_S = 5.0


def server_message(response: requests.Response) -> str:
    """The server's own error message (``{"error_code": ..., "message": ...}``), else the body's start."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return str(body)[:300]


class HttpClient:
    """Requests to one service, configured from its config section. Subclasses say what is retried
    and which exceptions the caller gets."""

    failure: type[CdcDeltaError] = CdcDeltaError

    def __init__(
        self,
        config: HttpServiceConfig,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self.url = config.url
        self.session = session or requests.Session()
        self._sleep = sleep
        if config.username:
            self.session.auth = (config.username, config.password() or "")
        self.session.verify = config.verify
        if config.client_cert:
            self.session.cert = (config.client_cert, config.client_key) if config.client_key else config.client_cert
        self.session.headers.update({"Accept": "application/json", "Content-Type": "application/json"})

    def retry_answer(self, response: requests.Response) -> bool:
        """An answer that the same request is expected to get past shortly (retried like no answer)."""
        return False

    def unreachable(self, exc: Exception) -> CdcDeltaError:
        """The error once the server could not be reached for ``retry_seconds``."""
        return self.failure(
            f"cannot reach {self.url} ({type(exc).__name__}) after retrying for {self.config.retry_seconds:g}s"
        )

    def error(self, response: requests.Response, what: str, subject: str | None) -> CdcDeltaError:
        """The exception for an answer of 400 or above to ``what`` (e.g. ``GET /schemas/ids/3``)."""
        return self.failure(f"{what} failed with HTTP {response.status_code}: {server_message(response)}")

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, str] | None = None,
        subject: str | None = None,
    ) -> Any:
        """Send one request; returns the decoded JSON body (None for an empty one). ``subject`` names
        what the request is about, for :meth:`error`."""
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
                    raise self.unreachable(exc) from None
                logger.debug("%s: %s; retrying in %.1fs", what, exc, delay)
            else:
                if not self.retry_answer(response) or time.monotonic() + delay > deadline:
                    return self._decoded(response, what, subject)
                logger.info("%s: %s answered %s; retrying in %.1fs", what, self.url, response.status_code, delay)
            self._sleep(delay)
            delay = min(delay * 2, MAX_DELAY_S)

    def _decoded(self, response: requests.Response, what: str, subject: str | None) -> Any:
        if response.status_code >= 400:
            raise self.error(response, what, subject)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise self.failure(f"{what}: {self.url} answered {response.status_code} with no JSON body") from None
