"""The column types a replicated table may have, and which type changes a table can follow.

Types are Spark SQL type names (``bigint``, ``decimal(10,2)``, ``array<string>``). Each has a canonical
JSON form that the envelope decoder produces and :mod:`cdc_delta.rows.typed` turns back into the typed
column, so decoding runs in Python on the executors and typing runs in the JVM.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)")

SIMPLE_TYPES = frozenset(
    {
        "boolean",
        "tinyint",
        "smallint",
        "int",
        "bigint",
        "float",
        "double",
        "string",
        "binary",
        "date",
        "timestamp",
        "array<string>",
    }
)
_ALIASES = {"byte": "tinyint", "short": "smallint", "integer": "int", "long": "bigint", "bool": "boolean"}
_INTEGRAL_RANK = {"tinyint": 0, "smallint": 1, "int": 2, "bigint": 3}
# The decimal digits left of the point that each integral type needs to be held losslessly.
_INTEGRAL_DIGITS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 20}
MAX_DECIMAL_PRECISION = 38


@dataclass(frozen=True)
class Decimal:
    """A decimal type's precision and scale."""

    precision: int
    scale: int


def normalize(type_name: str) -> str:
    """Return the canonical spelling of a column type, or raise ValueError naming the accepted ones."""
    text = type_name.strip().lower().replace(" ", "")
    text = _ALIASES.get(text, text)
    if text in SIMPLE_TYPES:
        return text
    dec = parse_decimal(text)
    if dec is not None:
        return f"decimal({dec.precision},{dec.scale})"
    raise ValueError(
        f"unsupported column type {type_name!r}: use one of {', '.join(sorted(SIMPLE_TYPES))} "
        "or decimal(p,s) with 1 <= p <= 38 and 0 <= s <= p"
    )


def parse_decimal(type_name: str) -> Decimal | None:
    """``decimal(p,s)`` -> Decimal(p, s); None for other types; ValueError for an impossible one."""
    m = _DECIMAL.fullmatch(type_name.replace(" ", ""))
    if not m:
        return None
    precision, scale = int(m.group(1)), int(m.group(2))
    if not (1 <= precision <= MAX_DECIMAL_PRECISION and 0 <= scale <= precision):
        raise ValueError(f"decimal({precision},{scale}) is out of range: need 1 <= p <= 38 and 0 <= s <= p")
    return Decimal(precision, scale)


def fits_in(incoming: str, existing: str) -> bool:
    """True when every value of type ``incoming`` can be stored in a column of type ``existing``
    without loss (so events with the narrower type are simply cast up)."""
    if incoming == existing:
        return True
    if incoming in _INTEGRAL_RANK and existing in _INTEGRAL_RANK:
        return _INTEGRAL_RANK[incoming] <= _INTEGRAL_RANK[existing]
    if incoming == "float" and existing == "double":
        return True
    if incoming in ("tinyint", "smallint", "int") and existing == "double":
        return True
    target = parse_decimal(existing)
    if target is None:
        return False
    if incoming in _INTEGRAL_DIGITS:
        return target.precision - target.scale >= _INTEGRAL_DIGITS[incoming]
    source = parse_decimal(incoming)
    if source is None:
        return False
    return source.scale <= target.scale and source.precision - source.scale <= target.precision - target.scale


def widened(existing: str, incoming: str) -> str | None:
    """The type a column of type ``existing`` must widen to so that ``incoming`` fits, when Delta's
    type widening can do that in place; None when no such widening exists."""
    if fits_in(existing, incoming):
        return incoming
    a, b = parse_decimal(existing), parse_decimal(incoming)
    if a is not None and b is not None:
        scale = max(a.scale, b.scale)
        precision = max(a.precision - a.scale, b.precision - b.scale) + scale
        if precision <= MAX_DECIMAL_PRECISION:
            return f"decimal({precision},{scale})"
    return None
