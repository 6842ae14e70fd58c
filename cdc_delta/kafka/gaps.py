"""A gap in Kafka: records deleted (retention) before the stream read them. The stream never skips one
silently: it stops, naming the ranges and the tables they feed; moving past it is an explicit, recorded
decision (``cdc-delta accept-gap``), and the tables it touched are read from the source again."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cdc_delta.exceptions import CdcDeltaError
from cdc_delta.kafka.applied import Partition
from cdc_delta.kafka.offsets import PartitionLag

CONFIG_PLACEHOLDER = "<config>"


class KafkaGap(CdcDeltaError):
    """Kafka no longer holds records the stream has not read: refused until the gap is accepted."""


@dataclass(frozen=True)
class Gap:
    """The offsets of one partition lost before the stream read them: ``first_lost`` up to, not
    including, ``first_kept`` (the earliest offset Kafka holds)."""

    topic: str
    partition: int
    first_lost: int
    first_kept: int

    @property
    def records(self) -> int:
        return self.first_kept - self.first_lost

    def range(self) -> str:
        return f"{self.topic}[{self.partition}] offsets {self.first_lost}-{self.first_kept - 1}"


def gaps_at(lags: list[PartitionLag], positions: Mapping[Partition, int] | None = None) -> list[Gap]:
    """The partitions whose next offset to read is below the earliest one Kafka holds: ``positions``
    (a partition it does not name is read from its start), by default the group's committed offsets."""
    out = []
    for lag in lags:
        position = lag.committed if positions is None else positions.get((lag.topic, lag.partition))
        if position is not None and 0 <= position < lag.earliest:
            out.append(Gap(lag.topic, lag.partition, position, lag.earliest))
    return sorted(out, key=lambda g: (g.topic, g.partition))


def describe(gaps: list[Gap], tables: Mapping[str, list[str]], config_path: str = CONFIG_PLACEHOLDER) -> str:
    """One line: the ranges lost, the tables they feed, and what to do."""
    ranges = "; ".join(f"{g.range()} ({g.records} records)" for g in gaps)
    fed = sorted({t for g in gaps for t in tables.get(g.topic, [])})
    which = f"the changes of {', '.join(fed)} in them are lost to the stream" if fed else "whose tables are not known"
    return (
        f"Kafka no longer holds records the stream has not read (retention passed): {ranges}; {which}. Nothing "
        f"was skipped. To move past the gap, with the stream stopped: cdc-delta accept-gap --config {config_path} "
        "(it records the gap in the lake), then start the stream and re-read those tables from the source "
        "(cdc-delta resnapshot)"
    )
