"""What a micro-batch did: per table and in all, and its one log line."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field as dc_field

from cdc_delta.consistency.point import Consistency
from cdc_delta.events.envelope import DEAD, OK, SKIP, TOMBSTONE
from cdc_delta.merger.results import RoundResult


@dataclass(frozen=True)
class BatchResult:
    """Counts of one micro-batch. Always: rows_in == landed + dead_lettered + skipped."""

    batch_id: int
    rows_in: int = 0
    landed: int = 0
    """Changes appended to the changelog (row events and truncates)."""
    dead_lettered: int = 0
    skipped: int = 0
    skips: dict[str, int] = dc_field(default_factory=dict)
    """Skipped records by reason (tombstone, schema change, transaction marker, heartbeat, ...)."""
    land_seq: int | None = None
    """The landing's number (None: nothing landed, or the batch had landed before)."""
    offsets: dict[str, dict[str, int]] = dc_field(default_factory=dict)
    max_source_ts_ms: int | None = None
    duration_s: float = 0.0
    landed_s: float = 0.0
    """Time to decode and land it (the rest of ``duration_s`` is the merge round run after it)."""
    status_by_table: dict[str | None, dict[str, int]] = dc_field(default_factory=dict)
    """Records per routed table (None: routed to none) and decode status (ok, dead, skip)."""
    max_source_ts_ms_by_table: dict[str, int] = dc_field(default_factory=dict)
    merge: RoundResult | None = None
    """The merge round run right after the landing (``merge.max_delay_seconds: 0``), if one ran."""
    steps: dict[str, float] = dc_field(default_factory=dict)
    """Seconds of each step of the landing (:class:`Steps`): where its time goes."""
    archived: dict[str, int] = dc_field(default_factory=dict)
    """Per table, the changes landed archived: a purge's deletes kept (``archival_deletes``)."""
    consistency: Consistency | None = None
    """The consistent point after the landing (:mod:`cdc_delta.consistency`; None: no transaction
    metadata met yet)."""

    def table_counts(self) -> dict[str | None, dict[str, int]]:
        """Per table (None: records routed to no table): records ``in``, ``landed``, ``dead_lettered``
        and ``skipped``."""
        counts = {}
        for table, by_status in self.status_by_table.items():
            ok, dead, skip = by_status.get(OK, 0), by_status.get(DEAD, 0), by_status.get(SKIP, 0)
            counts[table] = {"in": ok + dead + skip, "landed": ok, "dead_lettered": dead, "skipped": skip}
        return counts

    @property
    def tombstones(self) -> int:
        return self.skips.get(TOMBSTONE, 0)

    def summary(self) -> str:
        """The one log line of a batch (with the merge round run after it, if one ran)."""
        merged = f"; {self.merge.summary()}" if self.merge is not None else ""
        if not self.rows_in:
            return f"batch {self.batch_id}: empty, nothing landed ({self.duration_s:.1f}s){merged}"
        lag = ""
        if self.max_source_ts_ms:
            lag = f", source lag {time.time() - self.max_source_ts_ms / 1000:.1f}s"
        where = f" (landing {self.land_seq})" if self.land_seq is not None else " (landed before, skipped)"
        kept = f", {sum(self.archived.values())} archived (a purge kept)" if self.archived else ""
        return (
            f"batch {self.batch_id}: {self.rows_in} in, {self.landed} landed{where}, "
            f"{self.dead_lettered} dead-lettered, {self.skipped} skipped{_reasons(self.skips)}{kept}"
            f" in {self.landed_s:.1f}s{lag}{merged}"
        )


class Steps:
    """Times the steps of a batch, one after the other: :meth:`begin` ends the current step and starts
    the next, :meth:`end` ends the last. ``describe`` is told the step that begins (None at the end):
    the batch labels its Spark jobs with it."""

    def __init__(self, describe: Callable[[str | None], None] = lambda step: None) -> None:
        self.seconds: dict[str, float] = {}
        self._describe = describe
        self._current: str | None = None
        self._since = time.monotonic()

    def begin(self, step: str) -> None:
        self._close()
        self._current = step
        self._describe(step)

    def end(self) -> None:
        self._close()
        self._current = None
        self._describe(None)

    def _close(self) -> None:
        now = time.monotonic()
        if self._current is not None:
            step = self._current
            self.seconds[step] = round(self.seconds.get(step, 0.0) + now - self._since, 3)
        self._since = now

    def line(self) -> str:
        return ", ".join(f"{step} {s:.2f}s" for step, s in self.seconds.items())


def _reasons(skips: dict[str, int]) -> str:
    """`` (120 tombstone, 2 schema change)``: the reasons of the skipped records, most frequent first."""
    if not skips:
        return ""
    return " (" + ", ".join(f"{n} {reason}" for reason, n in sorted(skips.items(), key=lambda kv: -kv[1])) + ")"
