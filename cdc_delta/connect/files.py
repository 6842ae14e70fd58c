"""Connector definition files, and how a connector's config is shown without its secrets.

A file (JSON or YAML) holds either the body of ``POST /connectors`` (``{"name": ..., "config": {...}}``)
or the config alone with its ``name`` in it. Values become strings, as Kafka Connect holds them.
Passwords stay out of the file: Kafka Connect's config providers read them where the worker runs
(``${file:/run/secrets/db.properties:password}``, ``${env:DB_PASSWORD}``), so they are never stored in
Kafka's config topic either. ``--set key=value`` overrides a value for one environment (a hostname, a
port, the path of the secrets file).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cdc_delta.exceptions import ConnectorError

REDACTED = "********"
# Keys whose values are secrets, whatever the connector or client library: database.password,
# ssl.keystore.password, sasl.jaas.config, basic.auth.user.info, *.secret, *.token, *.credentials ...
_SECRET_KEY = re.compile(r"password|secret|jaas\.config|user\.info|token|credential|api\.?key|private\.key", re.I)
_PROVIDER_REFERENCE = re.compile(r"^\$\{[A-Za-z0-9_.-]+:[^}]*\}$")
_SALTED, _SALT_MARK = "column.mask.hash.", ".with.salt."


@dataclass(frozen=True)
class ConnectorFile:
    """One connector as a file defines it."""

    name: str
    config: dict[str, str]
    """Without ``name`` (the REST API takes the name from the URL)."""
    source: str


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        raise ValueError("nested values are not connector settings")
    return str(value)


def parse_overrides(pairs: Sequence[str]) -> dict[str, str]:
    """``["a=b", "c=d"]`` -> ``{"a": "b", "c": "d"}``; the first ``=`` splits."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConnectorError(f"--set {pair!r} is not KEY=VALUE, e.g. --set database.hostname=db.internal")
        out[key.strip()] = value
    return out


def load_connector_file(path: str | Path, overrides: Mapping[str, str] | None = None) -> ConnectorFile:
    """Read and check one connector file; raises ConnectorError naming the file and what is wrong."""
    file = Path(path)
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConnectorError(f"connector file {file}: cannot be read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConnectorError(f"connector file {file} is not valid JSON or YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConnectorError(f"connector file {file} must hold a mapping: {{name: ..., config: {{...}}}}")
    raw: dict[str, Any] = data["config"] if isinstance(data.get("config"), dict) else data
    try:
        config = {str(k): _text(v) for k, v in raw.items()}
    except ValueError as exc:
        raise ConnectorError(f"connector file {file}: {exc}; every value must be a string, number or boolean") from None
    config.update(overrides or {})  # --set name=... names the connector
    name = config.pop("name", None) or data.get("name")
    if not name or not isinstance(name, str):
        raise ConnectorError(f"connector file {file} has no connector name: add name: <connector name>")
    if not config.get("connector.class"):
        raise ConnectorError(
            f"connector file {file} has no connector.class (e.g. io.debezium.connector.mariadb.MariaDbConnector)"
        )
    return ConnectorFile(name, config, str(file))


def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(key))


def shown(key: str, value: str | None) -> str:
    """A value as the CLI may print it: secrets masked, config-provider references as they are."""
    if value is None:
        return "-"
    if is_secret_key(key) and not _PROVIDER_REFERENCE.match(value):
        return REDACTED
    return value


def shown_key(key: str) -> str:
    """A setting's name as the CLI may print it: the salt of a hash mask, which Debezium takes in the
    name (``column.mask.hash.v2.SHA-256.with.salt.<salt>``), masked."""
    if key.startswith(_SALTED) and _SALT_MARK in key:
        return key[: key.index(_SALT_MARK) + len(_SALT_MARK)] + REDACTED
    return key


def redacted(config: Mapping[str, str]) -> dict[str, str]:
    return {shown_key(key): shown(key, value) for key, value in config.items()}


@dataclass(frozen=True)
class ConfigDiff:
    """What applying a config would change on the worker."""

    added: dict[str, str]
    changed: dict[str, tuple[str, str]]
    removed: dict[str, str]

    @property
    def empty(self) -> bool:
        return not (self.added or self.changed or self.removed)

    def lines(self) -> list[str]:
        """One line per change, secrets masked."""
        out = [f"  + {shown_key(k)} = {shown(k, v)}" for k, v in sorted(self.added.items())]
        out += [f"  ~ {shown_key(k)}: {shown(k, a)} -> {shown(k, b)}" for k, (a, b) in sorted(self.changed.items())]
        out += [f"  - {shown_key(k)} (was {shown(k, v)})" for k, v in sorted(self.removed.items())]
        return out


def config_diff(current: Mapping[str, str] | None, desired: Mapping[str, str]) -> ConfigDiff:
    """The difference between the worker's config (None: no such connector) and the file's."""
    now = {k: v for k, v in (current or {}).items() if k != "name"}
    return ConfigDiff(
        added={k: v for k, v in desired.items() if k not in now},
        changed={k: (now[k], v) for k, v in desired.items() if k in now and now[k] != v},
        removed={k: v for k, v in now.items() if k not in desired},
    )


def validation_errors(verdict: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(field, message)`` for every error of a validate answer."""
    out = []
    for item in verdict.get("configs") or []:
        value = item.get("value") or {}
        for message in value.get("errors") or []:
            out.append((str(value.get("name", "?")), str(message)))
    return out


def dumps(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True)
