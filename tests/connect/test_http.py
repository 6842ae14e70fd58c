"""The Kafka Connect HTTP layer against a scripted worker (an adapter under a real requests.Session):
retries of 409 and unreachable workers, errors that name the connector or carry the worker's message,
auth and TLS settings. The real worker is exercised by tests/e2e and tests/connect/test_cli_worker.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from requests.adapters import BaseAdapter
from requests.models import PreparedRequest, Response

from cdc_delta.config import ConnectConfig
from cdc_delta.connect.client import ConnectClient
from cdc_delta.connect.http import ConnectHttp
from cdc_delta.exceptions import (
    EXIT_UNAVAILABLE,
    ConfigError,
    ConnectorConflict,
    ConnectorError,
    ConnectorNotFound,
    ConnectUnavailable,
    exit_code_for,
)
from tests.services import free_port

Answer = tuple[int, Any]


class ScriptedWorker(BaseAdapter):
    """Answers each request with the next scripted (status, body), and records what was asked."""

    def __init__(self, answers: list[Answer | Callable[[PreparedRequest], Answer]]) -> None:
        super().__init__()
        self.answers = list(answers)
        self.requests: list[PreparedRequest] = []

    def send(self, request: PreparedRequest, **kwargs: Any) -> Response:  # type: ignore[override]
        self.requests.append(request)
        answer = self.answers.pop(0)
        status, body = answer(request) if callable(answer) else answer
        response = Response()
        response.status_code = status
        response.url = request.url or ""
        response._content = b"" if body is None else json.dumps(body).encode()
        response.request = request
        return response

    def close(self) -> None:
        pass


def http(answers: list[Any], **config: Any) -> tuple[ConnectHttp, ScriptedWorker, list[float]]:
    worker = ScriptedWorker(answers)
    session = requests.Session()
    session.mount("http://", worker)
    sleeps: list[float] = []
    settings = {"url": "http://connect.test:8083", "retry_seconds": 30, **config}
    return ConnectHttp(ConnectConfig(**settings), session=session, sleep=sleeps.append), worker, sleeps


def test_a_rebalance_409_is_retried_with_backoff_until_it_answers() -> None:
    conflict = (409, {"error_code": 409, "message": "Request cannot be completed because a rebalance is expected"})
    client, worker, sleeps = http([conflict, conflict, (201, {"name": "c"})])
    assert client.request("PUT", "/connectors/c/config", body={"a": "b"}, connector="c") == {"name": "c"}
    assert len(worker.requests) == 3
    assert sleeps == [0.5, 1.0]


def test_a_500_rebalance_is_expected_is_retried_too() -> None:
    # What a real worker answers a GET right after a connector was created.
    expected = (500, {"error_code": 500, "message": "Request cannot be completed because a rebalance is expected"})
    client, worker, _ = http([expected, (200, {"name": "c"})])
    assert client.request("GET", "/connectors/c/config", connector="c") == {"name": "c"}
    assert len(worker.requests) == 2


def test_a_409_that_lasts_past_the_retry_time_is_a_conflict_error() -> None:
    conflict = (409, {"error_code": 409, "message": "rebalance in progress"})
    client, _, _ = http([conflict], retry_seconds=0)
    with pytest.raises(ConnectorConflict, match=r"PUT /connectors/c/pause: .*rebalancing.*rebalance in progress"):
        client.request("PUT", "/connectors/c/pause", connector="c")


def test_404_names_the_connector() -> None:
    client, _, _ = http([(404, {"error_code": 404, "message": "Connector nope not found"})])
    with pytest.raises(ConnectorNotFound, match=r"connector 'nope' does not exist on http://connect.test:8083"):
        ConnectClient(client).status("nope")


def test_a_missing_connector_config_is_none_not_an_error() -> None:
    client, _, _ = http([(404, {"error_code": 404, "message": "Connector nope not found"})])
    assert ConnectClient(client).config("nope") is None


def test_4xx_and_5xx_carry_the_workers_own_message() -> None:
    client, _, _ = http([(400, {"error_code": 400, "message": "Connector configuration is invalid"})])
    with pytest.raises(ConnectorError, match=r"failed with HTTP 400: Connector configuration is invalid$"):
        client.request("PUT", "/connectors/c/config", body={}, connector="c")
    client, _, _ = http([(500, {"error_code": 500, "message": None})], retry_seconds=0)
    with pytest.raises(ConnectUnavailable, match=r"HTTP 500: .*the cause is in the Connect worker's log\)"):
        client.request("GET", "/connectors")


def test_a_5xx_is_retried_then_unavailable_not_a_refusal() -> None:
    client, worker, sleeps = http([(502, None), (503, {"message": "restarting"}), (200, [])])
    assert client.request("GET", "/connectors") == []
    assert len(worker.requests) == 3 and sleeps == [0.5, 1.0]
    client, _, _ = http([(500, {"message": "boom"})] * 3, retry_seconds=1.2)
    with pytest.raises(ConnectUnavailable) as lasting:
        client.request("GET", "/connectors")
    assert exit_code_for(lasting.value) == EXIT_UNAVAILABLE


def _https_server(tmp_path: Path, tls: bool) -> tuple[str, Callable[[], None]]:
    """A local server that answers ``[]``: over TLS with a self-signed certificate, or plain HTTP."""
    import http.server
    import ssl
    import subprocess
    import threading

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b"[]")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    if tls:
        cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
             "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
            check=True, capture_output=True,
        )  # fmt: skip
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"https://127.0.0.1:{server.server_address[1]}", server.shutdown


def test_an_untrusted_certificate_and_tls_to_a_plain_port_are_named_not_unreachable(tmp_path: Path) -> None:
    url, stop = _https_server(tmp_path, tls=True)
    try:
        sleeps: list[float] = []
        client = ConnectHttp(ConnectConfig(url=url, retry_seconds=30), sleep=sleeps.append)
        with pytest.raises(
            ConfigError,
            match=r"TLS handshake with https://127.0.0.1:\d+ failed \(.*certificate verify "
            r"failed.*\): the server's certificate is not trusted: set connect.verify to the CA file",
        ):
            client.request("GET", "/connectors")
        assert sleeps == []  # not retried as unreachable
        trusted = ConnectHttp(ConnectConfig(url=url, verify=str(tmp_path / "cert.pem"), retry_seconds=0))
        assert trusted.request("GET", "/connectors") == []
    finally:
        stop()
    url, stop = _https_server(tmp_path, tls=False)
    try:
        client = ConnectHttp(ConnectConfig(url=url, retry_seconds=30), sleep=sleeps.append)
        with pytest.raises(ConfigError, match=r"the server does not speak TLS there: check connect.url"):
            client.request("GET", "/connectors")
        assert sleeps == []
    finally:
        stop()


def test_an_unreachable_worker_is_retried_then_named() -> None:
    port = free_port()  # nothing listens there
    sleeps: list[float] = []
    client = ConnectHttp(ConnectConfig(url=f"http://127.0.0.1:{port}", retry_seconds=2), sleep=sleeps.append)
    with pytest.raises(ConnectorError, match=rf"cannot reach Kafka Connect at http://127.0.0.1:{port} .*--connect-url"):
        client.request("GET", "/connectors")
    assert sleeps and sleeps == sorted(sleeps) and max(sleeps) <= 5.0


def test_basic_auth_from_the_environment_and_tls_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONNECT_PASSWORD", "s3cret")
    client, worker, _ = http([(200, [])], username="admin", password_env="CONNECT_PASSWORD", verify="/etc/ca.pem")
    client.request("GET", "/connectors")
    assert worker.requests[0].headers["Authorization"].startswith("Basic ")
    assert client.session.verify == "/etc/ca.pem"


def test_restart_asks_for_tasks_and_only_the_failed_ones() -> None:
    body = {"name": "c", "connector": {"state": "RUNNING", "worker_id": "w"}, "tasks": [], "type": "source"}
    client, worker, _ = http([(202, body)])
    ConnectClient(client).restart("c", failed_only=True)
    assert worker.requests[0].method == "POST"
    assert worker.requests[0].url == "http://connect.test:8083/connectors/c/restart?includeTasks=true&onlyFailed=true"
