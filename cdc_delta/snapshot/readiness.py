"""Checkdone: has the stream passed the snapshot's cut-off on every partition, and at which landing?

Every landing (the changelog's commit of one micro-batch) records the highest offset and the highest
source time read on each Kafka partition. Landings are numbered in order, so the first landing L after
which every partition has shown a source time at or past the cut-off is where the stream passed it:
each table as of L (its merged rows overridden by its changes up to L, :mod:`cdc_delta.views.live`)
holds every change made before the cut-off.

A partition that sends nothing after the cut-off (a quiet table) can never prove it by source time.
It counts as passed when Kafka says the stream has read all of it (the consumer group is at the
end offset) and ``idle_grace`` has gone by since the cut-off; L must then also cover the last landing
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
    """What one landing's batch read, as its commit recorded it."""

    land_seq: int
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
    land_seq: int | None = None
    """The landing at which the stream passed the cut-off (None: nothing to include yet)."""
    positions: dict[str, dict[str, int]] = field(default_factory=dict)
    """Highest offset read per topic and partition up to and including ``land_seq``."""
    waiting_on: list[str] = field(default_factory=list)
    """Partitions not yet past the cut-off, as ``topic[partition]: why``."""
    idle: list[str] = field(default_factory=list)
    """Partitions taken as passed because the stream has read all of them."""

    def describe(self) -> str:
        when = self.cutoff.isoformat()
        if self.ready:
            idle = f"; {len(self.idle)} quiet partition(s) read to the end" if self.idle else ""
            return f"the stream passed the cut-off {when} at landing {self.land_seq}{idle}"
        shown = "; ".join(self.waiting_on[:5]) + (
            f"; and {len(self.waiting_on) - 5} more" if len(self.waiting_on) > 5 else ""
        )
        return f"the stream has not passed the cut-off {when} on {len(self.waiting_on)} partition(s): {shown}"


def batch_positions(commits: Iterable[AppCommit]) -> list[BatchPosition]:
    """One position per landing, oldest first, from the changelog's landing commits."""
    by_landing: dict[int, BatchPosition] = {}
    for commit in commits:
        land_seq = commit.record.land_seq
        if land_seq is None or land_seq in by_landing or commit.record.operation != "land":
            continue
        record = commit.record
        offsets = {(t, int(p)): o for t, parts in record.offsets.items() for p, o in parts.items()}
        times = {(t, int(p)): ts for t, parts in record.partition_max_source_ts_ms.items() for p, ts in parts.items()}
        by_landing[land_seq] = BatchPosition(land_seq, offsets, times)
    return [by_landing[b] for b in sorted(by_landing)]


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
                passed_at[partition] = batch.land_seq
        for partition in batch.offsets:
            last_read[partition] = batch.land_seq
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
    land_seq = max(needs) if needs else None
    return Readiness(cutoff, True, land_seq, _positions_up_to(batches, land_seq), idle=idle)


def _positions_up_to(batches: list[BatchPosition], land_seq: int | None) -> dict[str, dict[str, int]]:
    """The highest offset read per topic and partition by the landings up to ``land_seq``."""
    highest: dict[Partition, int] = {}
    for batch in batches:
        if land_seq is None or batch.land_seq > land_seq:
            break
        for (topic, part), offset in batch.offsets.items():
            highest[(topic, part)] = max(highest.get((topic, part), -1), offset)
    positions: dict[str, dict[str, int]] = {}
    for (topic, part), offset in sorted(highest.items()):
        positions.setdefault(topic, {})[str(part)] = offset
    return positions
