"""The primary-key columns of a table, read from Debezium's record key: the Kafka key of each change
event is a struct of the table's primary-key columns (``message.key.columns`` where the connector
sets them), and no key at all for a table without one. A pattern entry without ``key`` takes each
table's key from it (:mod:`cdc_delta.changelog.table_index`)."""

from __future__ import annotations

import json
from typing import Any

NO_KEY: tuple[str, ...] = ()
"""A record without a key (a table without a primary key), or with one that is not a Debezium key."""


def json_key_columns(key: bytes | None) -> tuple[str, ...]:
    """The columns of a JsonConverter key: the ``schema``'s fields with schemas, the object's fields without."""
    if not key:
        return NO_KEY
    try:
        doc = json.loads(key)
    except ValueError:
        return NO_KEY
    if not isinstance(doc, dict):
        return NO_KEY
    if doc.keys() == {"schema", "payload"} and isinstance(doc["schema"], dict):
        return _named(doc["schema"].get("fields"), "field")
    return tuple(doc)


def avro_key_columns(schema_text: str, unescape: Any = None) -> tuple[str, ...]:
    """The columns of an Avro key, from its registry schema (a record); ``unescape`` reads a field name as
    Debezium's ``avro_unicode`` adjustment wrote it."""
    try:
        schema = json.loads(schema_text)
    except ValueError:
        return NO_KEY
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return NO_KEY
    names = _named(schema.get("fields"), "name")
    return tuple(unescape(n) for n in names) if unescape is not None else names


def _named(fields: Any, attribute: str) -> tuple[str, ...]:
    if not isinstance(fields, list):
        return NO_KEY
    names = [f.get(attribute) for f in fields if isinstance(f, dict)]
    if not names or not all(isinstance(n, str) and n for n in names):
        return NO_KEY
    return tuple(str(n) for n in names)
