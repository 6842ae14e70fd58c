"""Checkdone: has the stream passed the snapshot's cut-off on every partition, and at which batch?

Every stream commit records, for its whole micro-batch, the highest offset and the highest source
time read on each Kafka partition. Batches are applied in order, so the first batch B after which
every partition has shown a source time at or past the cut-off is where the stream passed it: each
table's state at its last commit of a batch <= B holds every change made before the cut-off.

A partition that sends nothing after the cut-off (a quiet table) can never prove it by source time.
It counts as passed when Kafka says the stream has read all of it (the consumer group is at the
end offset) and ``idle_grace`` has gone by since the cut-off; B must then also cover the last batch
that read from it.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from cdc_delta.delta.commits import AppCommit

Partition = tuple[str, int]


@dataclass(frozen=True)
class BatchPosition:
    """What one stream batch read, as its commits recorded it."""

    batch_id: int
    offsets: dict[Partition, int]
    source_ts_ms: dict[Partition, int]


@dataclass(frozen=True)
class KafkaPosition:
    """Kafka's view of one partition: its end offset and the stream's consumer-group offset."""

    end: int
    committed: int | None


@dataclass(frozen=True)
class Readiness:
    """The answer: ready or not, and what the snapshot may include."""

    cutoff: dt.datetime
    ready: bool
    batch_id: int | None = None
    """The batch at which the stream passed the cut-off (None: nothing to include yet)."""
    positions: dict[str, dict[str, int]] = field(default_factory=dict)
    """Highest offset read per topic and partition up to and including ``batch_id``."""
    waiting_on: list[str] = field(default_factory=list)
    """Partitions not yet past the cut-off, as ``topic[partition]: why``."""
    idle: list[str] = field(default_factory=list)
    """Partitions taken as passed because the stream has read all of them."""

    def describe(self) -> str:
        when = self.cutoff.isoformat()
        if self.ready:
            idle = f"; {len(self.idle)} quiet partition(s) read to the end" if self.idle else ""
            return f"the stream passed the cut-off {when} at batch {self.batch_id}{idle}"
        shown = "; ".join(self.waiting_on[:5]) + (
            f"; and {len(self.waiting_on) - 5} more" if len(self.waiting_on) > 5 else ""
        )
        return f"the stream has not passed the cut-off {when} on {len(self.waiting_on)} partition(s): {shown}"


def batch_positions(commits: Iterable[AppCommit]) -> list[BatchPosition]:
    """One position per batch id, oldest first, from the stream commits of any of the tables."""
    by_batch: dict[int, BatchPosition] = {}
    for commit in commits:
        batch_id = commit.batch_id
        if batch_id in by_batch or not commit.record.offsets:
            continue
        record = commit.record
        offsets = {(t, int(p)): o for t, parts in record.offsets.items() for p, o in parts.items()}
        times = {(t, int(p)): ts for t, parts in record.partition_max_source_ts_ms.items() for p, ts in parts.items()}
        by_batch[batch_id] = BatchPosition(batch_id, offsets, times)
    return [by_batch[b] for b in sorted(by_batch)]


def cutoff_for(day: dt.date, time_zone: str) -> dt.datetime:
    """The end of ``day`` (the next midnight) in ``time_zone``, in UTC."""
    midnight = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(0), zoneinfo.ZoneInfo(time_zone))
    return midnight.astimezone(dt.timezone.utc)


def _name(partition: Partition) -> str:
    return f"{partition[0]}[{partition[1]}]"


def check_readiness(
    batches: list[BatchPosition],
    cutoff: dt.datetime,
    kafka: Mapping[Partition, KafkaPosition] | None,
    now: dt.datetime,
    idle_grace: dt.timedelta,
) -> Readiness:
    """Where the stream passed ``cutoff``. ``kafka`` lists every partition the stream reads (None when
    Kafka is not consulted: only partitions the commits name are then checked, none can be idle)."""
    cutoff_ms = int(cutoff.timestamp() * 1000)
    passed_at: dict[Partition, int] = {}
    last_read: dict[Partition, int] = {}
    for batch in batches:
        for partition, ts in batch.source_ts_ms.items():
            if ts >= cutoff_ms and partition not in passed_at:
                passed_at[partition] = batch.batch_id
        for partition in batch.offsets:
            last_read[partition] = batch.batch_id
    required = set(kafka) if kafka is not None else set(last_read)
    needs: list[int] = []
    waiting: list[str] = []
    idle: list[str] = []
    for partition in sorted(required):
        if partition in passed_at:
            needs.append(passed_at[partition])
            continue
        position = kafka.get(partition) if kafka is not None else None
        if position is not None and position.end == 0:
            continue  # an empty partition holds nothing to wait for
        read_all = position is not None and position.committed is not None and position.committed >= position.end
        if read_all and now >= cutoff + idle_grace:
            idle.append(_name(partition))
            if partition in last_read:
                needs.append(last_read[partition])
            continue
        if position is None:
            why = "no event at or after the cut-off yet (Kafka not consulted)"
        elif not read_all:
            behind = position.end - (position.committed or 0)
            why = f"no event at or after the cut-off read yet, {behind} record(s) not read"
        else:
            why = f"read to the end but quiet; counts as passed at {(cutoff + idle_grace).isoformat()}"
        waiting.append(f"{_name(partition)}: {why}")
    if waiting:
        return Readiness(cutoff, False, waiting_on=waiting, idle=idle)
    batch_id = max(needs) if needs else None
    return Readiness(cutoff, True, batch_id, _positions_up_to(batches, batch_id), idle=idle)


def _positions_up_to(batches: list[BatchPosition], batch_id: int | None) -> dict[str, dict[str, int]]:
    """The highest offset read per topic and partition by the batches up to ``batch_id``."""
    highest: dict[Partition, int] = {}
    for batch in batches:
        if batch_id is None or batch.batch_id > batch_id:
            break
        for (topic, part), offset in batch.offsets.items():
            highest[(topic, part)] = max(highest.get((topic, part), -1), offset)
    positions: dict[str, dict[str, int]] = {}
    for (topic, part), offset in sorted(highest.items()):
        positions.setdefault(topic, {})[str(part)] = offset
    return positions


def version_at_batch(commits: Iterable[AppCommit], batch_id: int | None) -> int | None:
    """The table's version after its last stream commit of a batch <= ``batch_id`` (None: no such
    commit, the table held nothing then). ``commits`` are newest first."""
    if batch_id is None:
        return None
    for commit in commits:
        if commit.batch_id <= batch_id and commit.record.offsets:
            return commit.version
    return None
