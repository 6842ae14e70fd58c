"""A stand-in schema registry for the tests: the Confluent REST endpoints that the serializer and the
stream use, over real HTTP.

No Confluent-compatible registry can be installed on the test machines: Confluent's Schema Registry
is not on Maven Central, Karapace is not on PyPI, and Apicurio Registry's Maven artifact is an
unassembled Quarkus application. This server answers what clients of a real one ask:

- ``POST /subjects/<subject>/versions`` with ``{"schema": ...}``: registers the schema, the same text
  under the same id (as a real registry does), and answers ``{"id": n}`` (confluent-kafka's
  ``AvroSerializer``);
- ``GET /schemas/ids/<id>``: ``{"schema": ...}``, or 404 with error code 40403 (the stream).

Basic auth is checked when a user is set; ``down`` makes it answer 503, as a registry that lost its
backing store does; :attr:`asked` records each id the stream asked for, :attr:`requests` counts
every request.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class StandInRegistry:
    def __init__(self, user: str | None = None, password: str | None = None) -> None:
        self.schemas: dict[int, str] = {}
        self.subjects: dict[str, list[int]] = {}
        self.asked: list[int] = []
        self.requests = 0
        self.down = False
        self._auth = None if user is None else "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def register(self, subject: str, text: str) -> int:
        with self._lock:
            found = next((i for i, t in self.schemas.items() if t == text), None)
            registry_id = found if found is not None else len(self.schemas) + 1
            self.schemas[registry_id] = text
            self.subjects.setdefault(subject, [])
            if registry_id not in self.subjects[subject]:
                self.subjects[subject].append(registry_id)
            return registry_id

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _refused(self) -> bool:
                registry.requests += 1
                if registry.down:
                    self._answer(503, {"error_code": 50003, "message": "store unavailable"})
                    return True
                if registry._auth is not None and self.headers.get("Authorization") != registry._auth:
                    self._answer(401, {"error_code": 401, "message": "Unauthorized"})
                    return True
                return False

            def do_GET(self) -> None:
                if self._refused():
                    return
                m = re.fullmatch(r"/schemas/ids/(\d+)(\?.*)?", self.path)
                if m is None:
                    self._answer(404, {"error_code": 404, "message": f"no endpoint {self.path}"})
                    return
                registry_id = int(m.group(1))
                registry.asked.append(registry_id)
                text = registry.schemas.get(registry_id)
                if text is None:
                    self._answer(404, {"error_code": 40403, "message": f"Schema {registry_id} not found"})
                else:
                    self._answer(200, {"schema": text})

            def do_POST(self) -> None:
                if self._refused():
                    return
                m = re.fullmatch(r"/subjects/([^/?]+)/versions(\?.*)?", self.path)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if m is None or not isinstance(body.get("schema"), str):
                    self._answer(422, {"error_code": 42201, "message": "Invalid schema"})
                    return
                self._answer(200, {"id": registry.register(m.group(1), body["schema"])})

        return Handler
