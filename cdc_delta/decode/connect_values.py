"""Connect field values -> their canonical form, as Spark SQL expressions (the JVM twin of
:mod:`cdc_delta.events.logical_types`, which stays the reference).

:func:`conversion` gives, for one field of a Connect struct schema, the Spark type to read the field's
JSON value with and a function that composes, over the SQL expression of that value, the expression of
the canonical form :func:`cdc_delta.events.logical_types.decode_connect_value` gives. Where a value does
not convert, the expression is NULL while the raw value is not: the record then goes to the reference
decoder, which says why. Fields no expression covers exactly (variable-scale and >38-digit decimals,
structs, arrays, maps, unknown logical types) leave their whole schema to the reference decoder.

No column name ever enters this SQL: the operands are names the decoder generates (a field's position,
``_img3.c17``) and the text holds only those, this module's constants and integers from the schema
(scale, precision, bit length). Names travel as data (:mod:`.jvm` reads the image with a schema
object and names the output with aliases). The expressions are SQL text rather than Column objects
because building them through py4j costs some 245 JVM calls a column: 11 s for one 300-column schema,
where the JVM parses the same SQL in a fraction of a second.

One difference is left: ``from_json`` reads a JSON number into a string field as its text, so a
number where the schema says base64 bytes, an ISO timestamp or a SET (which Debezium never writes)
is read as that text, where the reference dead-letters it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cdc_delta.events import column_types, logical_types

Sql = Callable[[str, str], str]
"""(the SQL of the field's value as read, the SQL of the image's JSON text) -> the canonical value's SQL."""

_INT_RANGE = {"tinyint": 2**7, "smallint": 2**15, "int": 2**31}
_BASE64 = r"'^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?\\z'"
"""Strict base64, as the reference's ``validate=True`` reads it: to the very end of the text (``$`` would
also match before a final newline, which the reference refuses)."""
_ISO_INSTANT = (
    r"'^\\s*(\\d{4}-\\d{2}-\\d{2})[T ](\\d{2}):(\\d{2}):(\\d{2})(?:\\.(\\d{1,9}))?(Z|z|[+-]\\d{2}(?::?\\d{2})?)?\\s*$'"
)
_TWO_64 = 2**64
_FIRST_SECOND, _LAST_SECOND = -62135596800, 253402300799
"""0001-01-01T00:00:00 and 9999-12-31T23:59:59 UTC in seconds since the epoch: the instants Python holds."""


@dataclass(frozen=True)
class Conversion:
    """How one field is read (``json_type``, for from_json) and made canonical (``sql``)."""

    json_type: str
    sql: Sql

    def apply(self, value: str, text: str) -> str:
        """The expression over ``value``, a field of the image whose JSON text is ``text`` (both
        generated operands, never a name); NULL where the value is NULL."""
        return f"IF({value} IS NULL, NULL, {self.sql(value, text)})"


def let(value: str, name: str, body: str) -> str:
    """``body`` with ``name`` bound to ``value``, computed once (Spark SQL has no LET: a one-element
    array's transform binds it). Names must differ from those of the lambdas around it."""
    return f"element_at(transform(array({value}), {name} -> {body}), 1)"


def _same(v: str, text: str) -> str:
    return v


def _int(type_name: str) -> Conversion:
    bound = _INT_RANGE[type_name]
    return Conversion("bigint", lambda v, text: f"CASE WHEN {v} >= {-bound} AND {v} < {bound} THEN {v} END")


def _text(body: Callable[[str], str]) -> Conversion:
    """``body`` over a string field, unless the field held an object or an array: from_json reads those
    into a string as their raw text, and the reference writes them as sorted JSON, or refuses them. A
    string that looks like one (a JSON column's ``{"a": 1}``) is taken as a string where the image's
    text holds it quoted."""

    def sql(v: str, text: str) -> str:
        quoted = f"substring(to_json(array({v})), 2, length(to_json(array({v}))) - 2)"
        looks_like_json = f"(startswith({v}, '{{') OR startswith({v}, '['))"
        return f"CASE WHEN NOT {looks_like_json} OR instr({text}, {quoted}) > 0 THEN {body(v)} END"

    return Conversion("string", sql)


def _base64_text(v: str) -> str:
    return f"CASE WHEN {v} RLIKE {_BASE64} THEN {v} END"


def _hex(v: str) -> str:
    return f"hex(try_to_binary({_base64_text(v)}, 'base64'))"


def _decimal(scale: int, precision: int) -> Conversion:
    """Base64 two's-complement bytes (1 to 16 of them) -> exact decimal text. The bytes are
    sign-extended to 16, a negative number's complemented (its magnitude less one), read as two
    unsigned 64-bit halves (``conv`` reads hex as unsigned) into a decimal(38,0), so that no step
    exceeds the magnitude; then scaled by casting ``<digits>e-<scale>``, exactly."""
    negative = "(substring(dec_h, 1, 1) >= '8')"
    wide = f"lpad(dec_h, 32, IF({negative}, 'F', '0'))"
    bits = f"IF({negative}, translate({wide}, '0123456789ABCDEF', 'FEDCBA9876543210'), {wide})"

    def half(start: int) -> str:
        return f"CAST(conv(substring(dec_m, {start}, 16), 16, 10) AS decimal(20,0))"

    unsigned = f"try_add(try_multiply({half(1)}, {_TWO_64}), {half(17)})"
    digits = f"concat(IF({negative}, '-', ''), CAST(IF({negative}, try_add({unsigned}, 1), {unsigned}) AS string))"
    scaled = f"CAST(try_cast(concat({digits}, 'e-{scale}') AS decimal({precision},{scale})) AS string)"
    body = f"CASE WHEN length(dec_h) BETWEEN 2 AND 32 THEN {let(bits, 'dec_m', scaled)} END"
    return Conversion("string", lambda v, text: let(_hex(v), "dec_h", body))


