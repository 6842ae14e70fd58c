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
from dataclasses import dataclass
from dataclasses import field as dc_field

from pyspark.sql import SparkSession

from cdc_delta import hadoop_fs
from cdc_delta.changelog.append import Landing
from cdc_delta.changelog.pending import TableSummary, changes, landed_since, table_summaries
from cdc_delta.changelog.table import changelog_path, ensure_tables
from cdc_delta.config import AppConfig
from cdc_delta.delta.commits import StreamCommit
from cdc_delta.delta.workers import TableWorkers, fails_the_batch
from cdc_delta.exceptions import SchemasMissing
from cdc_delta.merger.apply import TableApplier, TableChanges, TableResult, TableRound
from cdc_delta.merger.gate import LandingGate
from cdc_delta.merger.schedule import Pending, Schedule
from cdc_delta.spark_session import jobs_described

logger = logging.getLogger(__name__)

SHOWN_TABLES = 5
"""Merged tables a round's log line names (stopped ones are all named)."""

INTERPRETED = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
"""The merger's sessions evaluate expressions without generating code. Tables differ in shape, so
every table's plans were generated and compiled anew in each task, and that, not the rows, was much of
a round's CPU (a driver profile of a 50-table round: code generation in 44% of the tasks' samples).
Rounds of 50 tables of 400 changes: 86.5-91.7 s -> 64.4-74.1 s (JVM CPU 147-168 s -> 106-129 s); one
table of 100,000 changes no slower (20.4 s -> 18.3-19.6 s); ``bench/merge_rounds.py`` measures it. A
setting the config's ``spark.conf`` names wins (it built the process's Spark context, whose settings
every session takes)."""


def interpreted(config: AppConfig) -> Callable[[SparkSession], None]:
    """Sets :data:`INTERPRETED` on a merger's session, but for what the config's ``spark.conf`` names."""
    chosen = {k: v for k, v in INTERPRETED.items() if k not in config.spark.conf}

    def setup(session: SparkSession) -> None:
        for key, value in chosen.items():
            session.conf.set(key, value)

    return setup


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

    def landed(self, landing: Landing) -> None:
        """A landing of this process's stream."""
        self.schedule.landed(landing.land_seq, landing.landed_at.timestamp(), landing.events_by_table)

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
        results = []
        while (result := self.round(every=True)) is not None:
            results.append(result)
            logger.info("%s", result.summary())
        return results

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


class BackgroundMerging:
    """The merger in a thread of its own beside the ingest: a round whenever a table is due, waiting
    for landings in between. A failure of the process (Spark stopped, memory) ends the thread and is
    raised by :meth:`check`."""

    def __init__(self, merger: Merger, on_round: Callable[[RoundResult], None] | None = None) -> None:
        self.merger = merger
        self.on_round = on_round
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="cdc-merger", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def landed(self, landing: Landing) -> None:
        self.merger.landed(landing)
        self._wake.set()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                result = self.merger.round()
                if result is not None:
                    logger.info("%s", result.summary())
                    if self.on_round is not None:
                        self.on_round(result)
                    continue
                wait = self.merger.schedule.next_due_in(time.time(), self.merger.stopped_tables())
                self._wake.wait(timeout=5.0 if wait is None else min(5.0, max(0.1, wait)))
                self._wake.clear()
        except BaseException as exc:  # noqa: BLE001 (raised on the stream's thread by check())
            self._error = exc
            logger.error("the merger stopped: %s", exc)

    def check(self) -> None:
        """Raise the error that ended the merger's thread, if one did."""
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        """Stop after the running round."""
        self._stop.set()
        self._wake.set()
        self._thread.join()
