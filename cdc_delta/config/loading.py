"""Read the config file, apply ``CDC_DELTA__SECTION__FIELD`` overrides, and explain what is wrong: every
problem at once, one line each."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from cdc_delta.config.app import AppConfig
from cdc_delta.config.common import BASE_FOLDER
from cdc_delta.config.env_overrides import apply_env
from cdc_delta.config.inline_secrets import inline_secrets
from cdc_delta.config.problems import Problem, describe, location, placed, report
from cdc_delta.config.yaml_file import Repeated, read_yaml
from cdc_delta.exceptions import ConfigError

PASSES = 3
"""Validations past the first, each with the settings in error so far left out."""


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
    context = {"env": env, "files": check_files} if check_env else {"files": check_files}
    try:
        config = AppConfig.model_validate(merged, context=context)
    except ValidationError as exc:
        errors = [*exc.errors(), *_unreached(merged, exc.errors(), context)]
        problems += describe(errors, merged, origins, AppConfig, data)
    if problems:
        raise ConfigError(report(problems, source))
    return config


def _unreached(merged: Mapping[str, Any], errors: list[ErrorDetails], context: dict[str, Any]) -> list[ErrorDetails]:
    """The errors that checks across sections would report, which pydantic runs only once the settings they
    read are valid (the registry against ``kafka.value_format``, the locks against ``storage.root``...): the
    settings in error are left out (their defaults taken) and the config validated again, so that one run
    lists every problem. Errors at a setting left out (a required one now missing) are not new."""
    data = copy.deepcopy(dict(merged))
    left_out: list[tuple[Any, ...]] = []
    seen = {(tuple(e["loc"]), e["msg"]) for e in errors}
    found: list[ErrorDetails] = []
    for _ in range(PASSES):
        left_out += [tuple(e["loc"]) for e in errors if _leave_out(data, tuple(e["loc"]))]
        try:
            AppConfig.model_validate(data, context=context)
            return found
        except ValidationError as exc:
            errors = [
                e
                for e in exc.errors()
                if (tuple(e["loc"]), e["msg"]) not in seen and not any(tuple(e["loc"])[: len(o)] == o for o in left_out)
            ]
        if not errors:
            return found
        found += errors
        seen |= {(tuple(e["loc"]), e["msg"]) for e in errors}
    return found


def _leave_out(data: Any, loc: tuple[Any, ...]) -> bool:
    """Remove the setting at ``loc`` from ``data``; False where there is none to remove (a check of the
    whole config, or a list entry: taking it out would renumber the others)."""
    node = data
    for part in loc[:-1]:
        listed = isinstance(node, list) and isinstance(part, int) and -len(node) <= part < len(node)
        if not (listed or (isinstance(node, dict) and part in node)):
            return False
        node = node[part]
    if loc and isinstance(node, dict) and loc[-1] in node:
        del node[loc[-1]]
        return True
    return False


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
