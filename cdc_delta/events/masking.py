"""Whether a change event's masked columns arrive masked, and a masked copy of one that does not.

A table's ``mask:`` (:mod:`cdc_delta.config.masking`) asks Debezium to mask columns before they reach
Kafka. Debezium marks what it did in the column's Connect schema: ``hash`` and ``stars N`` add the
parameter ``masked: "true"``; ``truncate N`` adds ``truncateLength: "N"``, except where the column's
declared length is N or less (nothing to cut), which the schema does not tell: the values of such a
column are judged one by one (no longer than N). Debezium masks text columns only, though it marks any:
a masked column of another type arrives in plain text. Debezium applies one mapper per column, the first
of truncate, stars, ``column.propagate.source.type`` and hash: a hashed column also listed for its
source type is not hashed, and is refused here like any other.

A record a masked column of which arrives unmasked is never landed: it is dead-lettered, and the dead
letter keeps the envelope with those columns masked here as Debezium would have (the hash is Debezium's
strategy v2, ``sha256(salt + value)`` in lowercase hex; Debezium cuts it to the column's declared length,
which the schema gives only where the source types are propagated, so here it is cut only then), so that
no plain value reaches the lake.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

MASKED = "masked"
TRUNCATE_LENGTH = "truncateLength"
SOURCE_LENGTH = "__debezium.source.column.length"

_HEX = re.compile(r"[0-9a-f]+")

Rule = tuple[str, int]
"""A mask rule as the decoder holds it: (``hash`` | ``stars`` | ``truncate``, N)."""


@dataclass(frozen=True)
class Masks:
    """The mask rules of the config's tables (listed tables and pattern entries, by name), and the salt
    of ``hash`` (never shown)."""

    rules: dict[str, dict[str, Rule]] = field(default_factory=dict)
    salt: str = field(default="", repr=False)

    def __bool__(self) -> bool:
        return bool(self.rules)


def _params(field_schema: dict[str, Any]) -> dict[str, Any]:
    params = field_schema.get("parameters")
    return params if isinstance(params, dict) else {}


def _declared_length(field_schema: dict[str, Any]) -> int | None:
    try:
        return int(_params(field_schema)[SOURCE_LENGTH])
    except (KeyError, TypeError, ValueError):
        return None


def unmasked(fields: dict[str, dict[str, Any]], rules: dict[str, Rule]) -> list[str]:
    """Why each masked column of an image schema (``fields``: Connect field schemas by column) arrives
    unmasked, one text per column; empty where all arrive masked. A rule's column matches a field
    whatever its case (MySQL's names are case-insensitive, and so is Debezium's column list); a column
    the schema lacks is not judged here (:func:`missing_columns`)."""
    by_lower = {name.lower(): (name, schema) for name, schema in fields.items()}
    problems = []
    for column, (kind, n) in rules.items():
        found = by_lower.get(column.lower())
        if found is None:
            continue
        name, schema = found
        params = _params(schema)
        if schema.get("type") != "string":
            problems.append(f"column {name} is {schema.get('type')}: Debezium masks text columns only")
        elif kind == "truncate":
            length = _declared_length(schema)
            if length is not None and length > n and str(params.get(TRUNCATE_LENGTH)) != str(n):
                problems.append(f"column {name} arrives without Debezium's truncateLength {n}")
        elif params.get(MASKED) != "true":
            problems.append(f"column {name} arrives without Debezium's masked parameter")
    return problems


def unverified(fields: dict[str, dict[str, Any]], rules: dict[str, Rule]) -> dict[str, Rule]:
    """The rules of ``rules`` an image schema cannot confirm: ``truncate N`` of a text column without
    Debezium's ``truncateLength`` nor a declared length (Debezium had nothing to cut, or does not
    truncate it): its values are judged (:func:`unmasked_values`)."""
    by_lower = {name.lower(): schema for name, schema in fields.items()}
    out = {}
    for column, (kind, n) in rules.items():
        schema = by_lower.get(column.lower())
        if kind != "truncate" or schema is None or schema.get("type") != "string":
            continue
        if TRUNCATE_LENGTH not in _params(schema) and _declared_length(schema) is None:
            out[column] = (kind, n)
    return out


def unmasked_values(image: dict[str, Any], rules: dict[str, Rule]) -> list[str]:
    """:func:`unmasked` for a record without a schema (JsonConverter's ``schemas.enable=false``), judged by
    its values: a hash is lowercase hex of at most 64 digits, ``stars N`` N asterisks, ``truncate N`` at
    most N characters (Java's: UTF-16 code units). A plain value that happens to look masked (a short
    hex word) passes: with schemas on, the check is exact."""
    by_lower = {name.lower(): (name, value) for name, value in image.items()}
    problems = []
    for column, (kind, n) in rules.items():
        name, value = by_lower.get(column.lower(), (column, None))
        if value is None:
            continue
        if not isinstance(value, str):
            problems.append(f"column {name} holds {type(value).__name__} values: Debezium masks text columns only")
        elif kind == "hash" and not (len(value) <= 64 and _HEX.fullmatch(value)):
            problems.append(f"column {name} holds a value that is not a hash")
        elif kind == "stars" and value != "*" * n:
            problems.append(f"column {name} holds a value that is not {n} asterisks")
        elif kind == "truncate" and len(value.encode("utf-16-le")) > 2 * n:
            problems.append(f"column {name} holds a value longer than {n} characters")
    return problems


def missing_columns(fields: dict[str, dict[str, Any]], rules: dict[str, Rule]) -> list[str]:
    """The columns of ``rules`` an image schema does not have (a misspelt ``mask:``)."""
    names = {name.lower() for name in fields}
    return [column for column in rules if column.lower() not in names]


def _java_prefix(text: str, n: int) -> str:
    """The first ``n`` UTF-16 code units of ``text``, as Java's ``substring(0, n)`` (a character outside
    the Basic Multilingual Plane counts two; one cut in half is dropped)."""
    units = text.encode("utf-16-le")[: 2 * n]
    return units.decode("utf-16-le", errors="ignore")


def masked_value(value: Any, rule: Rule, salt: str, declared_length: int | None) -> Any:
    """``value`` masked as Debezium masks it by ``rule``."""
    kind, n = rule
    if kind == "stars":
        return "*" * n
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    if kind == "truncate":
        return _java_prefix(text, n)
    digest = hashlib.sha256(salt.encode("utf-8") + text.encode("utf-8")).hexdigest()
    return digest[:declared_length] if declared_length and declared_length > 0 else digest


def masked_envelope(
    schema: Any,
    message: dict[str, Any],
    image_fields: dict[str, dict[str, Any]] | None,
    rules: dict[str, Rule],
    salt: str,
) -> str:
    """The envelope (JsonConverter's form: ``{"schema":..,"payload":..}``, or the payload alone where the
    record had no schema) with every masked column of its row images masked (:func:`masked_value`)."""
    fields = image_fields or {}
    by_lower = {column.lower(): rule for column, rule in rules.items()}
    payload = dict(message)
    for image_name in ("before", "after"):
        image = payload.get(image_name)
        if not isinstance(image, dict):
            continue
        masked = {}
        for name, value in image.items():
            rule = by_lower.get(name.lower())
            if rule is None:
                masked[name] = value
            else:
                length = _declared_length(fields.get(name, {}))
                masked[name] = masked_value(value, rule, salt, length)
        payload[image_name] = masked
    envelope = payload if schema is None else {"schema": schema, "payload": payload}
    return json.dumps(envelope, ensure_ascii=False, separators=(",", ":"))
