"""Where a table differs from its source: the key ranges to read again.

``check`` counts rows on both sides in :data:`BUCKETS` equal ranges of the first key column (where it
is an integer), in the same consistent snapshot as the source's total, and names the ranges whose counts
differ as a ``--where`` for ``cdc-delta resnapshot``: a repair then reads those rows only, not the
table. Counts are what ``check`` compares, so a range is named where rows are missing or extra; a value
that drifted with the count intact is not seen by ``check`` at all.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

BUCKETS = 64
"""Ranges a table's key span is cut into (one GROUP BY on the source, one pass over Delta's rows)."""
MAX_RANGES = 4
"""More differing ranges than this are read as one range from the first to the last."""
MOST_OF_THE_TABLE = 0.5
"""Differing ranges that cover more of the key span than this: the whole table is read (no --where)."""


def width(low: Any, high: Any) -> int | None:
    """Keys per range over ``low..high``, or None where the first key column is not an integer."""
    if not isinstance(low, int) or not isinstance(high, int) or isinstance(low, bool) or high < low:
        return None
    return max(1, math.ceil((high - low + 1) / BUCKETS))


@dataclass(frozen=True)
class Buckets:
    """:data:`BUCKETS` ranges of ``width`` keys each, from ``low``: a key's range is ``(key - low) // width``."""

    low: int
    high: int
    width: int

    @classmethod
    def over(cls, low: Any, high: Any) -> Buckets | None:
        """The ranges over ``low..high``, or None where the first key column is not an integer."""
        size = width(low, high)
        return None if size is None else cls(low, high, size)

    def of(self, key: int) -> int:
        return (key - self.low) // self.width

    def span(self, first: int, last: int) -> tuple[int, int]:
        """The keys of ranges ``first..last``, within ``low..high``."""
        return self.low + first * self.width, min(self.high, self.low + (last + 1) * self.width - 1)


def differing(source: dict[int, int], delta: dict[int, int], also: list[int] | None = None) -> list[int]:
    """The ranges whose row counts differ, with ``also`` (ranges known to differ otherwise), sorted."""
    found = {b for b in source.keys() | delta.keys() if source.get(b, 0) != delta.get(b, 0)}
    return sorted(found | set(also or ()))


def repair_where(column: str, buckets: Buckets, ranges: list[int]) -> str | None:
    """A ``--where`` that takes the keys of ``ranges``, or None where the whole table is as good to read."""
    if not ranges:
        return None
    runs: list[tuple[int, int]] = []
    for b in ranges:
        if runs and runs[-1][1] == b - 1:
            runs[-1] = (runs[-1][0], b)
        else:
            runs.append((b, b))
    if len(runs) > MAX_RANGES:
        runs = [(runs[0][0], runs[-1][1])]
    spans = [buckets.span(a, b) for a, b in runs]
    covered = sum(hi - lo + 1 for lo, hi in spans)
    if covered > MOST_OF_THE_TABLE * (buckets.high - buckets.low + 1):
        return None
    name = column if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", column) else "`" + column.replace("`", "``") + "`"
    terms = [f"{name} BETWEEN {lo} AND {hi}" for lo, hi in spans]
    return terms[0] if len(terms) == 1 else "(" + " OR ".join(terms) + ")"
