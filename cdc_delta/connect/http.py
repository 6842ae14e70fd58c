"""HTTP to the Kafka Connect REST API: :class:`~cdc_delta.http_client.HttpClient` with Connect's
retries and errors.

- 409 (a rebalance or a concurrent config change in progress), and 500 "a rebalance is expected"
  (what a worker answers a GET while it rebalances), are retried like an unreachable worker, then
  :class:`ConnectorConflict`; any other 5xx (a worker restarting, a proxy in front of it) is retried
  too, then :class:`ConnectUnavailable` (exit 69: often transient, restart later).
- Every other answer of 400 and above becomes an exception in :func:`error_for` (404 naming the
  connector, the rest carrying the worker's own message), which a caller may replace.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import requests

from cdc_delta.config import ConnectConfig
from cdc_delta.exceptions import CdcDeltaError, ConnectorConflict, ConnectorError, ConnectorNotFound, ConnectUnavailable
from cdc_delta.http_client import HttpClient, server_message


def rebalancing(response: requests.Response) -> bool:
    """The worker is rebalancing or its config is changing: the same request succeeds shortly."""
    if response.status_code == 409:
        return True
    return response.status_code == 500 and "rebalance" in server_message(response).lower()


def error_for(response: requests.Response, what: str, connector: str | None) -> ConnectorError:
    """The exception for an answer of 400 or above to ``what`` (e.g. ``PUT /connectors/x/config``)."""
    message = server_message(response)
    if response.status_code == 404 and connector is not None:
        return ConnectorNotFound(
            f"connector {connector!r} does not exist on {response.url.split('/connectors')[0]} "
            f"({message}); `cdc-delta connectors list` shows the ones that do"
        )
    if rebalancing(response):
        code = response.status_code
        return ConnectorConflict(f"{what}: the Connect cluster is rebalancing or busy (HTTP {code}): {message}")
    if response.status_code >= 500:
        return ConnectUnavailable(
            f"{what} failed with HTTP {response.status_code}: {message} (retried for connect.retry_seconds; the "
            "cause is in the Connect worker's log)"
        )
    return ConnectorError(f"{what} failed with HTTP {response.status_code}: {message}")


class ConnectHttp(HttpClient):
    """Requests to one Connect cluster, configured from the ``connect:`` section."""

    failure = ConnectorError

    def __init__(
        self,
        config: ConnectConfig,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
        errors: Callable[[requests.Response, str, str | None], ConnectorError] = error_for,
    ) -> None:
        super().__init__(config, session, sleep)
        self._errors = errors

    def retry_answer(self, response: requests.Response) -> bool:
        return rebalancing(response) or response.status_code >= 500

    def unreachable(self, exc: Exception) -> CdcDeltaError:
        return ConnectUnavailable(
            f"cannot reach Kafka Connect at {self.url} ({type(exc).__name__}) after retrying for "
            f"{self.config.retry_seconds:g}s: is the worker running? Check connect.url or --connect-url"
        )

    def error(self, response: requests.Response, what: str, subject: str | None) -> CdcDeltaError:
        return self._errors(response, what, subject)

    def request(  # type: ignore[override]
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, str] | None = None,
        connector: str | None = None,
    ) -> Any:
        """Send one request about ``connector`` (named in a 404's message)."""
        return super().request(method, path, body=body, params=params, subject=connector)
