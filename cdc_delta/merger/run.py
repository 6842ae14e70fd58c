"""The merger, phase 2: MERGEs each table's pending changelog rows into its Delta table, on the table's
own schedule (:mod:`.schedule`), a round at a time.

A round takes the due tables (at most ``merge.max_tables_per_round``, most overdue first), reads their
pending changes from the changelog in one pass (checkpointed locally for the round), learns their column descriptors
and truncates in one small job, and applies each table's changes (:mod:`.apply`) ``merge.concurrency``
at a time, each table in a Spark session of its own. Every table's commit holds the changes up to the
round's newest landing (a table stopped at a schema change it cannot follow: up to the landing before it)
and records it (Delta's transaction id ``<app_id>:<table>:merge``, version the
landing number): a round run again commits nothing, a table restored from a backup is merged again from
where it is. A table that fails stops alone; its changes stay pending in the changelog.

It runs in the stream's process (after each landing with ``max_delay_seconds: 0``, else in a thread of
its own beside the ingest) or alone (``cdc-delta merge``), which learns of landings from the changelog.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Protocol

from pyspark.sql import SparkSession

from cdc_delta import hadoop_fs
from cdc_delta.changelog.append import Landing
from cdc_delta.changelog.pending import TableSummary, changes, landed_since, table_summaries
from cdc_delta.changelog.table import changelog_path, ensure_tables
from cdc_delta.config import AppConfig
from cdc_delta.delta.commits import StreamCommit
from cdc_delta.delta.workers import TableWorkers, fails_the_batch
from cdc_delta.exceptions import SchemasMissing
from cdc_delta.merger.apply import TableApplier, TableChanges, TableRound
from cdc_delta.merger.gate import LandingGate
from cdc_delta.merger.results import RoundResult, TableResult
from cdc_delta.merger.schedule import Schedule
from cdc_delta.spark_session import jobs_described

logger = logging.getLogger(__name__)

INTERPRETED = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
"""The merger's sessions evaluate expressions without generating code. Tables differ in shape, so
every table's plans would be generated and compiled anew in each task, and that, not the rows, is much
of a round's CPU; interpreted, a round of many small tables is a quarter faster and a large table no
slower (``bench/merge_rounds.py``, docs/performance.md). A setting the config's ``spark.conf`` names wins
(it built the process's Spark context, whose settings every session takes)."""


def interpreted(config: AppConfig) -> Callable[[SparkSession], None]:
    """Sets :data:`INTERPRETED` on a merger's session, but for what the config's ``spark.conf`` names."""
    chosen = {k: v for k, v in INTERPRETED.items() if k not in config.spark.conf}

    def setup(session: SparkSession) -> None:
        for key, value in chosen.items():
            session.conf.set(key, value)

    return setup


def table_work(app_id: str, names: list[str], summaries: dict[str, TableSummary], through: int) -> list[TableChanges]:
    """Each table's share of a round's changes (none for a table without changes), as the applier takes it."""
    empty = TableSummary()
    work = []
    for name in names:
        summary = summaries.get(name, empty)
        record = StreamCommit(
            app_id=app_id, land_seq=through, table=name, events=summary.events, table_max_source_ts_ms=summary.max_ts
        )
        work.append(
            TableChanges(
                name,
                summary.events,
                summary.descriptors,
                summary.truncates,
                record,
                dead=summary.dead,
                first_landings=summary.first_landings,
            )
        )
    return work


class RoundObserver(Protocol):
    """Told of each round of :meth:`Merger.run_until` (the merge metrics)."""

    def round_begins(self) -> None: ...

    def round_done(self, result: RoundResult | None) -> None: ...


@dataclass
class Rounds:
    """The rounds of one :meth:`Merger.run_until`."""

    results: list[RoundResult] = dc_field(default_factory=list)
    caught_up: bool = False
    """Whether it ended because nothing was left pending but in stopped tables (``every``)."""
    started: float = dc_field(default_factory=time.monotonic)
    seconds: float = 0.0

    @property
    def merged_events(self) -> int:
        return sum(r.merged_events for r in self.results)


class Merger:
    """Merges the tables' pending changes, round after round; keeps the schedule and what it learnt of
    each table between rounds."""

    def __init__(self, spark: SparkSession, config: AppConfig) -> None:
        """``spark``: the merger works in sessions of its own made from it (the stream's session keeps
        its transaction-id confs to itself)."""
        self.config = config
        setup = interpreted(config)
        self.spark = spark.newSession()
        setup(self.spark)
        self.path = changelog_path(config)
        merge = config.merge
        self.schedule = Schedule(merge.min_events, merge.max_delay_seconds, merge.max_tables_per_round)
        self.applier = TableApplier(self.spark, config)
        self._workers = TableWorkers(self.spark, merge.concurrency, setup=setup)
        self._positions_file = f"{self.path.rstrip('/')}_merged.json"
        self._positions: dict[str, int] = {}
        self._round_lock = threading.Lock()
        self._started = False
        self.gate = LandingGate()
        """Landings of the stream beside this merger, which its merges give way to."""

    # -- learning what is pending -------------------------------------------------------------------

    def start(self) -> None:
        """Learn what is pending from the changelog: the landings past each table's recorded position
        (the positions file, kept after every round; a table missing from it is counted from the start
        of the changelog and merged from where its own commits say)."""
        if self._started:
            return
        ensure_tables(self.spark, self.config)
        text = hadoop_fs.read_text(self.spark, self._positions_file)
        self._positions = {str(k): int(v) for k, v in json.loads(text).items()} if text else {}
        found = landed_since(self.spark, self.path, self._positions, -1)
        # Only committed landings are read, and landings commit in order: every one up to the newest
        # read is in the reading (so a round may hold up to it), those this process's stream reported
        # before the reading too.
        newest = max([*self._positions.values(), *(landed.newest_seq for landed in found)], default=-1)
        owned = [landed for landed in found if self.config.owner(landed.table) is not None]
        self.schedule.read(newest, [(x.table, x.events, x.newest_seq, x.oldest_landed_at) for x in owned])
        self._started = True

    def landed(self, landing: Landing | None) -> RoundResult | None:
        """A landing of this process's stream (None: a batch with nothing to land); the merger only learns
        of it (a :class:`~cdc_delta.stream.batch.LandingListener` whose rounds run elsewhere)."""
        if landing is not None:
            self.schedule.landed(landing.land_seq, landing.landed_at.timestamp(), landing.events_by_table)
        return None

    def landing(self) -> AbstractContextManager[object]:
        """Around one landing of the stream beside it: its merges give way (:mod:`.gate`)."""
        return self.gate.landing()

    def check(self) -> None:
        """Nothing runs apart from the caller here."""

    def poll(self) -> None:
        """Learn of landings made since the last one known (a merger running apart from the stream)."""
        since = self.schedule.newest_seq
        newest = since
        for landed in landed_since(self.spark, self.path, {}, since):
            self.schedule.landed(landed.newest_seq, landed.oldest_landed_at, {landed.table: landed.events})
            newest = max(newest, landed.newest_seq)
        self.schedule.landed(newest, time.time(), {})

    # -- merging ------------------------------------------------------------------------------------

    def stopped_tables(self) -> set[str]:
        return set(self.applier.stopped_tables())

    def round(self, every: bool = False, bounded: bool = True) -> RoundResult | None:
        """Merge the due tables (``every``: every table with pending changes; ``bounded``: at most
        ``merge.max_tables_per_round`` of them); None when none is due."""
        with self._round_lock:
            self.start()
            due = self.schedule.due(time.time(), exclude=self.stopped_tables(), every=every, bounded=bounded)
            if not due:
                return None
            return self._merge(due, self.schedule.newest_seq)

    def merge_tables(self, names: list[str]) -> RoundResult | None:
        """Merge these tables now, whether due or not (those with changes pending and not stopped)."""
        with self._round_lock:
            self.start()
            pending, stopped = self.schedule.pending(), self.stopped_tables()
            chosen = [name for name in names if name in pending and name not in stopped]
            return self._merge(chosen, self.schedule.newest_seq) if chosen else None

    def merge_all(self) -> list[RoundResult]:
        """Rounds until nothing is pending but in stopped tables (the end of ``--until-caught-up``)."""
        return self.run_until(threading.Event(), every=True).results

    def run_until(
        self,
        stop: threading.Event,
        *,
        every: bool = False,
        poll: bool = False,
        wake: threading.Event | None = None,
        observer: RoundObserver | None = None,
    ) -> Rounds:
        """Merge the tables as they become due, round after round, until ``stop`` is set (checked between
        rounds: the round under way finishes). The merger's one loop: beside the stream, as a job of its
        own, and to catch up.

        ``every``: every table with changes pending, until none is left but in stopped tables, then
        return (caught up). ``poll``: learn of landings from the changelog before each round (a merger
        apart from the stream). ``wake``: set when the stream beside it lands, which ends a wait for the
        next due table early. ``observer`` is told of each round (None: nothing was due)."""
        rounds = Rounds()
        while not stop.is_set():
            if observer is not None:
                observer.round_begins()
            if poll:
                self.poll()
            result = self.round(every=every)
            if observer is not None:
                observer.round_done(result)
            if result is not None:
                logger.info("%s", result.summary())
                rounds.results.append(result)
                continue
            if every:
                rounds.caught_up = True
                break
            wait = self.schedule.next_due_in(time.time(), self.stopped_tables())
            (wake or stop).wait(timeout=5.0 if wait is None else min(5.0, max(0.1, wait)))
            if wake is not None:
                wake.clear()
        rounds.seconds = time.monotonic() - rounds.started
        return rounds

    def _merge(self, due: list[str], through: int) -> RoundResult:
        t0 = time.monotonic()
        positions = self._workers.map(self._position, due)
        bounds = {name: (position, through) for name, position in zip(due, positions, strict=True)}
        self.gate.give_way()
        unreadable: list[TableResult] = []
        with jobs_described(self.spark, f"merge through landing {through}: pending changes"):
            while True:
                try:
                    pending = changes(self.spark, self.config, bounds)
                    break
                except SchemasMissing as exc:  # those tables stop alone; the others are read again without them
                    waiting = self.schedule.pending()
                    for name in sorted(exc.tables):
                        events = waiting[name].events if name in waiting else 0
                        unreadable.append(self.applier.stop(self.spark, name, events, exc.reason_for(name)))
                        del bounds[name]
                    due = [name for name in due if name in bounds]
                    if not due:
                        return self._round_result(through, unreadable, t0)
        try:
            work = table_work(self.config.app_id, due, table_summaries(pending.frame), through)
            shared = TableRound(pending.frame, through)

            def apply(session: SparkSession, table: TableChanges) -> TableResult:
                self.gate.give_way()
                with jobs_described(session, f"merge through landing {through}: {table.name}"):
                    return self.applier.apply(session, shared, table)

            results = self._workers.map(apply, work)
        finally:
            pending.release()
        for result in results:
            held = result.merged_through if result.error else through
            if held is not None:
                self.schedule.merged(result.table, held)
                self._positions[result.table] = max(held, self._positions.get(result.table, -1))
        self._save_positions()
        return self._round_result(through, [*unreadable, *results], t0)

    def _round_result(self, through: int, results: list[TableResult], t0: float) -> RoundResult:
        return RoundResult(
            through_seq=through,
            tables=tuple(results),
            duration_s=time.monotonic() - t0,
            pending=self.schedule.pending(),
            finished_at=time.time(),
        )

    def _position(self, spark: SparkSession, name: str) -> int:
        """The newest landing ``name`` holds, from the table the first time (the positions file may lag
        behind it, or a restored table be behind the file), then as this merger kept it."""
        try:
            with jobs_described(spark, f"merge: the position of {name}"):
                return self.applier.merged_position(spark, name)
        except Exception as exc:  # noqa: BLE001 (the table's own failure stops it when it is applied)
            if fails_the_batch(spark, exc):
                raise
            return self._positions.get(name, -1)

    def _save_positions(self) -> None:
        text = json.dumps(dict(sorted(self._positions.items())), separators=(",", ":")) + "\n"
        hadoop_fs.write_text(self.spark, self._positions_file, text)

    def close(self) -> None:
        self._workers.close()
