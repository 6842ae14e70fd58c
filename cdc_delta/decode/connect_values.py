"""Connect field -> how the JVM makes its values canonical (the JVM twin of
:mod:`cdc_delta.events.logical_types`, which stays the reference).

:func:`conversion` gives, for one field of a Connect struct schema, the rule by which cdc-delta's
canonical-image function (:data:`cdc_delta.decode.canonical.CANONICAL_CLASS`, ``jvm/decoder``) reads the
field's JSON value and writes the canonical form
:func:`cdc_delta.events.logical_types.decode_connect_value` gives: a kind and up to two integers from the
schema (a range, a precision and scale, a bit length, a time unit). The function takes a value only
where it makes exactly what the reference makes; any other value sends its record to the reference
decoder, which says why (or reads it). Fields no rule covers exactly (variable-scale and >38-digit
decimals, structs, arrays, maps, unknown logical types) leave their whole schema to the reference decoder.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cdc_delta.events import column_types, logical_types

_INT_RANGE = {"tinyint": 2**7, "smallint": 2**15, "int": 2**31}


@dataclass(frozen=True)
class Conversion:
    """How the JVM reads one field and makes it canonical: ``kind`` and its two integer arguments
    (``CanonicalImage.java`` says what each kind takes and writes)."""

    kind: str
    a: int = 0
    b: int = 0

    def spec(self, name: str) -> list[Any]:
        """The column as the JVM function's plan holds it: [name, kind, a, b]."""
        return [name, self.kind, self.a, self.b]


_TEXT = Conversion("text")
_LONG = Conversion("long")
_LOGICAL: dict[str, Conversion] = {
    "org.apache.kafka.connect.data.Date": Conversion("date"),
    "io.debezium.time.Date": Conversion("date"),
    "org.apache.kafka.connect.data.Time": Conversion("time", 1000, 1),
    "io.debezium.time.Time": Conversion("time", 1000, 1),
    "io.debezium.time.MicroTime": Conversion("time", 1, 1),
    "io.debezium.time.NanoTime": Conversion("time", 1, 1000),
    "org.apache.kafka.connect.data.Timestamp": Conversion("ts", 1000, 1),
    "io.debezium.time.Timestamp": Conversion("ts", 1000, 1),
    "io.debezium.time.MicroTimestamp": _LONG,
    "io.debezium.time.NanoTimestamp": Conversion("ts", 1, 1000),
    "io.debezium.time.ZonedTimestamp": Conversion("zoned"),
    "io.debezium.time.Year": Conversion("int", _INT_RANGE["int"]),
    "io.debezium.time.MicroDuration": _LONG,
    "io.debezium.data.Json": _TEXT,
    "io.debezium.data.Enum": _TEXT,
    "io.debezium.data.EnumSet": Conversion("set"),
}


def conversion(field: dict[str, Any]) -> Conversion | None:
    """How to read and convert one Connect field in the JVM; None where only the reference can."""
    name = field.get("name")
    type_name = logical_types.connect_column_type(field)
    if name in _LOGICAL:
        return _LOGICAL[name]
    if name == "io.debezium.data.Bits":
        length = str((field.get("parameters") or {}).get("length"))
        return Conversion("bits", int(length)) if length.isdigit() else None
    if name == "org.apache.kafka.connect.data.Decimal":
        dec = column_types.parse_decimal(type_name)
        return None if dec is None else Conversion("dec", dec.precision, dec.scale)  # None: >38 digits, exact text
    if name is not None and name.startswith(("io.debezium.", "org.apache.kafka.connect.")):
        return None  # a logical type the reference handles its own way (VariableScaleDecimal, ...)
    if field.get("type") in ("struct", "array", "map"):
        return None
    if type_name in _INT_RANGE:
        return Conversion("int", _INT_RANGE[type_name])
    if type_name == "bigint":
        return _LONG
    if type_name in ("float", "double"):
        return Conversion("double")
    if type_name == "boolean":
        return Conversion("bool")
    if type_name == "binary":
        return Conversion("b64")
    return _TEXT
