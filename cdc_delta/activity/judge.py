"""Judge a table's recent changes against its own history, by hour of day (pure: counts in, verdict out).

Counts are per :data:`BUCKET_MS` of source time. A *silent* table has had no change for
``activity.silent_minutes`` while every earlier day it has history for had at least
``activity.silent_min_changes`` in the same hours of the day, or, for a table with a weekly rhythm, the
same weekday of every earlier week; one exception is forgiven among four or more (a holiday). A table
quiet at night or at weekends is not silent then. A table *jumped* when its last hour (of complete
buckets) holds ``jump_factor`` times the most that hour held on any earlier day, and at least
``jump_min_changes``. A table with fewer than ``min_days`` of history is *learning*; one whose quietest
day is below the silence threshold is *quiet* (too quiet to judge silence over this span)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cdc_delta.config.activity import ActivityConfig

BUCKET_MS = 15 * 60 * 1000
DAY_MS = 24 * 3600 * 1000
HOUR_MS = 3600 * 1000

OK, SILENT, JUMP, LEARNING, QUIET = "ok", "silent", "jump", "learning", "quiet"
FLAGGED = (SILENT, JUMP)


@dataclass(frozen=True)
class History:
    """One table's changes: per bucket (its start, ms since the epoch) how many, and its newest change."""

    buckets: Mapping[int, int]
    last_change_ms: int | None


@dataclass(frozen=True)
class Verdict:
    state: str
    reason: str
    days: int = 0
    """Whole days of history the table was judged against."""
    silent_s: float = 0.0
    """How long the table has had no change, where it is silent (0 otherwise)."""
    jump_ratio: float = 0.0
    """Its last hour's changes over the most in that hour on an earlier day, where it jumped (0 otherwise)."""

    @property
    def flagged(self) -> bool:
        return self.state in FLAGGED


def bucket_of(ts_ms: int) -> int:
    return ts_ms - ts_ms % BUCKET_MS


def changes_between(buckets: Mapping[int, int], lo_ms: int, hi_ms: int) -> int:
    """The changes of the buckets wholly inside [lo_ms, hi_ms)."""
    first = -(-lo_ms // BUCKET_MS) * BUCKET_MS
    return sum(buckets.get(b, 0) for b in range(first, hi_ms - BUCKET_MS + 1, BUCKET_MS))


def judge(history: History, now_ms: int, settings: ActivityConfig) -> Verdict:
    if history.last_change_ms is None or not history.buckets:
        return Verdict(LEARNING, "no change seen yet")
    known_days = (now_ms - min(history.buckets)) // DAY_MS
    if known_days < settings.min_days:
        have = (now_ms - min(history.buckets)) / DAY_MS
        return Verdict(LEARNING, f"{have:.1f} days of history; judged from {settings.min_days}")
    days = range(1, min(known_days, settings.history_days) + 1)
    buckets = history.buckets

    silent_ms = now_ms - history.last_change_ms
    if silent_ms >= settings.silent_minutes * 60_000:
        return _silence(history, now_ms, silent_ms, settings)

    # the last hour of complete buckets, against the same hour of each earlier day
    hour_end = bucket_of(now_ms)
    recent = changes_between(buckets, hour_end - HOUR_MS, hour_end)
    busiest = max(changes_between(buckets, hour_end - HOUR_MS - d * DAY_MS, hour_end - d * DAY_MS) for d in days)
    if recent >= settings.jump_min_changes and recent >= settings.jump_factor * max(busiest, 1):
        ratio = recent / max(busiest, 1)
        return Verdict(
            JUMP,
            f"{recent:,} changes in the last hour; at most {busiest:,} in that hour on the last {len(days)} days "
            f"({ratio:.1f}x)",
            days=len(days),
            jump_ratio=ratio,
        )
    return Verdict(
        OK,
        f"{recent:,} changes in the last hour; at most {busiest:,} then on the last {len(days)} days",
        days=len(days),
    )


def _silence(history: History, now_ms: int, silent_ms: int, settings: ActivityConfig) -> Verdict:
    """A table without change for ``silent_ms``: silent when, in the same hours, its earlier days (or,
    for a table with a weekly rhythm, the same weekday of earlier weeks) all had changes; one exception is
    forgiven where there are four days or more to compare (a holiday, an outage of its own)."""
    last = history.last_change_ms
    assert last is not None
    # the earlier days whose same hours the history holds whole
    before = (last - min(history.buckets)) // DAY_MS
    days = list(range(1, min(before, settings.history_days) + 1))
    if len(days) < settings.min_days:
        return Verdict(
            QUIET, f"no change for {_span(silent_ms)}, too long for its {len(days)} days of history to judge"
        )
    counts = {d: changes_between(history.buckets, last - d * DAY_MS, now_ms - d * DAY_MS) for d in days}
    weeks = [d for d in days if d % 7 == 0]
    for compared, what in ((days, "days"), (weeks, "weeks, on the same weekday")):
        if len(compared) < 2:
            continue
        ordered = sorted(counts[d] for d in compared)
        forgiven = len(ordered) >= 4
        low = ordered[1] if forgiven else ordered[0]
        if low >= settings.silent_min_changes:
            each = "all but one" if forgiven and ordered[0] < settings.silent_min_changes else "each"
            return Verdict(
                SILENT,
                f"no change for {_span(silent_ms)}; in the same hours {each} of the last {len(compared)} {what} had "
                f"at least {low:,}",
                days=len(days),
                silent_s=silent_ms / 1000,
            )
    quietest = min(counts.values())
    return Verdict(
        QUIET,
        f"no change for {_span(silent_ms)}, as on its quietest day of the last {len(days)} ({quietest:,} then): "
        "too quiet to call silent",
        days=len(days),
    )


def _span(ms: int) -> str:
    minutes = int(ms // 60_000)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days} d {hours} h"
    return f"{hours} h {minutes} min" if hours else f"{minutes} min"
