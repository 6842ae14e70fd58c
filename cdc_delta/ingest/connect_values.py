"""Connect field values -> their canonical form, as Spark expressions (the JVM twin of
:mod:`cdc_delta.events.logical_types`, which stays the reference).

:func:`conversion` gives, for one field of a Connect struct schema, the Spark type to read the field's
JSON value with and a function that builds, from the value's column, the expression of the canonical
form :func:`cdc_delta.events.logical_types.decode_connect_value` gives. Where a value does not convert,
the expression is NULL while the raw value is not: the record then goes to the reference decoder,
which says why. Fields no expression covers exactly (variable-scale and >38-digit decimals, structs,
arrays, maps, unknown logical types) leave their whole schema to the reference decoder. Expressions
are built from Column objects, never from SQL text: a column's name, whatever it holds, never meets a
parser; only constants of this module (patterns, formats) are literals.

One difference is left: ``from_json`` reads a JSON number into a string field as its text, so a
number where the schema says base64 bytes, an ISO timestamp or a SET (which Debezium never writes)
is read as that text, where the reference dead-letters it.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_delta.events import column_types, logical_types

Build = Callable[[Column, Column], Column]
"""(the field's value as read, the image's JSON text) -> the canonical value."""

_INT_RANGE = {"tinyint": 2**7, "smallint": 2**15, "int": 2**31}
_BASE64 = r"^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
_ISO_INSTANT = r"^\s*(\d{4}-\d{2}-\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|z|[+-]\d{2}(?::?\d{2})?)?\s*$"
_TWO_64 = decimal.Decimal(2**64)


@dataclass(frozen=True)
class Conversion:
    """How one field is read (``json_type``, for from_json) and made canonical (``build``)."""

    json_type: str
    build: Build

    def apply(self, value: Column, text: Column) -> Column:
        """The canonical form of ``value``, a field of the image whose JSON text is ``text``; NULL where
        the value is NULL."""
        return F.when(value.isNotNull(), self.build(value, text))


def let(value: Column, body: Callable[[Column], Column]) -> Column:
    """``body`` over ``value``, computed once (Spark has no LET: a one-element array's transform binds
    it; Spark names the lambda's variable, so bindings never clash)."""
    return F.element_at(F.transform(F.array(value), body), 1)


def _same(v: Column, text: Column) -> Column:
    return v


def _int(type_name: str) -> Conversion:
    bound = _INT_RANGE[type_name]
    return Conversion("bigint", lambda v, text: F.when((v >= -bound) & (v < bound), v))


def _text(body: Callable[[Column], Column]) -> Conversion:
    """``body`` over a string field, unless the field held an object or an array: from_json reads those
    into a string as their raw text, and the reference writes them as sorted JSON, or refuses them. A
    string that looks like one (a JSON column's ``{"a": 1}``) is taken as a string where the image's
    text holds it quoted."""

    def build(v: Column, text: Column) -> Column:
        as_json = F.to_json(F.array(v))
        quoted = as_json.substr(F.lit(2), F.length(as_json) - 2)
        looks_like_json = v.startswith("{") | v.startswith("[")
        return F.when(~looks_like_json | (F.instr(text, quoted) > 0), body(v))

    return Conversion("string", build)


def _base64_text(v: Column) -> Column:
    return F.when(v.rlike(_BASE64), v)


def _hex(v: Column) -> Column:
    return F.hex(F.try_to_binary(_base64_text(v), F.lit("base64")))


def _decimal(scale: int, precision: int) -> Conversion:
    """Base64 two's-complement bytes (1 to 16 of them) -> exact decimal text. The bytes are
    sign-extended to 16, a negative number's complemented (its magnitude less one), read as two
    unsigned 64-bit halves (``conv`` reads hex as unsigned) into a decimal(38,0), so that no step
    exceeds the magnitude; then scaled by casting ``<digits>e-<scale>``, exactly."""

    def from_hex(h: Column) -> Column:
        negative = h.substr(1, 1) >= F.lit("8")
        wide = F.when(negative, F.lpad(h, 32, "F")).otherwise(F.lpad(h, 32, "0"))
        bits = F.when(negative, F.translate(wide, "0123456789ABCDEF", "FEDCBA9876543210")).otherwise(wide)
        return F.when(F.length(h).between(2, 32), let(bits, lambda m: _scaled(m, negative)))

    def _scaled(m: Column, negative: Column) -> Column:
        def half(start: int) -> Column:
            return F.conv(m.substr(start, 16), 16, 10).cast("decimal(20,0)")

        unsigned = F.try_add(F.try_multiply(half(1), F.lit(_TWO_64)), half(17))
        magnitude = F.when(negative, F.try_add(unsigned, F.lit(1))).otherwise(unsigned).cast("string")
        digits = F.concat(F.when(negative, F.lit("-")).otherwise(F.lit("")), magnitude)
        exact = F.concat(digits, F.lit(f"e-{scale}")).try_cast(f"decimal({precision},{scale})")
        return exact.cast("string")

    return Conversion("string", lambda v, text: let(_hex(v), from_hex))


def _div(value: Column, divisor: int) -> Column:
    """Spark's integral division (``div``) of a bigint by a constant."""
    return F.call_function("div", value, F.lit(divisor))


def _floor_div(value: Column, divisor: int) -> Column:
    """Python's ``value // divisor`` for a bigint (Spark's div truncates toward zero)."""
    return _div(value - F.pmod(value, F.lit(divisor)), divisor)


def _time(factor: int, divisor: int = 1) -> Conversion:
    def text_of(t_us: Column) -> Column:
        seconds = _div(F.abs(t_us), 1_000_000)
        return F.format_string(
            "%s%02d:%02d:%02d.%06d",
            F.when(t_us < 0, F.lit("-")).otherwise(F.lit("")),
            _div(seconds, 3600),
            _div(seconds % 3600, 60),
            seconds % 60,
            F.abs(t_us) % 1_000_000,
        )

    def build(v: Column, text: Column) -> Column:
        scaled = F.try_multiply(v, F.lit(factor))
        micros = scaled if divisor == 1 else _floor_div(scaled, divisor)
        return let(micros, text_of)

    return Conversion("bigint", build)


def _date(v: Column, text: Column) -> Column:
    # 0001-01-01 .. 9999-12-31: the dates Python (the reference) can hold.
    day = F.date_add(F.lit(dt.date(1970, 1, 1)), v.cast("int"))
    return F.when(v.between(-719162, 2932896), day.cast("string"))


def _zoned(v: Column, text: Column) -> Column:
    """ISO-8601 text -> micros since the epoch, as the reference parses it: the fraction past the
    microsecond dropped, Z or a +HH[:MM] offset, hours, minutes and seconds in range."""

    def micros(parts: Column) -> Column:
        date, fraction, zone = parts[0], parts[4], parts[5]
        hh, mm, ss = (parts[i].try_cast("int") for i in (1, 2, 3))
        digits = F.replace(zone, F.lit(":"), F.lit(""))
        sign = F.when(zone.startswith("-"), F.lit(-1)).otherwise(F.lit(1))
        minutes = digits.substr(2, 2).try_cast("int") * 60 + F.coalesce(digits.substr(4, 2).try_cast("int"), F.lit(0))
        offset = F.when(zone.isin("", "Z", "z"), F.lit(0)).otherwise(sign * minutes)
        # a timestamp at midnight (the session is UTC) read back as its date: Spark has no try_to_date
        midnight = F.try_to_timestamp(date, F.lit("yyyy-MM-dd")).cast("date")
        days = F.when(date >= F.lit("0001"), F.unix_date(midnight))
        seconds = days.cast("bigint") * 86400 + hh * 3600 + mm * 60 + ss - offset.cast("bigint") * 60
        total = seconds * 1_000_000 + F.coalesce(F.rpad(fraction, 6, "0").try_cast("bigint"), F.lit(0))
        valid = (hh <= 23) & (mm <= 59) & (ss <= 59) & days.isNotNull()
        return F.when(valid, total)

    groups = F.array(*[F.regexp_extract(v, _ISO_INSTANT, i) for i in range(1, 7)])
    return F.when(v.rlike(_ISO_INSTANT), let(groups, micros))


def _bits(length: int) -> Conversion:
    """Least significant byte first -> MySQL's big-endian bytes, the rightmost ceil(n/8) of them."""
    chars = max(1, -(-length // 8)) * 2

    def padded(h: Column) -> Column:
        return F.when(F.length(h) >= chars, h).otherwise(F.lpad(h, chars, "0"))

    def build(v: Column, text: Column) -> Column:
        reversed_hex = F.array_join(F.reverse(F.regexp_extract_all(_hex(v), F.lit("(..)"), 1)), "")
        return F.base64(F.unhex(let(reversed_hex, padded).substr(-chars, chars)))

    return Conversion("string", build)


_DATE = Conversion("bigint", _date)
_TO_MICROS = Conversion("bigint", lambda v, text: F.try_multiply(v, F.lit(1000)))
_BIGINT = Conversion("bigint", _same)
_STRING = _text(lambda v: v)
_LOGICAL: dict[str, Conversion] = {
    "org.apache.kafka.connect.data.Date": _DATE,
    "io.debezium.time.Date": _DATE,
    "org.apache.kafka.connect.data.Time": _time(1000),
    "io.debezium.time.Time": _time(1000),
    "io.debezium.time.MicroTime": _time(1),
    "io.debezium.time.NanoTime": _time(1, 1000),
    "org.apache.kafka.connect.data.Timestamp": _TO_MICROS,
    "io.debezium.time.Timestamp": _TO_MICROS,
    "io.debezium.time.MicroTimestamp": _BIGINT,
    "io.debezium.time.NanoTimestamp": Conversion("bigint", lambda v, text: _floor_div(v, 1000)),
    "io.debezium.time.ZonedTimestamp": Conversion("string", _zoned),
    "io.debezium.time.Year": _int("int"),
    "io.debezium.time.MicroDuration": _BIGINT,
    "io.debezium.data.Json": _STRING,
    "io.debezium.data.Enum": _STRING,
    "io.debezium.data.EnumSet": _text(lambda v: F.filter(F.split(v, ",", -1), lambda s: s != "")),
}


def conversion(field: dict[str, Any]) -> Conversion | None:
    """How to read and convert one Connect field in the JVM; None where only the reference can."""
    name = field.get("name")
    type_name = logical_types.connect_column_type(field)
    if name in _LOGICAL:
        return _LOGICAL[name]
    if name == "io.debezium.data.Bits":
        length = str((field.get("parameters") or {}).get("length"))
        return _bits(int(length)) if length.isdigit() else None
    if name == "org.apache.kafka.connect.data.Decimal":
        dec = column_types.parse_decimal(type_name)
        return None if dec is None else _decimal(dec.scale, dec.precision)  # None: >38 digits, exact text
    if name is not None and name.startswith(("io.debezium.", "org.apache.kafka.connect.")):
        return None  # a logical type the reference handles its own way (VariableScaleDecimal, ...)
    if field.get("type") in ("struct", "array", "map"):
        return None
    if type_name in _INT_RANGE:
        return _int(type_name)
    if type_name == "bigint":
        return _BIGINT  # from_json refuses what does not fit a bigint
    if type_name in ("float", "double"):
        return Conversion("double", _same)
    if type_name == "boolean":
        return Conversion("boolean", _same)
    if type_name == "binary":
        return Conversion("string", lambda v, text: _base64_text(v))
    return _STRING
