"""Canonical JSON values (see :mod:`cdc_delta.events.logical_types`) as typed Spark values: how a column's
canonical form is read with from_json, and turned into the column's type."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_delta.events import column_types

# Column types whose canonical JSON form is not what from_json would read directly.
_JSON_FORM = {"date": "string", "timestamp": "bigint", "binary": "string"}


def json_type(type_name: str) -> str:
    """The type from_json reads a column of ``type_name`` with, from its canonical JSON form."""
    if column_types.parse_decimal(type_name) is not None:
        return "string"  # exact decimal text; from_json would go through a double
    return _JSON_FORM.get(type_name, type_name)


def typed(value: Column, type_name: str) -> Column:
    """``value``, read as :func:`json_type`, as a column of ``type_name``."""
    if type_name == "date":
        return F.to_date(value)
    if type_name == "timestamp":
        return F.timestamp_micros(value)
    if type_name == "binary":
        return F.unbase64(value)
    return value.cast(type_name)


def typed_literal(value: object, type_name: str) -> Column:
    """A canonical JSON value (see :mod:`cdc_delta.events.logical_types`) as a typed literal."""
    if type_name == "array<string>":
        return F.array(*[F.lit(v) for v in value]).cast(type_name)  # type: ignore[attr-defined]
    return typed(F.lit(value), type_name)
