"""Readiness (Checkdone): where the stream passed the cut-off, from the positions its landings recorded."""

from __future__ import annotations

import datetime as dt
from typing import Any

from cdc_delta.delta.commits import AppCommit, StreamCommit
from cdc_delta.snapshot.readiness import (
    BatchPosition,
    KafkaPosition,
    batch_positions,
    check_readiness,
    cutoff_for,
)

CUTOFF = dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc)
MS = int(CUTOFF.timestamp() * 1000)
GRACE = dt.timedelta(minutes=15)
A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def batch(batch_id: int, **parts: tuple[int, int]) -> BatchPosition:
    """parts: name like a0 -> (offset, source ts ms)."""
    names = {k: (k[:-1], int(k[-1])) for k in parts}
    return BatchPosition(
        batch_id, {names[k]: v[0] for k, v in parts.items()}, {names[k]: v[1] for k, v in parts.items()}
    )


def test_cutoff_is_the_end_of_the_day_in_the_configured_zone() -> None:
    assert cutoff_for(dt.date(2026, 3, 1), "UTC") == CUTOFF
    assert cutoff_for(dt.date(2026, 3, 1), "Asia/Shanghai") == dt.datetime(2026, 3, 1, 16, tzinfo=dt.timezone.utc)
    # The day daylight saving starts in New York has 23 hours; the cut-off is still its midnight.
    assert cutoff_for(dt.date(2026, 3, 8), "America/New_York") == dt.datetime(2026, 3, 9, 4, tzinfo=dt.timezone.utc)


def test_ready_at_the_first_batch_where_every_partition_passed() -> None:
    batches = [
        batch(0, a0=(10, MS - 500), a1=(4, MS - 900)),
        batch(1, a0=(20, MS + 5)),  # a0 passed; a1 not yet
        batch(2, a1=(9, MS - 1)),
        batch(3, a1=(12, MS)),  # a1 passed (an event at the cut-off belongs to the next day)
        batch(4, a0=(30, MS + 900), a1=(15, MS + 900)),
    ]
    ready = check_readiness(batches, CUTOFF, None, CUTOFF, GRACE)
    assert ready.ready and ready.land_seq == 3
    assert ready.positions == {"a": {"0": 20, "1": 12}}
    assert "passed the cut-off 2026-03-02T00:00:00+00:00 at landing 3" in ready.describe()


def test_not_ready_names_the_partitions_still_before_the_cut_off() -> None:
    batches = [batch(0, a0=(10, MS + 1), a1=(4, MS - 900))]
    kafka = {A0: KafkaPosition(11, 11), A1: KafkaPosition(9, 5), B0: KafkaPosition(0, None)}
    ready = check_readiness(batches, CUTOFF, kafka, CUTOFF + dt.timedelta(hours=1), GRACE)
    assert not ready.ready and ready.land_seq is None
    assert ready.waiting_on == ["a[1]: no event at or after the cut-off read yet, 4 record(s) not read"]
    assert "has not passed the cut-off" in ready.describe()


def test_a_quiet_partition_read_to_the_end_passes_after_the_grace_period() -> None:
    batches = [batch(0, a0=(10, MS - 50), a1=(3, MS - 900)), batch(1, a0=(11, MS + 1)), batch(2, a1=(4, MS - 800))]
    kafka = {A0: KafkaPosition(12, 12), A1: KafkaPosition(5, 5)}
    early = check_readiness(batches, CUTOFF, kafka, CUTOFF + dt.timedelta(minutes=5), GRACE)
    assert not early.ready and "read to the end but quiet" in early.waiting_on[0]
    late = check_readiness(batches, CUTOFF, kafka, CUTOFF + dt.timedelta(minutes=20), GRACE)
    # a1's last events were read in landing 2, so the snapshot must include landing 2.
    assert late.ready and late.land_seq == 2 and late.idle == ["a[1]"]
    # Without Kafka a quiet partition cannot be told from a stream that is behind.
    assert not check_readiness(batches, CUTOFF, None, CUTOFF + dt.timedelta(days=1), GRACE).ready


def landing(version: int, land_seq: int, **meta: Any) -> AppCommit:
    record = StreamCommit("x", batch_id=land_seq % 3, land_seq=land_seq, operation="land", **meta)
    return AppCommit(version, CUTOFF, "WRITE", record, {})


def test_batch_positions_are_the_landings_in_order_whatever_their_batch_ids() -> None:
    offsets = {"offsets": {"a": {"0": 5}}, "partition_max_source_ts_ms": {"a": {"0": MS}}}
    # newest first, as the changelog's history reads; batch ids restart with a new checkpoint
    commits = [landing(9, 7, **offsets), landing(8, 6), landing(6, 5, **offsets), landing(5, 2, **offsets)]
    merge = AppCommit(7, CUTOFF, "MERGE", StreamCommit("x", land_seq=6, table="t", operation="merge"), {})
    positions = batch_positions([*commits, merge])
    assert [p.land_seq for p in positions] == [2, 5, 6, 7]
    assert positions[0].offsets == {A0: 5} and positions[0].source_ts_ms == {A0: MS}
    assert positions[2].offsets == {}  # a landing that read no partition's records holds no position
