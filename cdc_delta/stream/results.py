"""What a micro-batch did: per table and in all, and its one log line."""

from __future__ import annotations

import time
from dataclasses import dataclass
from dataclasses import field as dc_field

from cdc_delta.events.envelope import DEAD, OK, SKIP, TOMBSTONE
from cdc_delta.merger.apply import TableResult


@dataclass(frozen=True)
class BatchResult:
    """Counts of one micro-batch. Always: rows_in == applied + dead_lettered + skipped."""

    batch_id: int
    rows_in: int = 0
    applied: int = 0
    dead_lettered: int = 0
    skipped: int = 0
    skips: dict[str, int] = dc_field(default_factory=dict)
    """Skipped records by reason (tombstone, schema change, transaction marker, heartbeat, ...)."""
    tables: tuple[TableResult, ...] = ()
    offsets: dict[str, dict[str, int]] = dc_field(default_factory=dict)
    max_source_ts_ms: int | None = None
    duration_s: float = 0.0
    status_by_table: dict[str | None, dict[str, int]] = dc_field(default_factory=dict)
    """Records per routed table (None: routed to none) and decode status (ok, dead, skip)."""
    max_source_ts_ms_by_table: dict[str, int] = dc_field(default_factory=dict)

    def table_counts(self) -> dict[str | None, dict[str, int]]:
        """Per table (None: records routed to no table): records ``in``, ``applied``,
        ``dead_lettered`` (parked events of a stopped table included) and ``skipped``."""
        parked = {t.table: t.parked for t in self.tables}
        counts = {}
        for table, by_status in self.status_by_table.items():
            ok, dead, skip = by_status.get(OK, 0), by_status.get(DEAD, 0), by_status.get(SKIP, 0)
            held = parked.get(table, 0) if table is not None else 0
            counts[table] = {
                "in": ok + dead + skip,
                "applied": ok - held,
                "dead_lettered": dead + held,
                "skipped": skip,
            }
        return counts

    @property
    def tombstones(self) -> int:
        return self.skips.get(TOMBSTONE, 0)

    def summary(self) -> str:
        """The one log line of a batch."""
        if not self.rows_in:
            return f"batch {self.batch_id}: empty, nothing committed ({self.duration_s:.1f}s)"
        parts = []
        for t in self.tables:
            if t.error or t.parked:
                parts.append(f"{t.table}: {t.events} events, {t.parked} parked (stopped)")
            elif t.merge is not None:
                m = t.merge
                state = "replayed, skipped" if m.replayed else f"+{m.inserted} ~{m.updated}"
                trunc = f" truncated {t.truncated}" if t.truncated else ""
                parts.append(f"{t.table}: {t.events} events -> {m.source_rows} keys {state}{trunc} v{m.version}")
        lag = ""
        if self.max_source_ts_ms:
            lag = f", source lag {time.time() - self.max_source_ts_ms / 1000:.1f}s"
        return (
            f"batch {self.batch_id}: {self.rows_in} in, {self.applied} applied, "
            f"{self.dead_lettered} dead-lettered, {self.skipped} skipped{_reasons(self.skips)}"
            f" [{'; '.join(parts)}] in {self.duration_s:.1f}s{lag}"
        )


def _reasons(skips: dict[str, int]) -> str:
    """`` (120 tombstone, 2 schema change)``: the reasons of the skipped records, most frequent first."""
    if not skips:
        return ""
    return " (" + ", ".join(f"{n} {reason}" for reason, n in sorted(skips.items(), key=lambda kv: -kv[1])) + ")"
