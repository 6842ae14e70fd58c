"""Read the config file, apply ``CDC_DELTA__SECTION__FIELD`` overrides, and explain what is wrong."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from cdc_delta.config.app import AppConfig
from cdc_delta.exceptions import ConfigError

ENV_PREFIX = "CDC_DELTA__"


def _apply_env(data: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    for name, raw in sorted(env.items()):
        if not name.startswith(ENV_PREFIX):
            continue
        path = [part.lower() for part in name[len(ENV_PREFIX) :].split("__")]
        node = data
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"environment variable {name}: {part!r} is not a section of the config")
            node = child
        node[path[-1]] = yaml.safe_load(raw) if raw.strip() else raw
    return data


def _describe(exc: ValidationError, source: str) -> str:
    lines = [f"invalid configuration in {source}:"]
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "missing":
            msg = "is required but missing"
        elif err["type"] == "extra_forbidden":
            msg = "is not a known setting (check the spelling; see streaming/example-config.yaml)"
        lines.append(f"  - {where}: {msg}")
    return "\n".join(lines)


def parse_config(data: Mapping[str, Any], source: str = "<dict>", env: Mapping[str, str] | None = None) -> AppConfig:
    """Validate a config mapping (plus ``CDC_DELTA__`` overrides from ``env``)."""
    merged = _apply_env(dict(data), env or {})
    try:
        return AppConfig.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, source)) from None


def load_config(path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> AppConfig:
    """Read and validate the config file at ``path``; environment overrides come from ``os.environ``."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"config file {str(file)!r} does not exist; pass --config PATH to an existing file")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {str(file)!r} is not valid YAML/JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(file)!r} must hold a mapping (app_id:, storage:, tables: ...)")
    return parse_config(data, str(file), os.environ if env is None else env)
