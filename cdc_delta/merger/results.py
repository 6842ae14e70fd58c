"""What the merger did: one MERGE (:class:`MergeResult`), one table in a round (:class:`TableResult`),
a whole round (:class:`RoundResult`), and what is still pending per table (:class:`Pending`). The
stream's batch line, the metrics and the commands read these; they hold no Spark objects."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dc_field

SHOWN_TABLES = 5
"""Merged tables a round's log line names (stopped ones are all named)."""


@dataclass(frozen=True)
class MergeResult:
    """What one MERGE did to one table."""

    table: str
    source_rows: int = 0
    inserted: int = 0
    updated: int = 0
    truncated: int = 0
    """Rows already in the table soft-deleted by a truncate."""
    version: int | None = None
    replayed: bool = False
    """True when the table held these landings already: nothing was committed."""


@dataclass(frozen=True)
class TableResult:
    """What a round did to one table."""

    table: str
    events: int
    merge: MergeResult | None = None
    error: str | None = None
    """Why the table is stopped (its changes stay pending); None while it is not."""
    dead: int = 0
    """Changes dead-lettered where their images were made canonical (:attr:`TableChanges.dead`), by
    this round (not those an earlier one did)."""
    merged_through: int | None = None
    """For a table stopped partway (at a schema change it cannot follow), the newest landing it holds:
    every change before the refused one is merged."""
    merged_events: int = 0
    """For a table stopped partway, the changes it merged (:attr:`events` are those left pending)."""
    refused: str | None = None
    """For a table stopped partway, the schema change it cannot follow (what :attr:`error` begins with)."""

    @property
    def truncated(self) -> int:
        return self.merge.truncated if self.merge is not None else 0


@dataclass(frozen=True)
class Pending:
    """One table's changes landed but not merged yet."""

    events: int
    oldest_landed_at: float
    """When the oldest of them landed (seconds since the epoch)."""
    newest_seq: int
    """The newest landing that holds one of them."""

    def age(self, now: float) -> float:
        return max(0.0, now - self.oldest_landed_at)


@dataclass(frozen=True)
class RoundResult:
    """What one merge round did."""

    through_seq: int
    tables: tuple[TableResult, ...] = ()
    duration_s: float = 0.0
    pending: dict[str, Pending] = dc_field(default_factory=dict)
    """The changes still pending after the round, per table (stopped tables included)."""
    finished_at: float = 0.0

    @property
    def dead(self) -> int:
        """Changes the round dead-lettered (images the reference refused where they were made canonical)."""
        return sum(t.dead for t in self.tables if not t.error or t.merged_through is not None)

    @property
    def merged_events(self) -> int:
        """Changes the round merged (of a table stopped partway, those before the change it refused)."""
        return sum(t.merged_events if t.error else t.events for t in self.tables)

    @property
    def pending_events(self) -> int:
        return sum(p.events for p in self.pending.values())

    @property
    def oldest_pending_s(self) -> float | None:
        """Age of the oldest change still pending when the round ended (None: none is)."""
        oldest = min((p.oldest_landed_at for p in self.pending.values()), default=None)
        return None if oldest is None else max(0.0, self.finished_at - oldest)

    def summary(self) -> str:
        """The one log line of a round: its totals, every stopped table, the first few merged ones."""
        stopped = [f"{t.table}: stopped, {t.events} changes left pending" for t in self.tables if t.error]
        merged = [t for t in self.tables if not t.error and t.merge is not None]
        shown = []
        for t in merged[:SHOWN_TABLES]:
            m = t.merge
            assert m is not None
            state = "held already" if m.replayed else f"+{m.inserted} ~{m.updated}"
            trunc = f" truncated {t.truncated}" if t.truncated else ""
            dead = f" dead-lettered {t.dead}" if t.dead else ""
            shown.append(f"{t.table}: {t.events} changes -> {m.source_rows} keys {state}{trunc}{dead} v{m.version}")
        if len(merged) > SHOWN_TABLES:
            shown.append(f"and {len(merged) - SHOWN_TABLES} more")
        changes = self.merged_events
        behind = ""
        if self.pending:
            oldest = f", oldest {self.oldest_pending_s:.0f}s" if self.oldest_pending_s is not None else ""
            behind = f"; pending: {self.pending_events} changes in {len(self.pending)} tables{oldest}"
        return (
            f"merge through landing {self.through_seq}: {len(self.tables)} tables, {changes} changes"
            f"{f' ({self.dead} dead-lettered)' if self.dead else ''} "
            f"[{'; '.join(stopped + shown)}] in {self.duration_s:.1f}s{behind}"
        )
