"""Read the config file, apply ``CDC_DELTA__SECTION__FIELD`` overrides, and explain what is wrong: every
problem at once, one line each."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from cdc_delta.config.app import AppConfig
from cdc_delta.config.common import BASE_FOLDER
from cdc_delta.config.env_overrides import apply_env
from cdc_delta.config.inline_secrets import inline_secrets
from cdc_delta.config.problems import Problem, describe, location, placed, report
from cdc_delta.config.yaml_file import Repeated, read_yaml
from cdc_delta.exceptions import ConfigError


def _twice(repeated: Repeated) -> str:
    lines = repeated.first_line, repeated.second_line
    where = f"on line {lines[0]}" if lines[0] == lines[1] else f"on lines {lines[0]} and {lines[1]}"
    return f"is given twice, {where}: YAML keeps only the second; write it once"


def _validate(
    data: Mapping[str, Any],
    source: str,
    env: Mapping[str, str],
    repeated: Sequence[Repeated],
    check_env: bool,
    check_files: bool = False,
) -> AppConfig:
    merged, origins, env_problems = apply_env(data, env, AppConfig)
    problems = [Problem(var, why, from_env=True) for var, why in env_problems]
    problems += [Problem(location(r.loc, merged, AppConfig), _twice(r)) for r in repeated]
    problems += [
        Problem(placed(loc, merged, origins, AppConfig, data)[0], why) for loc, why in inline_secrets(merged, origins)
    ]
    try:
        context = {"env": env, "files": check_files} if check_env else {"files": check_files}
        config = AppConfig.model_validate(merged, context=context)
    except ValidationError as exc:
        problems += describe(exc, merged, origins, AppConfig, data)
    if problems:
        raise ConfigError(report(problems, source))
    return config


def parse_config(data: Mapping[str, Any], source: str = "<dict>", env: Mapping[str, str] | None = None) -> AppConfig:
    """Validate a config mapping (plus ``CDC_DELTA__`` overrides from ``env``). Given ``env``, a
    ``password_env`` must name a variable set in it."""
    return _validate(data, source, env or {}, (), check_env=env is not None)


def load_config(
    path: str | os.PathLike[str], env: Mapping[str, str] | None = None, check_files: bool = False
) -> AppConfig:
    """Read and validate the config file at ``path``; environment overrides come from ``env``, by default
    ``os.environ``. Given ``env``, a ``password_env`` must name a variable set in it; with ``check_files``,
    every file the config names (passwords, certificates, keys) must be readable here."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"config file {str(file)!r} does not exist; pass --config PATH to an existing file")
    try:
        data, repeated = read_yaml(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {str(file)!r} is not valid YAML/JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(file)!r} must hold a mapping (app_id:, storage:, tables: ...)")
    env_given = env is not None
    folder = BASE_FOLDER.set(str(file.resolve().parent))  # relative paths in it are taken from its folder
    try:
        return _validate(data, str(file), os.environ if env is None else env, repeated, env_given, check_files)
    finally:
        BASE_FOLDER.reset(folder)
