"""Silent tables and rate jumps judged against each table's own history (no Spark): a table busy all
day that stops, one busy only on weekday office hours (never silent at night or at weekends), a table
too new, and a jump against the same hour of earlier days."""

from __future__ import annotations

import random

from cdc_delta.activity.judge import (
    BUCKET_MS,
    DAY_MS,
    HOUR_MS,
    JUMP,
    LEARNING,
    OK,
    QUIET,
    SILENT,
    History,
    judge,
)
from cdc_delta.config.activity import ActivityConfig

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z, a Thursday
SETTINGS = ActivityConfig()


def history(start_ms: int, end_ms: int, per_bucket) -> History:  # type: ignore[no-untyped-def]
    """Buckets from ``start_ms`` to ``end_ms`` with ``per_bucket(bucket_start)`` changes each."""
    buckets = {b: n for b in range(start_ms, end_ms, BUCKET_MS) if (n := per_bucket(b))}
    last = max(buckets) + BUCKET_MS - 1 if buckets else None
    return History(buckets, last)


def test_a_table_busy_all_day_that_stops_is_silent_after_an_hour_with_the_numbers() -> None:
    rng = random.Random(1)
    stop = T0 + 7 * DAY_MS + 10 * HOUR_MS
    busy = history(T0, stop, lambda b: rng.randint(30, 60))
    assert judge(busy, stop + 40 * 60_000, SETTINGS).state == OK  # 40 min: not yet
    verdict = judge(busy, stop + 2 * HOUR_MS + 5 * 60_000, SETTINGS)
    assert verdict.state == SILENT and verdict.flagged and verdict.days == 7
    assert 2 * 3600 < verdict.silent_s < 2 * 3600 + 600
    assert verdict.reason.startswith("no change for 2 h 5 min; in the same hours each of the last 7 days had at least ")
    # A day without a change (a holiday, an outage of its own) is forgiven among four or more.
    outage = {b: n for b, n in busy.buckets.items() if not T0 + 3 * DAY_MS <= b < T0 + 4 * DAY_MS}
    forgiven = judge(History(outage, busy.last_change_ms), stop + 2 * HOUR_MS + 5 * 60_000, SETTINGS)
    assert forgiven.state == SILENT and "all but one of the last 7 days" in forgiven.reason, forgiven


def test_a_table_busy_on_weekday_office_hours_is_never_silent_at_night_or_at_the_weekend() -> None:
    def office(b: int) -> int:
        day, hour = divmod(b - T0, DAY_MS)
        weekday = (3 + day) % 7  # T0 is a Thursday (0 = Monday)
        return 40 if weekday < 5 and 9 * HOUR_MS <= hour < 17 * HOUR_MS else 0

    end = T0 + 16 * DAY_MS  # through Friday the 16th: Saturday the 17th, 00:00
    table = history(T0, end, office)
    for hours_later in (2, 8, 20, 30, 40, 50, 56):  # Saturday, Sunday, Monday 08:00
        verdict = judge(table, end + hours_later * HOUR_MS, SETTINGS)
        assert verdict.state in (OK, QUIET), (hours_later, verdict)
    # Monday 16:00 with nothing since Friday 17:00: every span of 2 d 23 h before held office hours.
    monday = judge(table, end + 2 * DAY_MS + 16 * HOUR_MS, SETTINGS)
    assert monday.state == SILENT and monday.days == 15, monday
    assert monday.reason.startswith("no change for 2 d 23 h; in the same hours each of the last 15 days had at least")
    # Tuesday 16:00 of the next week, silent since Monday 17:00: the days include the weekend's (none on
    # two of them), but the same weekday of the last two weeks was busy.
    week = history(T0, T0 + 18 * DAY_MS + 17 * HOUR_MS, office)
    tuesday = judge(week, T0 + 19 * DAY_MS + 16 * HOUR_MS, SETTINGS)
    assert tuesday.state == SILENT, tuesday


def test_a_table_with_less_history_than_min_days_is_learning() -> None:
    young = history(T0, T0 + 2 * DAY_MS, lambda b: 50)
    verdict = judge(young, T0 + 2 * DAY_MS + 5 * HOUR_MS, SETTINGS)
    assert verdict.state == LEARNING and verdict.reason == "2.2 days of history; judged from 3"
    assert judge(History({}, None), T0, SETTINGS).state == LEARNING


def test_a_jump_against_the_busiest_same_hour_of_earlier_days() -> None:
    now = T0 + 10 * DAY_MS + 14 * HOUR_MS + 7 * 60_000

    def table(last_hour: int) -> History:
        def per_bucket(b: int) -> int:  # the last four complete quarters (the one under way is not judged)
            return last_hour if now - now % BUCKET_MS - 4 * BUCKET_MS <= b < now - now % BUCKET_MS else 20

        return history(T0, now, per_bucket)

    jumped = judge(table(600), now, SETTINGS)  # 2,400 in the hour against 80
    assert jumped.state == JUMP and jumped.jump_ratio == 30.0, jumped
    assert jumped.reason == "2,400 changes in the last hour; at most 80 in that hour on the last 10 days (30.0x)"
    assert judge(table(150), now, SETTINGS).state == OK  # 600: under jump_min_changes
    assert judge(table(500), now, ActivityConfig(jump_factor=40)).state == OK  # 25x, the factor 40
