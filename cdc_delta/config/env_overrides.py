"""``CDC_DELTA__SECTION__FIELD=value`` overrides: merged into the file's settings, remembering which
variable set what so that a bad value names the variable, not the file.

Section and setting names are case-insensitive; keys below a map (``spark.conf``, ``kafka.options``)
keep their case: ``CDC_DELTA__SPARK__CONF__spark.sql.shuffle.partitions=8``. Values are read as YAML
(``8``, ``true``, ``[a, b]``, ``null``), except that a setting taking text keeps the text as written.

Why not pydantic-settings' nested ``__`` overrides: case-insensitive, it lowercases every variable's
name, map keys included, and Spark's settings are case-sensitive
(``spark.sql.adaptive.coalescePartitions.enabled``); case-sensitive, every section would have to be
written in lower case (``CDC_DELTA__kafka__...``). It reads values as JSON, not YAML, and it would not
tell a bad value's variable from the file's line (:mod:`cdc_delta.config.problems` names the
variable: ``CDC_DELTA__MERGE__CONCURRENCY (merge.concurrency): must be >= 1, not 0``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import yaml
from pydantic import BaseModel

from cdc_delta.config.shape import is_map, step, takes_text_only

ENV_PREFIX = "CDC_DELTA__"

Origins = dict[tuple[str, ...], str]
"""Which variable set the value at a path."""


def _value(raw: str, annotation: Any) -> Any:
    if not raw.strip():
        return raw
    try:
        parsed = yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw  # the setting's own check says what is wrong with it
    return raw if takes_text_only(annotation, parsed) else parsed


def apply_env(
    data: Mapping[str, Any], env: Mapping[str, str], root: type[BaseModel]
) -> tuple[dict[str, Any], Origins, list[tuple[str, str]]]:
    """``data`` (not changed) with the overrides in ``env``; where each came from; and the variables that
    cannot apply (variable name, why)."""
    merged = copy.deepcopy(dict(data))
    origins: Origins = {}
    problems: list[tuple[str, str]] = []
    for name, raw in sorted(env.items()):
        if not name.startswith(ENV_PREFIX):
            continue
        parts = name[len(ENV_PREFIX) :].split("__")
        if not all(parts):
            problems.append((name, f"is not {ENV_PREFIX}SECTION__FIELD (an empty part between '__')"))
            continue
        node: dict[str, Any] = merged
        annotation: Any = root
        keys: list[str] = []
        for i, part in enumerate(parts):
            key = part if is_map(annotation) else part.lower()
            keys.append(key)
            annotation = step(annotation, key) if annotation is not None else None
            if i == len(parts) - 1:
                node[key] = _value(raw, annotation)
                origins[tuple(keys)] = name
                break
            if node.get(key) is None:
                node[key] = {}
            if not isinstance(node[key], dict):
                problems.append((name, f"{key!r} is not a section of the config"))
                break
            node = node[key]
    return merged, origins, problems