def _left_pad(text: str, width: int) -> str:
    """``text`` left-padded with '0' to ``width`` (Spark's lpad cuts a longer text; this does not)."""
    return f"IF(length({text}) >= {width}, {text}, lpad({text}, {width}, '0'))"


def _floor_div(value: str, divisor: int) -> str:
    """Python's ``value // divisor`` for a bigint (Spark's div truncates toward zero); no step overflows
    (subtracting the remainder first did, for the smallest bigint: an ANSI error that failed the merge)."""
    return f"((({value}) div {divisor}) - IF(({value}) % {divisor} < 0, 1, 0))"


def _time(factor: int, divisor: int = 1) -> Conversion:
    seconds = "(abs(t_us) div 1000000)"
    text_of = (
        f"format_string('%s%02d:%02d:%02d.%06d', IF(t_us < 0, '-', ''), {seconds} div 3600, "
        f"({seconds} % 3600) div 60, {seconds} % 60, abs(t_us) % 1000000)"
    )

    def sql(v: str, text: str) -> str:
        scaled = f"try_multiply({v}, {factor})"
        # abs() of the smallest bigint is an ANSI error (it failed the merge): the reference formats it
        body = f"IF(t_us >= {-(2**63) + 1}, {text_of}, NULL)"
        return let(scaled if divisor == 1 else _floor_div(scaled, divisor), "t_us", body)

    return Conversion("bigint", sql)


def _date(v: str, text: str) -> str:
    # 0001-01-01 .. 9999-12-31: the dates Python (the reference) can hold.
    day = f"CAST(date_add(DATE'1970-01-01', CAST({v} AS int)) AS string)"
    return f"CASE WHEN {v} BETWEEN -719162 AND 2932896 THEN {day} END"


def _zoned(v: str, text: str) -> str:
    """ISO-8601 text -> micros since the epoch, as the reference parses it: the fraction past the
    microsecond dropped, Z or a +HH[:MM] offset, hours, minutes and seconds in range."""
    groups = "array(" + ", ".join(f"regexp_extract({v}, {_ISO_INSTANT}, {i})" for i in range(1, 7)) + ")"
    date, fraction, zone = "zp[0]", "zp[4]", "zp[5]"
    hh, mm, ss = (f"try_cast(zp[{i}] AS int)" for i in (1, 2, 3))
    digits = f"replace({zone}, ':', '')"
    offset = (
        f"CASE WHEN {zone} IN ('', 'Z', 'z') THEN 0 ELSE IF(startswith({zone}, '-'), -1, 1) * "
        f"(try_cast(substring({digits}, 2, 2) AS int) * 60 "
        f"+ coalesce(try_cast(substring({digits}, 4, 2) AS int), 0)) END"
    )
    # a timestamp at midnight (the session is UTC) read back as its date: Spark has no try_to_date
    days = f"IF({date} >= '0001', unix_date(CAST(try_to_timestamp({date}, 'yyyy-MM-dd') AS date)), NULL)"
    seconds = f"(CAST({days} AS bigint) * 86400 + {hh} * 3600 + {mm} * 60 + {ss} - CAST({offset} AS bigint) * 60)"
    micros = f"{seconds} * 1000000 + coalesce(try_cast(rpad({fraction}, 6, '0') AS bigint), 0)"
    # The instant in UTC within 0001-01-01 .. 9999-12-31 (the reference's datetime overflows past them)
    valid = (
        f"{hh} <= 23 AND {mm} <= 59 AND {ss} <= 59 AND {days} IS NOT NULL "
        f"AND {seconds} BETWEEN {_FIRST_SECOND} AND {_LAST_SECOND}"
    )
    return f"CASE WHEN {v} RLIKE {_ISO_INSTANT} THEN {let(groups, 'zp', f'CASE WHEN {valid} THEN {micros} END')} END"


def _bits(length: int) -> Conversion:
    """Least significant byte first -> MySQL's big-endian bytes, the rightmost ceil(n/8) of them."""
    chars = max(1, -(-length // 8)) * 2

    def sql(v: str, text: str) -> str:
        reversed_hex = let(
            f"array_join(reverse(regexp_extract_all({_hex(v)}, '(..)', 1)), '')", "bits_h", _left_pad("bits_h", chars)
        )
        return f"base64(unhex(substring({reversed_hex}, -{chars}, {chars})))"

    return Conversion("string", sql)


_DATE = Conversion("bigint", _date)
_TO_MICROS = Conversion("bigint", lambda v, text: f"try_multiply({v}, 1000)")
_BIGINT = Conversion("bigint", _same)
_DOUBLE = Conversion("double", lambda v, text: f"IF(isnan({v}) OR abs({v}) = double('Infinity'), NULL, {v})")
"""A non-finite double goes to the reference: from_json reads an integer past a double's range as
Infinity, where the reference refuses it."""
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
    "io.debezium.data.EnumSet": _text(lambda v: f"filter(split({v}, ',', -1), s -> s != '')"),
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
        return _DOUBLE
    if type_name == "boolean":
        return Conversion("boolean", _same)
    if type_name == "binary":
        return Conversion("string", lambda v, text: _base64_text(v))
    return _STRING
