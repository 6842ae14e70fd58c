"""What is wrong with a config, one line each: where (a table by its name, an override by its variable)
and what to write instead."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic_core import ErrorDetails

from cdc_delta.config.durations import as_number
from cdc_delta.config.env_overrides import Origins
from cdc_delta.config.shape import Loc, annotation_at, is_map, model_at, settings_at, step

_TIME_UNITS = ("seconds", "minutes", "hours")


@dataclass(frozen=True)
class Problem:
    where: str
    message: str
    from_env: bool = False


def report(problems: Sequence[Problem], source: str) -> str:
    """The message of the ConfigError: a header, then ``  - <where>: <message>`` per problem."""
    if all(p.from_env for p in problems):
        header = "invalid configuration from the environment:"
    else:
        header = f"invalid configuration in {source}:"
    return "\n".join([header, *(f"  - {p.where}: {p.message}" for p in problems)])


def location(loc: Loc, data: Any, root: type[BaseModel]) -> str:
    """``loc`` as a reader finds it: ``tables[inventory.orders].key``, ``spark.conf['spark.x']``."""
    out, node, annotation = "", data, root
    for part in loc:
        if isinstance(part, int):
            node = node[part] if isinstance(node, list) and -len(node) <= part < len(node) else None
            name = node.get("name") if isinstance(node, dict) else None
            out += f"[{name}]" if isinstance(name, str) and name else f"[{part}]"
        else:
            out += f"[{part!r}]" if is_map(annotation) else f".{part}" if out else part
            node = node.get(part) if isinstance(node, dict) else None
        annotation = step(annotation, part) if annotation is not None else None
    return out or "(top level)"


def _in(data: Any, loc: Loc) -> bool:
    """True when ``data`` has something at ``loc``."""
    node: Any = data
    for part in loc:
        if isinstance(node, list) and isinstance(part, int) and -len(node) <= part < len(node):
            node = node[part]
            continue
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def placed(loc: Loc, merged: Any, origins: Origins, root: type[BaseModel], file: Any) -> tuple[str, bool]:
    """The where of a problem at ``loc`` (in ``merged``, the ``file``'s settings with the overrides), and
    whether environment variables alone set what is there."""
    text = location(loc, merged, root)
    for path, var in origins.items():
        if tuple(loc[: len(path)]) == path:
            return f"{var} ({text})", True
    below = sorted(var for path, var in origins.items() if tuple(path[: len(loc)]) == tuple(loc))
    if below and not _in(file, loc):
        return f"{', '.join(below)} ({text})", True
    return (f"{text} (with {', '.join(below)})" if below else text), False


def _unknown(loc: Loc, root: type[BaseModel]) -> str:
    key, known = str(loc[-1]), settings_at(root, loc[:-1])
    if "password" in key.lower() and "password_env" in known:
        return (
            "is not a setting: a password is never written in the config; set password_env (the name of an "
            "environment variable holding it) or password_file (a file holding it)"
        )
    close = difflib.get_close_matches(key, known, n=1)
    if close:
        return f"is not a known setting; did you mean {close[0]!r}?"
    return "is not a known setting (check the spelling; see streaming/example-config.yaml)"


def _kind(value: object) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "text"
    return "a number" if isinstance(value, (int, float)) and not isinstance(value, bool) else "a single value"


def _duration(err: ErrorDetails, name: str, root: type[BaseModel]) -> str | None:
    """For ``*_seconds``/``*_minutes``/``*_hours`` settings: a number of that unit, and which."""
    unit = name.rsplit("_", 1)[-1]
    if unit not in _TIME_UNITS:
        return None
    value, ctx = err.get("input"), err.get("ctx") or {}
    example = _numeric_default(err, name, root)
    default = "" if example is None else f" (default {example:g})"
    if err["type"] in ("greater_than", "greater_than_equal"):
        bound = f"> {ctx['gt']:g}" if err["type"] == "greater_than" else f">= {ctx['ge']:g}"
        return f"must be a number of {unit} {bound}, not {value}{default}"
    if err["type"] in ("float_parsing", "float_type") and isinstance(value, str):
        number = as_number(value, unit)
        if number is not None:
            return f"is a number of {unit}: write {name}: {number:g}"
        return f"is a number of {unit}, not {value!r}: write e.g. {name}: {60 if example is None else example:g}"
    return None


def _hint(err: ErrorDetails, root: type[BaseModel]) -> str:
    kind, value, loc = err["type"], err.get("input"), err["loc"]
    name = next((str(p) for p in reversed(loc) if isinstance(p, str)), "")
    if kind == "missing":
        return "is required but missing"
    if kind == "extra_forbidden":
        return _unknown(loc, root)
    if kind == "list_type" and isinstance(value, str):
        items = [item.strip() for item in value.split(",") if item.strip()]
        return f"{name} is a list: write {name}: [{', '.join(items)}]"
    text_only = kind == "string_type" and annotation_at(root, loc) is str  # not one member of a union
    if text_only and isinstance(value, list) and all(isinstance(v, (str, int)) for v in value):
        return f"{name} is one text, not a list: write {name}: {','.join(str(v) for v in value)}"
    if text_only and isinstance(value, (bool, int, float)):
        shown = str(value).lower() if isinstance(value, bool) else str(value)
        return f'is text: put it in quotes, "{shown}"'
    if kind in ("model_type", "dict_type"):
        if value is None:
            return f"{name} is empty: indent its settings below it, or leave it out"
        return f"{name} holds settings (name: value), not {_kind(value)}"
    return _duration(err, name, root) or _scalar(err, name, root) or err["msg"].removeprefix("Value error, ")


_BOUNDS = {
    "greater_than": ("gt", ">"),
    "greater_than_equal": ("ge", ">="),
    "less_than": ("lt", "<"),
    "less_than_equal": ("le", "<="),
}


def _default(err: ErrorDetails, name: str, root: type[BaseModel]) -> Any:
    """The default of the setting ``err`` is about (None where it has none, or it is not found)."""
    model = model_at(root, err["loc"][:-1])
    field = model.model_fields.get(name) if model is not None else None
    return field.default if field is not None else None


def _numeric_default(err: ErrorDetails, name: str, root: type[BaseModel]) -> int | float | None:
    default = _default(err, name, root)
    return default if isinstance(default, (int, float)) and not isinstance(default, bool) else None


def _scalar(err: ErrorDetails, name: str, root: type[BaseModel]) -> str | None:
    """Numbers, booleans and choices in the project's words: the value given and what to write (pydantic's
    own, ``Input should be a valid integer``, names neither)."""
    kind, value, ctx = err["type"], err.get("input"), err.get("ctx") or {}
    numeric = _numeric_default(err, name, root)
    if kind in _BOUNDS:
        key, sign = _BOUNDS[kind]
        example = ctx.get(key) if numeric is None else numeric
        return f"must be {sign} {ctx.get(key)}, not {value!r}: write e.g. {name}: {example}"
    number = 1 if numeric is None else numeric
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"is a whole number, not {value!r}: write e.g. {name}: {int(number)}"
    if kind in ("float_parsing", "float_type"):
        return f"is a number, not {value!r}: write e.g. {name}: {number:g}"
    if kind in ("bool_parsing", "bool_type"):
        default = _default(err, name, root)
        return f"is true or false, not {value!r}: write {name}: {'false' if default is True else 'true'}"
    if kind == "literal_error":
        return f"is one of {ctx.get('expected')}, not {value!r}"
    return None


def describe(
    errors: Sequence[ErrorDetails], merged: Mapping[str, Any], origins: Origins, root: type[BaseModel], file: Any
) -> list[Problem]:
    """A problem per validation error (``merged``: the ``file``'s settings with the overrides)."""
    problems = []
    for err in errors:
        where, from_env = placed(err["loc"], merged, origins, root, file)
        problems.append(Problem(where, _hint(err, root), from_env))
    return problems
