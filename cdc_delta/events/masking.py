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

import copy
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

MASKED = "masked"
CDC_DELTA = "cdc-delta"
"""The ``masked`` parameter's value on a column cdc-delta masked in a dead letter (not ``"true"``: the
record is still refused when replayed, and its column not masked again)."""
TRUNCATE_LENGTH = "truncateLength"
SOURCE_LENGTH = "__debezium.source.column.length"

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


@dataclass(frozen=True)
class Problem:
    """Why one masked column arrives unmasked. ``config``: no connector setting can mask it (the column
    must leave ``mask:``), where the others are fixed by having the connector mask it."""

    column: str
    text: str
    config: bool = False


def _text(schema: dict[str, Any]) -> bool:
    """Whether a field holds a text column: a Connect string with no logical name (a JSON column, a
    timestamp with zone, an ENUM or SET are strings with a name, and Debezium does not mask them)."""
    return schema.get("type") == "string" and not schema.get("name")


def unmasked(fields: dict[str, dict[str, Any]], rules: dict[str, Rule]) -> list[Problem]:
    """Why each masked column of an image schema (``fields``: Connect field schemas by column) arrives
    unmasked; empty where all arrive masked. A rule's column matches a field whatever its case (MySQL's
    names are case-insensitive, and so is Debezium's column list); a column the schema lacks is not
    judged here (:func:`missing_columns`). A DECIMAL or binary column sent as text
    (``decimal.handling.mode=string``, ``binary.handling.mode=base64``) looks like a text column: leave
    such columns out of ``mask:``."""
    by_lower = {name.lower(): (name, schema) for name, schema in fields.items()}
    problems = []
    for column, (kind, n) in rules.items():
        found = by_lower.get(column.lower())
        if found is None:
            continue
        name, schema = found
        params = _params(schema)
        if not _text(schema):
            what = schema.get("name") or schema.get("type")
            problems.append(Problem(name, f"column {name} is {what}, not text: Debezium masks text columns only", True))
        elif kind == "truncate":
            given = params.get(TRUNCATE_LENGTH)
            length = _declared_length(schema)
            if given is not None and str(given) != str(n):
                problems.append(Problem(name, f"column {name} arrives cut to {given} characters, not {n}"))
            elif given is None and length is not None and length > n:
                problems.append(Problem(name, f"column {name} arrives without Debezium's truncateLength {n}"))
        elif params.get(MASKED) != "true":
            problems.append(Problem(name, f"column {name} arrives without Debezium's masked parameter"))
    return problems


def unverified(fields: dict[str, dict[str, Any]], rules: dict[str, Rule]) -> dict[str, Rule]:
    """The rules of ``rules`` an image schema cannot confirm: ``truncate N`` of a text column without
    Debezium's ``truncateLength`` nor a declared length (Debezium had nothing to cut, or does not
    truncate it): its values are judged (:func:`unmasked_values`)."""
    by_lower = {name.lower(): schema for name, schema in fields.items()}
    out = {}
    for column, (kind, n) in rules.items():
        schema = by_lower.get(column.lower())
        if kind != "truncate" or schema is None or not _text(schema):
            continue
        if TRUNCATE_LENGTH not in _params(schema) and _declared_length(schema) is None:
            out[column] = (kind, n)
    return out


def unmasked_values(image: dict[str, Any], rules: dict[str, Rule], schemaless: bool = False) -> list[Problem]:
    """:func:`unmasked` judged by values: those of ``truncate`` columns the schema cannot confirm
    (:func:`unverified`: at most N characters, Java's UTF-16 code units), and, for a record without a
    schema (``schemaless``: JsonConverter's ``schemas.enable=false``), every rule: ``stars N`` is N
    asterisks; a ``hash`` cannot be told from a plain number or hex word without the schema's mark, so a
    hashed column's records need their schema."""
    by_lower = {name.lower(): (name, value) for name, value in image.items()}
    problems = []
    for column, (kind, n) in rules.items():
        name, value = by_lower.get(column.lower(), (column, None))
        if kind == "hash" and schemaless:
            problems.append(
                Problem(name, f"column {name} is hashed, which only a record's schema shows (schemas.enable)", True)
            )
        elif value is None:
            continue
        elif not isinstance(value, str):
            problems.append(
                Problem(name, f"column {name} holds {type(value).__name__} values: Debezium masks text only", True)
            )
        elif kind == "stars" and value != "*" * n:
            problems.append(Problem(name, f"column {name} holds a value that is not {n} asterisks"))
        elif kind == "truncate" and len(value.encode("utf-16-le")) > 2 * n:
            problems.append(Problem(name, f"column {name} holds a value longer than {n} characters"))
    return problems


NOT_LANDED = ": the change is not landed (this dead letter keeps it masked by cdc-delta). "
"""Where a dead letter's reason (:func:`unmasked_reason`) passes from what arrived to what to do."""
OUT_OF_MASK = "out of mask:"


def unmasked_reason(table: str, problems: list[Problem]) -> str:
    """The reason of a dead letter whose masked columns arrived unmasked: what arrived, then the fix."""
    texts = "; ".join(p.text for p in problems)
    config = [p.column for p in problems if p.config]
    if config:
        fix = (
            f"Take {', '.join(config)} {OUT_OF_MASK} in the config (mask it upstream), then "
            f"`cdc-delta replay-dead-letters --table {table}` lands it as kept here"
        )
    else:
        fix = (
            "Have the connector mask it (`cdc-delta connectors apply --config <config>`), then "
            f"`cdc-delta resnapshot --table {table}` brings the table's rows masked"
        )
    return f"table {table}: {texts}{NOT_LANDED}{fix}"


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
    record had no schema) with every masked column of its row images masked (:func:`masked_value`), each
    marked ``masked: "cdc-delta"`` in the schema; a column so marked already (a dead letter replayed) is
    kept as it is."""
    fields = image_fields or {}
    by_lower = {column.lower(): rule for column, rule in rules.items()}
    done = {name for name, f in fields.items() if _params(f).get(MASKED) == CDC_DELTA}
    payload = dict(message)
    for image_name in ("before", "after"):
        image = payload.get(image_name)
        if isinstance(image, dict):
            payload[image_name] = {
                name: value
                if name in done or name.lower() not in by_lower
                else masked_value(value, by_lower[name.lower()], salt, _declared_length(fields.get(name, {})))
                for name, value in image.items()
            }
    if schema is None:
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    marked = copy.deepcopy(schema)
    for envelope_field in marked.get("fields") or [] if isinstance(marked, dict) else []:
        if isinstance(envelope_field, dict) and envelope_field.get("field") in ("before", "after"):
            for f in envelope_field.get("fields") or []:
                if isinstance(f, dict) and str(f.get("field", "")).lower() in by_lower:
                    f["parameters"] = {**_params(f), MASKED: CDC_DELTA}
    return json.dumps({"schema": marked, "payload": payload}, ensure_ascii=False, separators=(",", ":"))
