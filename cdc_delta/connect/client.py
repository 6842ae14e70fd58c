"""The Kafka Connect REST API, one method per call cdc-delta makes (see Kafka's Connect REST reference)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from cdc_delta.connect.http import ConnectHttp
from cdc_delta.exceptions import ConnectorError, ConnectorNotFound

# Resetting offsets (KIP-875) came with Kafka 3.6.
OFFSETS_RESET_SINCE = (3, 6)


def _path(name: str) -> str:
    return "/connectors/" + quote(name, safe="")


@dataclass(frozen=True)
class TaskState:
    id: int
    state: str
    worker_id: str
    trace: str | None = None

    @property
    def first_trace_line(self) -> str:
        return (self.trace or "").strip().splitlines()[0] if self.trace else ""


@dataclass(frozen=True)
class ConnectorState:
    """``GET /connectors/{name}/status``: the connector's state and its tasks'."""

    name: str
    state: str
    worker_id: str
    tasks: tuple[TaskState, ...]
    trace: str | None = None

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> ConnectorState:
        connector = body.get("connector") or {}
        tasks = tuple(
            TaskState(int(t["id"]), t["state"], t.get("worker_id", ""), t.get("trace"))
            for t in sorted(body.get("tasks") or [], key=lambda t: int(t["id"]))
        )
        return cls(
            body["name"], connector.get("state", "?"), connector.get("worker_id", ""), tasks, connector.get("trace")
        )

    @property
    def failed(self) -> bool:
        return self.state == "FAILED" or any(t.state == "FAILED" for t in self.tasks)


class ConnectClient:
    """One Kafka Connect cluster."""

    def __init__(self, http: ConnectHttp) -> None:
        self.http = http

    def version(self) -> str:
        """The worker's Kafka version (``GET /``)."""
        return str((self.http.request("GET", "/") or {}).get("version", ""))

    def connectors(self) -> list[str]:
        return sorted(self.http.request("GET", "/connectors") or [])

    def config(self, name: str) -> dict[str, str] | None:
        """The connector's config as submitted (config-provider references unresolved); None if absent."""
        try:
            return dict(self.http.request("GET", _path(name) + "/config", connector=name))
        except ConnectorNotFound:
            return None

    def put_config(self, name: str, config: dict[str, str]) -> None:
        """Create the connector, or update its config (``PUT /connectors/{name}/config``)."""
        self.http.request("PUT", _path(name) + "/config", body=config, connector=name)

    def validate(self, config: dict[str, str]) -> dict[str, Any]:
        """``PUT /connector-plugins/{class}/config/validate``: the worker's verdict, field by field."""
        plugin = config.get("connector.class")
        if not plugin:
            raise ConnectorError("the connector config has no connector.class: name the connector's Java class")
        return dict(
            self.http.request("PUT", f"/connector-plugins/{quote(plugin, safe='')}/config/validate", body=config)
        )

    def status(self, name: str) -> ConnectorState:
        return ConnectorState.from_json(self.http.request("GET", _path(name) + "/status", connector=name))

    def restart(self, name: str, failed_only: bool = False) -> ConnectorState | None:
        """Restart the connector and its tasks (only the failed ones with ``failed_only``)."""
        params = {"includeTasks": "true", "onlyFailed": "true" if failed_only else "false"}
        body = self.http.request("POST", _path(name) + "/restart", params=params, connector=name)
        return ConnectorState.from_json(body) if body else None

    def pause(self, name: str) -> None:
        self.http.request("PUT", _path(name) + "/pause", connector=name)

    def resume(self, name: str) -> None:
        self.http.request("PUT", _path(name) + "/resume", connector=name)

    def stop(self, name: str) -> None:
        """Stop the connector and its tasks, keeping its config (KIP-875)."""
        self.http.request("PUT", _path(name) + "/stop", connector=name)

    def delete(self, name: str) -> None:
        self.http.request("DELETE", _path(name), connector=name)

    def offsets(self, name: str) -> list[dict[str, Any]]:
        """The source offsets the connector has committed (``GET /connectors/{name}/offsets``)."""
        return list((self.http.request("GET", _path(name) + "/offsets", connector=name) or {}).get("offsets") or [])

    def reset_offsets(self, name: str) -> str:
        """Forget the connector's committed offsets; the worker refuses unless the connector is STOPPED."""
        version = self.version()
        numbers = tuple(int(p) for p in version.split("-")[0].split(".")[:2] if p.isdigit())
        if numbers and numbers < OFFSETS_RESET_SINCE:
            raise ConnectorError(
                f"the Connect worker runs Kafka {version}; resetting offsets needs 3.6 or later (KIP-875)"
            )
        body = self.http.request("DELETE", _path(name) + "/offsets", connector=name)
        return str((body or {}).get("message", "offsets reset"))
