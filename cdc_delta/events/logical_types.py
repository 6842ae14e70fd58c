"""Kafka Connect / Debezium field types -> column types, and values -> their canonical JSON form.

The canonical form per column type (see :mod:`cdc_delta.events.column_types`):
boolean/integers/floats/string as JSON scalars; ``decimal(p,s)`` as exact decimal text; ``date`` as
``YYYY-MM-DD``; ``timestamp`` as integer microseconds since the epoch (UTC); ``binary`` as base64;
``array<string>`` as a JSON list. Times of day (Connect has no such Spark type) become ``string``
``[-]HH:MM:SS.ffffff``. Every function raises ValueError with a reason when a value does not fit.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import re
from collections.abc import Callable
from typing import Any

from cdc_delta.events import column_types

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
EPOCH_DATE = dt.date(1970, 1, 1)
_DECIMAL_TEXT = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_ISO_INSTANT = re.compile(r"(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|z|[+-]\d{2}(?::?\d{2})?)?")
_INT_RANGE = {"tinyint": 2**7, "smallint": 2**15, "int": 2**31, "bigint": 2**63}

# Connect primitive type -> column type, when the field has no logical name we know. Kafka's
# JsonConverter names FLOAT32/FLOAT64 "float"/"double" in the schemas it writes; Connect's own names
# (float32/float64) appear in other serialisations.
_CONNECT_PRIMITIVES = {
    "int8": "tinyint",
    "int16": "smallint",
    "int32": "int",
    "int64": "bigint",
    "float": "float",
    "double": "double",
    "float32": "float",
    "float64": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "binary",
}


def _time_of_day(micros: int) -> str:
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    seconds, frac = divmod(micros, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{sign}{hours:02d}:{minutes:02d}:{secs:02d}.{frac:06d}"


def _need_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, got {value!r}")
    return value


def _exact_decimal(unscaled_base64: str, scale: int) -> str:
    """The plain decimal text of a big-endian two's-complement unscaled value and its scale.

    Built from text, not arithmetic: Python's decimal context rounds results to 28 digits, which
    would change any value of more (MySQL allows 65)."""
    unscaled = int.from_bytes(base64.b64decode(unscaled_base64, validate=True), "big", signed=True)
    return format(decimal.Decimal(f"{unscaled}E{-scale}"), "f")


def _connect_decimal(value: Any, field: dict[str, Any]) -> str:
    params = field.get("parameters") or {}
    if not isinstance(value, str):
        raise ValueError(f"expected base64 bytes of a Connect Decimal, got {value!r}")
    return _exact_decimal(value, int(params.get("scale", 0)))


def _variable_scale_decimal(value: Any, field: dict[str, Any]) -> str:
    if not isinstance(value, dict) or "scale" not in value or "value" not in value:
        raise ValueError(f"expected a VariableScaleDecimal struct {{scale, value}}, got {value!r}")
    return _exact_decimal(value["value"], int(value["scale"]))


def _zoned_timestamp(value: Any, field: dict[str, Any]) -> int:
    """ISO-8601 text -> microseconds since the epoch. Debezium's ZonedTimestamp writes as many fraction
    digits as the value needs (``...:07Z``, ``...:07.1234Z``, up to 9); digits past the microsecond
    are dropped (a Spark timestamp holds microseconds)."""
    if not isinstance(value, str):
        raise ValueError(f"expected an ISO-8601 timestamp string, got {value!r}")
    m = _ISO_INSTANT.fullmatch(value.strip())
    if m is None:
        raise ValueError(f"{value!r} is not an ISO-8601 timestamp (YYYY-MM-DDTHH:MM:SS[.f][Z|+HH:MM])")
    date, time, fraction, zone = m.groups()
    parsed = dt.datetime.fromisoformat(f"{date}T{time}")
    offset = dt.timedelta()
    if zone and zone not in ("Z", "z"):
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        offset = sign * dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
    delta = parsed.replace(tzinfo=dt.timezone.utc) - offset - EPOCH
    micros = int((fraction or "0").ljust(6, "0")[:6])
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + micros


def _enum_set(value: Any, field: dict[str, Any]) -> list[str]:
    if not isinstance(value, str):
        raise ValueError(f"expected a comma-separated EnumSet string, got {value!r}")
    return [item for item in value.split(",") if item]


def _as_json_text(value: Any, field: dict[str, Any]) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _scaled(factor: int) -> Callable[[Any, dict[str, Any]], int]:
    return lambda value, field: _need_int(value) * factor


def _divided(divisor: int) -> Callable[[Any, dict[str, Any]], int]:
    return lambda value, field: _need_int(value) // divisor


def _time_from(factor: int, divisor: int = 1) -> Callable[[Any, dict[str, Any]], str]:
    return lambda value, field: _time_of_day(_need_int(value) * factor // divisor)


def _bits(value: Any, field: dict[str, Any]) -> str:
    """BIT(n) as MySQL holds it: big-endian bytes, ceil(n/8) of them. Debezium's Bits carry the bytes
    least significant first (java.util.BitSet's order), so they are reversed here."""
    if not isinstance(value, str):
        raise ValueError(f"expected base64 bytes of io.debezium.data.Bits, got {value!r}")
    raw = base64.b64decode(value, validate=True)[::-1]
    length = int((field.get("parameters") or {}).get("length", len(raw) * 8))
    width = max(1, -(-length // 8))
    return base64.b64encode(raw.rjust(width, b"\0")[-width:]).decode()


def _date_from_days(value: Any, field: dict[str, Any]) -> str:
    return (EPOCH_DATE + dt.timedelta(days=_need_int(value))).isoformat()


# Logical name -> (column type or None for "decimal from the parameters", decoder of the JSON value).
_LOGICAL: dict[str, tuple[str | None, Callable[[Any, dict[str, Any]], Any]]] = {
    "org.apache.kafka.connect.data.Decimal": (None, _connect_decimal),
    "io.debezium.data.VariableScaleDecimal": ("string", _variable_scale_decimal),
    "org.apache.kafka.connect.data.Date": ("date", _date_from_days),
    "io.debezium.time.Date": ("date", _date_from_days),
    "org.apache.kafka.connect.data.Time": ("string", _time_from(1000)),
    "io.debezium.time.Time": ("string", _time_from(1000)),
    "io.debezium.time.MicroTime": ("string", _time_from(1)),
    "io.debezium.time.NanoTime": ("string", _time_from(1, 1000)),
    "org.apache.kafka.connect.data.Timestamp": ("timestamp", _scaled(1000)),
    "io.debezium.time.Timestamp": ("timestamp", _scaled(1000)),
    "io.debezium.time.MicroTimestamp": ("timestamp", _scaled(1)),
    "io.debezium.time.NanoTimestamp": ("timestamp", _divided(1000)),
    "io.debezium.time.ZonedTimestamp": ("timestamp", _zoned_timestamp),
    "io.debezium.time.Year": ("int", lambda value, field: _need_int(value)),
    "io.debezium.time.MicroDuration": ("bigint", lambda value, field: _need_int(value)),
    "io.debezium.data.Json": ("string", _as_json_text),
    "io.debezium.data.Enum": ("string", lambda value, field: str(value)),
    "io.debezium.data.EnumSet": ("array<string>", _enum_set),
    "io.debezium.data.Bits": ("binary", _bits),
}


def connect_column_type(field: dict[str, Any]) -> str:
    """The column type for one field of a Connect struct schema."""
    name = field.get("name")
    if name in _LOGICAL:
        type_name = _LOGICAL[name][0]
        if type_name is not None:
            return type_name
        params = field.get("parameters") or {}
        scale = int(params.get("scale", 0))
        precision = max(int(params.get("connect.decimal.precision", column_types.MAX_DECIMAL_PRECISION)), scale, 1)
        if precision > column_types.MAX_DECIMAL_PRECISION:
            return "string"  # exact decimal text: Spark and Delta decimals hold 38 digits, MySQL's 65
        return f"decimal({precision},{scale})"
    return _CONNECT_PRIMITIVES.get(field.get("type", ""), "string")


def decode_connect_value(field: dict[str, Any], value: Any, type_name: str | None = None) -> Any:
    """The canonical JSON value for ``value`` of a field described by a Connect schema (``type_name``:
    its :func:`connect_column_type`, when the caller has it)."""
    if value is None:
        return None
    name = field.get("name")
    type_name = type_name or connect_column_type(field)
    if name in _LOGICAL:
        value = _LOGICAL[name][1](value, field)
    elif type_name == "string" and not isinstance(value, str):
        return _as_json_text(value, field)  # structs, arrays and maps without a logical type
    return to_canonical(type_name, value)


def infer_column_type(value: Any) -> str | None:
    """A column type for a value that comes with no schema and no configured type (None for null)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "bigint"
    if isinstance(value, float):
        return "double"
    return "string"


def to_canonical(type_name: str, value: Any) -> Any:
    """Check and convert a JSON value to the canonical form of ``type_name`` (see the module doc).

    Accepts the shapes schemaless Debezium JSON uses: numbers or decimal text for decimals, days
    since the epoch or ``YYYY-MM-DD`` for dates, epoch milliseconds or ISO-8601 text for timestamps.
    """
    if value is None:
        return None
    if type_name == "boolean":
        if not isinstance(value, bool):
            raise ValueError(f"expected true/false, got {value!r}")
        return value
    if type_name in _INT_RANGE:
        number = _need_int(value)
        bound = _INT_RANGE[type_name]
        if not -bound <= number < bound:
            raise ValueError(f"{number} is out of range for {type_name}")
        return number
    if type_name in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"expected a number, got {value!r}")
        return float(value)
    if type_name == "string":
        text = value if isinstance(value, str) else _as_json_text(value, {})
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{text!r} is not valid Unicode (a lone UTF-16 surrogate)") from None
        return text
    if type_name == "binary":
        if not isinstance(value, str):
            raise ValueError(f"expected base64 text, got {value!r}")
        try:
            base64.b64decode(value, validate=True)
        except ValueError:
            raise ValueError(f"{value!r} is not valid base64") from None
        return value
    if type_name == "date":
        if isinstance(value, int) and not isinstance(value, bool):
            return _date_from_days(value, {})
        return dt.date.fromisoformat(str(value)).isoformat()
    if type_name == "timestamp":
        if isinstance(value, int) and not isinstance(value, bool):
            # canonical microseconds (schema-typed fields are scaled before this), as Spark holds them
            if not -_INT_RANGE["bigint"] <= value < _INT_RANGE["bigint"]:
                raise ValueError(f"{value} microseconds since the epoch is out of range for a timestamp")
            return value
        return _zoned_timestamp(value, {})
    if type_name == "array<string>":
        if isinstance(value, str):
            return _enum_set(value, {})
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"expected a list of strings, got {value!r}")
        return value
    dec = column_types.parse_decimal(type_name)
    if dec is not None:
        return _decimal_text(value, dec)
    raise ValueError(f"unsupported column type {type_name!r}")


def _decimal_text(value: Any, dec: column_types.Decimal) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected a decimal number, got {value!r}")
    text = str(value).strip()
    if not _DECIMAL_TEXT.fullmatch(text):
        raise ValueError(f"{value!r} is not a decimal number")
    number = decimal.Decimal(text)
    quantized = number.quantize(decimal.Decimal(1).scaleb(-dec.scale), context=decimal.Context(prec=80))
    if quantized != number:
        raise ValueError(f"{text} has more than {dec.scale} decimal places for decimal({dec.precision},{dec.scale})")
    if len(quantized.as_tuple().digits) > dec.precision:
        raise ValueError(f"{text} has too many digits for decimal({dec.precision},{dec.scale})")
    return format(quantized, "f")
