"""Which tables the merger merges next: each table's pending changes, as landings report them, and the
rule that makes a table due (``merge.min_events`` pending, or its oldest pending change
``merge.max_delay_seconds`` old), most overdue first. Pure bookkeeping: no Spark, no clock of its own."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Mapping

from cdc_delta.merger.results import Pending


class Schedule:
    """Pending changes per table, by landing; thread-safe (the stream reports landings while the
    merger's thread asks what is due)."""

    def __init__(self, min_events: int, max_delay_s: float, max_tables: int) -> None:
        self.min_events = min_events
        self.max_delay_s = max_delay_s
        self.max_tables = max_tables
        self._landings: dict[str, deque[tuple[int, int, float]]] = {}
        self._lock = threading.Lock()
        self.newest_seq = -1
        """The newest landing reported."""
        self._read_through = -1
        """Landings up to this one were counted from a reading of the changelog (:meth:`read`)."""

    def landed(self, land_seq: int, landed_at: float, events_by_table: Mapping[str, int]) -> None:
        """A landing and its changes per table (a table with none is left out). A landing the changelog's
        reading counted already is not counted again."""
        with self._lock:
            if land_seq > self._read_through:
                for table, events in events_by_table.items():
                    if events > 0:
                        self._landings.setdefault(table, deque()).append((land_seq, events, landed_at))
            self.newest_seq = max(self.newest_seq, land_seq)

    def read(self, through_seq: int, tables: Iterable[tuple[str, int, int, float]]) -> None:
        """What a reading of the changelog found pending in the landings up to ``through_seq``: per table
        its changes, newest landing and when the oldest landed. It stands for every landing up to
        ``through_seq``, those reported before the reading (dropped here) and after it (ignored)."""
        with self._lock:
            for table in list(self._landings):
                kept = deque(entry for entry in self._landings[table] if entry[0] > through_seq)
                if kept:
                    self._landings[table] = kept
                else:
                    del self._landings[table]
            for table, events, newest_seq, oldest_landed_at in tables:
                if events > 0:
                    self._landings.setdefault(table, deque()).appendleft((newest_seq, events, oldest_landed_at))
            self._read_through = max(self._read_through, through_seq)
            self.newest_seq = max(self.newest_seq, through_seq)

    def merged(self, table: str, through_seq: int) -> None:
        """``table`` holds every landing up to ``through_seq`` now."""
        with self._lock:
            landings = self._landings.get(table)
            while landings and landings[0][0] <= through_seq:
                landings.popleft()
            if landings is not None and not landings:
                del self._landings[table]

    def pending(self) -> dict[str, Pending]:
        with self._lock:
            return {table: _summary(landings) for table, landings in self._landings.items()}

    def due(self, now: float, exclude: Iterable[str] = (), every: bool = False, bounded: bool = True) -> list[str]:
        """The tables to merge now, most overdue first (pending changes x their age), at most
        ``max_tables`` (unless not ``bounded``); with ``every``, every table with pending changes."""
        left_out = set(exclude)
        ready = [
            (p.events * max(p.age(now), 1.0), table)
            for table, p in self.pending().items()
            if table not in left_out and (every or self.is_due(p, now))
        ]
        ordered = [table for _, table in sorted(ready, key=lambda item: (-item[0], item[1]))]
        return ordered[: self.max_tables] if bounded else ordered

    def is_due(self, pending: Pending, now: float) -> bool:
        return pending.events >= self.min_events or pending.age(now) >= self.max_delay_s

    def next_due_in(self, now: float, exclude: Iterable[str] = ()) -> float | None:
        """Seconds until a table becomes due by age (0: one is due now; None: nothing is pending)."""
        left_out = set(exclude)
        waits = [
            0.0 if self.is_due(p, now) else self.max_delay_s - p.age(now)
            for table, p in self.pending().items()
            if table not in left_out
        ]
        return min(waits, default=None)


def _summary(landings: deque[tuple[int, int, float]]) -> Pending:
    return Pending(
        events=sum(events for _, events, _ in landings),
        oldest_landed_at=min(at for _, _, at in landings),
        newest_seq=max(seq for seq, _, _ in landings),
    )
