"""The merger's schedule: which tables are due, most overdue first, and what merging one leaves pending."""

from __future__ import annotations

from cdc_delta.changelog.pending import Truncate
from cdc_delta.events.ordering import Seq
from cdc_delta.merger.schedule import Schedule
from cdc_delta.rows.truncates import Segment, segments


def test_a_table_is_due_by_count_or_by_age_most_overdue_first() -> None:
    schedule = Schedule(min_events=100, max_delay_s=60, max_tables=2)
    schedule.landed(1, 1000.0, {"a": 10, "b": 150, "c": 5})
    schedule.landed(2, 1030.0, {"a": 10, "d": 1})
    assert schedule.due(1010.0) == ["b"]  # 150 >= min_events; the others are young and few
    # At 1070 a (landed 1000) and c (1000) are 70 s old, d 40 s: a (20 x 70) before c (5 x 70); b first.
    assert schedule.due(1070.0) == ["b", "a"]  # at most max_tables
    assert schedule.due(1070.0, bounded=False) == ["b", "a", "c"]
    assert schedule.due(1070.0, exclude={"b"}, bounded=False) == ["a", "c"]
    assert schedule.due(1010.0, every=True, bounded=False) == ["b", "a", "c", "d"]
    assert schedule.next_due_in(1010.0, exclude={"b"}) == 50.0
    assert schedule.newest_seq == 2


def test_merging_a_table_through_a_landing_leaves_only_later_landings_pending() -> None:
    schedule = Schedule(min_events=100, max_delay_s=60, max_tables=10)
    schedule.landed(1, 1000.0, {"a": 10})
    schedule.landed(2, 1020.0, {"a": 5})
    schedule.merged("a", 1)
    pending = schedule.pending()["a"]
    assert (pending.events, pending.oldest_landed_at, pending.newest_seq) == (5, 1020.0, 2)
    schedule.merged("a", 2)
    assert schedule.pending() == {} and schedule.next_due_in(2000.0) is None


def test_a_reading_of_the_changelog_counts_each_landing_once_whenever_the_stream_reported_it() -> None:
    # The merger's first round reads the changelog while this process's stream reports its landings:
    # landing 3 reported before the reading, landing 4 after it though the reading held it, 5 after.
    schedule = Schedule(min_events=100, max_delay_s=60, max_tables=10)
    schedule.landed(3, 1030.0, {"a": 7, "b": 2})
    schedule.read(4, [("a", 17, 4, 1000.0), ("c", 1, 2, 1020.0)])  # a: landings 1-4; c: landing 2
    schedule.landed(4, 1040.0, {"a": 4})
    schedule.landed(5, 1050.0, {"a": 6, "b": 1})
    pending = {table: (p.events, p.oldest_landed_at, p.newest_seq) for table, p in schedule.pending().items()}
    assert pending == {"a": (23, 1000.0, 5), "b": (1, 1050.0, 5), "c": (1, 1020.0, 2)}
    assert schedule.newest_seq == 5
    schedule.merged("a", 4)
    assert schedule.pending()["a"].events == 6


def seq(pos: int) -> Seq:
    return Seq(1, 0, 1, pos, 0, 0, 0, pos)


def test_truncates_split_pending_changes_into_segments_ending_at_their_landings() -> None:
    truncates = [
        Truncate("db", "t1", seq(50), 4),
        Truncate("db", "t1", seq(70), 4),  # the latest of a source table in a landing counts
        Truncate("db", "t2", seq(60), 4),
        Truncate("db", "t1", seq(90), 7),
        Truncate("db", "t1", seq(10), 2),  # merged already (at or before landing 3)
    ]
    assert segments(truncates, 3, 9) == [
        Segment(3, 4, {("db", "t1"): seq(70), ("db", "t2"): seq(60)}),
        Segment(4, 7, {("db", "t1"): seq(90)}),
        Segment(7, 9, {}),
    ]
    assert segments(truncates, 3, 7)[-1] == Segment(4, 7, {("db", "t1"): seq(90)})  # no empty tail
    assert segments([], 3, 9) == [Segment(3, 9, {})]
    assert segments([], 9, 9) == []
