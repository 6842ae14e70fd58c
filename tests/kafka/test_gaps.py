"""A gap in Kafka: where the stream would read is below what Kafka holds; said in one line naming the
ranges, the tables and the command that moves past it. And the repair log's reading of which tables
still need a re-snapshot."""

from __future__ import annotations

import datetime as dt

from cdc_delta.delta.repair_log import GAP, RESNAPSHOT, Entry, resnapshot_needed
from cdc_delta.kafka.gaps import Gap, describe, gaps_at
from cdc_delta.kafka.offsets import PartitionLag


def test_a_gap_is_where_the_stream_would_read_below_the_earliest_offset_kafka_holds() -> None:
    lags = [
        PartitionLag("a", 0, end=100, committed=40, earliest=60),
        PartitionLag("a", 1, end=100, committed=60, earliest=60),
        PartitionLag("b", 0, end=100, committed=None, earliest=10),
    ]
    assert lags[0].lost == 20 and lags[1].lost == 0 and lags[2].lost == 0
    assert gaps_at(lags) == [Gap("a", 0, 40, 60)]  # by the group's committed offsets
    assert gaps_at(lags, {("a", 0): 70, ("a", 1): 5}) == [Gap("a", 1, 5, 60)]  # by the checkpoint's
    assert gaps_at(lags, {}) == []  # a partition the checkpoint does not name is read from its start


def test_the_gap_is_one_line_with_the_ranges_the_tables_and_the_command() -> None:
    line = describe([Gap("db.inv.orders", 0, 40, 60)], {"db.inv.orders": ["inv.orders"]}, "cdc.yaml")
    assert "\n" not in line
    assert "db.inv.orders[0] offsets 40-59 (20 records)" in line and "the changes of inv.orders in them" in line
    assert "Nothing was skipped" in line and "cdc-delta accept-gap --config cdc.yaml" in line


def test_a_table_needs_a_resnapshot_from_its_gap_until_one_is_recorded_after_it() -> None:
    t = [dt.datetime(2026, 12, 1, h, tzinfo=dt.timezone.utc) for h in range(5)]
    log = [
        Entry(GAP, t[0], "inv.orders", "x", 0, 1, 2),
        Entry(GAP, t[1], "inv.items", "y", 0, 1, 2),
        Entry(RESNAPSHOT, t[2], "inv.orders"),
        Entry(GAP, t[3], None, "z", 0, 1, 2),  # a topic whose tables were not known
        Entry(RESNAPSHOT, t[4], "inv.customers"),
    ]
    assert resnapshot_needed(log) == {"inv.items": t[1]}
    assert resnapshot_needed([*log, Entry(GAP, t[4], "inv.orders", "x", 0, 5, 9)]) == {
        "inv.items": t[1],
        "inv.orders": t[4],
    }
