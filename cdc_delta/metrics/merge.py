"""The merger's metrics: each round, and per table the landing it holds, its pending changes and merge
lag. In the stream's registry when the merger runs beside the ingest; in a registry of their own, with
the newest landing known, for ``cdc-delta merge`` (a job of its own)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from cdc_delta.merger.results import Pending, RoundResult

DURATION_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800)


class MergeMetrics:
    """The merge series, in ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = r = registry
        self.version = Gauge(
            "cdc_delta_table_version", "Delta version of the table's last merge", ["table"], registry=r
        )
        self.landed_seq = Gauge(
            "cdc_delta_changelog_landing", "Number of the newest landing in the changelog", registry=r
        )
        self.merged_seq = Gauge(
            "cdc_delta_table_merged_landing",
            "The newest landing the table holds (its last merge)",
            ["table"],
            registry=r,
        )
        self.pending = Gauge(
            "cdc_delta_table_pending_changes", "Changes landed but not merged into the table yet", ["table"], registry=r
        )
        self.merge_lag = Gauge(
            "cdc_delta_table_merge_lag_seconds",
            "Age of the table's oldest pending change (0: none pending); live views see them already",
            ["table"],
            registry=r,
        )
        self.merge_dead = Counter(
            "cdc_delta_merge_dead_lettered",
            "Landed changes the merge dead-lettered (their images could not be made canonical; the stream's "
            "cdc_delta_events counted them as landed)",
            ["table"],
            registry=r,
        )
        self.round_duration = Histogram(
            "cdc_delta_merge_round_duration_seconds", "Time of one merge round", buckets=DURATION_BUCKETS, registry=r
        )
        self.stopped = Gauge(
            "cdc_delta_table_stopped",
            "1 while the table is stopped (its changes stay pending in the changelog)",
            ["table"],
            registry=r,
        )
        self._pending_tables: set[str] = set()
        self.round_started: float | None = None
        """Monotonic time the round under way started (None between rounds)."""
        self.last_round_end: float | None = None
        """Monotonic time the last round (or the look for a due table) ended; None before the first."""

    def tables_known(self, names: Iterable[str]) -> None:
        """Every merge series of these tables from the start (``rate()`` and ``absent()`` work)."""
        for name in names:
            self.stopped.labels(name).set(0)
            self.merge_dead.labels(name)
            self.pending.labels(name).set(0)
            self.merge_lag.labels(name).set(0)

    def landing_known(self, land_seq: int) -> None:
        """The newest landing in the changelog (one the stream made, or one the merger learnt of; -1:
        none yet)."""
        if land_seq >= 0:
            self.landed_seq.set(land_seq)

    def round_begins(self) -> None:
        self.round_started = time.monotonic()

    def round_done(self, result: RoundResult | None) -> None:
        """Count one merge round (None: nothing was due): versions, positions, stopped tables, what is
        left pending."""
        self.round_started = None
        self.last_round_end = time.monotonic()
        if result is None:
            return
        self.round_duration.observe(result.duration_s)
        for t in result.tables:
            if t.merge is not None and t.merge.version is not None:
                self.version.labels(t.table).set(t.merge.version)
            held = result.through_seq if t.error is None else t.merged_through  # stopped partway: what it holds
            if held is not None:
                self.merged_seq.labels(t.table).set(held)
                self.merge_dead.labels(t.table).inc(t.dead)
            self.stopped.labels(t.table).set(1 if t.error else 0)
        self.pending_now(result.pending)

    def pending_now(self, pending: Mapping[str, Pending]) -> None:
        """What is pending per table now (stopped tables included); the others have nothing pending."""
        now = time.time()
        for table in self._pending_tables - set(pending):
            self.pending.labels(table).set(0)
            self.merge_lag.labels(table).set(0)
        for table, waiting in pending.items():
            self.pending.labels(table).set(waiting.events)
            self.merge_lag.labels(table).set(waiting.age(now))
        self._pending_tables = set(pending)

    def pending_tables(self) -> int:
        """Tables with changes pending at the last reading (:meth:`pending_now`)."""
        return len(self._pending_tables)
