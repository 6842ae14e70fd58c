"""Durations written as text, as Spark's ``Trigger.ProcessingTime`` reads them (``10 seconds``,
``1 minute 30 seconds``, ``500 milliseconds``): checked when the config loads, not when the stream starts."""

from __future__ import annotations

import re

_MICROS = {
    "week": 7 * 86_400_000_000,
    "day": 86_400_000_000,
    "hour": 3_600_000_000,
    "minute": 60_000_000,
    "second": 1_000_000,
    "millisecond": 1_000,
    "microsecond": 1,
}
_MONTHS = {"year": 12, "month": 1}
UNITS = ", ".join(_MICROS)
_TERM = re.compile(r"([+-]?)\s*(\d+\.?\d*|\.\d+)\s+([a-z]+)")


def interval_micros(text: str) -> int:
    """The microseconds of ``text`` as Spark's processing-time trigger reads it: terms ``<number> <unit>``,
    ``interval`` in front allowed, case ignored. ValueError says what is wrong (not a negative total:
    the caller decides whether that is allowed)."""
    words = text.strip().lower()
    if words.startswith("interval") and (len(words) == 8 or words[8].isspace()):
        words = words[8:].strip()
    if not words:
        raise ValueError("it is empty")
    total, months, pos = 0, 0, 0
    while pos < len(words):
        term = _TERM.match(words, pos)
        if term is None or (term.end() < len(words) and not words[term.end()].isspace()):
            raise ValueError(f"{words[pos:].split()[0]!r} is not a number followed by a unit")
        sign, number, unit = term.groups()
        name = unit[:-1] if unit.endswith("s") else unit
        if name not in _MICROS and name not in _MONTHS:
            raise ValueError(f"{unit!r} is not a unit ({UNITS})")
        if "." in number and name != "second":
            raise ValueError(f"{number} {unit}: only seconds can have a fraction")
        whole, _, fraction = number.partition(".")
        value = int(whole or 0) * _MICROS.get(name, 0) + int((fraction + "000000")[:6])
        months += int(whole or 0) * _MONTHS.get(name, 0) * (-1 if sign == "-" else 1)
        total += -value if sign == "-" else value
        pos = term.end()
        while pos < len(words) and words[pos].isspace():
            pos += 1
    if months:
        raise ValueError("a trigger interval has no months or years: write days or weeks")
    if abs(total) >= 2**63:
        raise ValueError("it is too long")
    return total


def check_trigger_interval(value: object, what: str = "trigger_interval") -> object:
    """``value`` if Spark's processing-time trigger takes it; else ValueError saying what to write. A bare
    number is refused: Spark would read it as milliseconds, a reader of the file as seconds."""
    example = f"write e.g. {what}: 10 seconds"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"{what} {value:g} is negative: {example}")
        raise ValueError(f"{what} {value:g} has no unit: write {what}: {value:g} seconds")
    if isinstance(value, str):
        try:
            micros = interval_micros(value)
        except ValueError as exc:
            raise ValueError(f"{what} {value!r} is not a duration Spark reads: {exc}; {example}") from None
        if micros < 0:
            raise ValueError(f"{what} {value!r} is negative: {example}")
    return value


def as_number(text: str, unit: str) -> float | None:
    """``text`` such as ``1 minute`` in ``unit`` (seconds, minutes, hours), or None if it is no duration."""
    try:
        micros = interval_micros(text)
    except ValueError:
        return None
    return micros / {"seconds": 1e6, "minutes": 60e6, "hours": 3600e6}[unit]
