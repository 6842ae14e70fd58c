"""HTTP to the services the commands use (Kafka Connect, a schema registry), in one place: auth, TLS,
timeouts, and retries with a bounded backoff.

A TLS handshake that fails is named as such at once (:meth:`HttpClient.tls_failure`: the setting to fix,
exit 2). A server that cannot be reached (connection refused, timeout), or whose answer :meth:`HttpClient.retry_answer`
calls passing, is retried for the section's ``retry_seconds``; then :meth:`HttpClient.unreachable`
names the URL. Any other answer of 400 and above becomes :meth:`HttpClient.error`.

Why not urllib3's ``Retry`` under the session: it counts attempts where the settings give a time
(``retry_seconds``, a deadline whatever each attempt's timeout), retries by status code where Connect
needs the answer's body (a 500 "rebalance is expected" is a conflict, another 500 a worker in
trouble), and retries a TLS failure as a connection error, the very confusion this module names.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Any

import requests

from cdc_delta.config.http_service import HttpServiceConfig
from cdc_delta.exceptions import CdcDeltaError, ConfigError

logger = logging.getLogger(__name__)

FIRST_DELAY_S = 0.5
MAX_DELAY_S = 5.0


def _tls_reason(exc: Exception) -> str:
    """The SSL library's own words from a requests SSLError (wrapped in urllib3's retry error)."""
    text = str(exc)
    found = re.search(r"\[SSL: \w+\] ([^\]]+?)(?: \(_ssl\.c:\d+\))", text)
    return found.group(1) if found else text[:200]


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

    def tls_failure(self, exc: Exception) -> CdcDeltaError:
        """The error of a TLS handshake that failed (an untrusted or wrong certificate, TLS against a plain
        port): the setting to fix, not an unreachable server."""
        section = self.config.SECTION
        reason = _tls_reason(exc)
        if "certificate verify failed" in reason or "self-signed" in reason or "self signed" in reason:
            fix = (
                f"the server's certificate is not trusted: set {section}.verify to the CA file that signed it "
                f"(now {self.config.verify!r})"
            )
        elif "wrong version number" in reason or "record layer failure" in reason or "packet length" in reason:
            fix = f"the server does not speak TLS there: check {section}.url (http:// or https://, and the port)"
        else:
            fix = f"check {section}.url, {section}.verify and {section}.client_cert"
        return ConfigError(f"TLS handshake with {self.url} failed ({reason}): {fix}")

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
                    method,
                    self.url + path,
                    json=body,
                    params=params,
                    timeout=self.config.timeout_seconds,
                    # given per request: requests lets REQUESTS_CA_BUNDLE override the session's own CA file
                    verify=self.session.verify,
                )
            except requests.exceptions.SSLError as exc:  # a ConnectionError to requests; not retried: it lasts
                raise self.tls_failure(exc) from None
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
