"""Applying one table's pending changes in a merge round: follow its schema, MERGE its changes (typed,
the latest per key, its truncates in the same commit). A table that fails, whatever the error, stops
alone with the reason: its changes stay pending in the changelog until an operator resumes it; a table
deleted or replaced under the stream stops likewise (the registry, :mod:`cdc_delta.delta.registry`).
Only a failure of the process (:func:`~cdc_delta.delta.workers.fails_the_batch`) fails the round."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_delta.catalog import TableCatalog
from cdc_delta.changelog.pending import LANDED_AT, Truncate
from cdc_delta.changelog.table import LAND_SEQ
from cdc_delta.changelog.table_index import indexed
from cdc_delta.config import AppConfig, KeyNotKnown, TableConfig
from cdc_delta.decode.decoded import field, is_dead, is_row_event
from cdc_delta.delta import stop_records
from cdc_delta.delta.commits import Commit, StreamCommit, merge_txn_app_id, merged_through, txn_app_id, txn_version
from cdc_delta.delta.dead_letters import dead_letter_rows, write_dead_letters
from cdc_delta.delta.hold import stream_hold, wait_while_held
from cdc_delta.delta.registry import TableRegistry, registry_path
from cdc_delta.delta.tables import create_table, enable_manifest, known_empty, mark_stopped
from cdc_delta.delta.workers import fails_the_batch
from cdc_delta.events.ordering import Seq
from cdc_delta.exceptions import CdcDeltaError, SchemaChangeError, TableUnavailable, one_line
from cdc_delta.history import append as history
from cdc_delta.merger.merge import merge_rows
from cdc_delta.merger.results import MergeResult, TableResult
from cdc_delta.rows import column_defaults
from cdc_delta.rows.archival import archived_where, check_where
from cdc_delta.rows.dedupe import latest_per_key
from cdc_delta.rows.schema_evolution import SchemaPlan, plan_in_order
from cdc_delta.rows.target import TableState, apply_schema_plan, table_state
from cdc_delta.rows.truncates import segments
from cdc_delta.rows.typed_rows import typed_rows

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableRound:
    """What every table of one merge round shares."""

    changes: DataFrame
    """The round's pending changes (:func:`cdc_delta.changelog.pending.changes`), held (read once)."""
    through_seq: int
    """The newest landing the round merges: each table's commit holds every landing up to it (but a
    table stopped partway, at a schema change it cannot follow: :attr:`TableResult.merged_through`)."""


@dataclass(frozen=True)
class TableChanges:
    """One table's share of a round."""

    name: str
    events: int
    descriptors: dict[str, Seq]
    """The distinct ``schema_json`` of its row changes, and the earliest change of each."""
    truncates: list[Truncate]
    record: StreamCommit
    """What its commit records: this table's name, landing, changes and newest source time."""
    dead: int = 0
    """Of its changes, those the reference decoder refused where their images were made canonical
    (:mod:`cdc_delta.decode.canonical`): they go to the dead letters, not into the table."""
    first_landings: dict[str, int] = dataclasses.field(default_factory=dict)
    """The landing of each descriptor's first change (where a schema change begins)."""


class TableApplier:
    """Applies tables' pending changes round after round, keeping what it learnt of each table (schema,
    stopped flag, the newest landing it holds) between rounds; thread-safe per table (the table workers
    give each table to one thread). :attr:`catalog` is replaced whole when the table index is read again
    (:meth:`table`): a thread reads it once per lookup."""

    def __init__(self, spark: SparkSession, config: AppConfig) -> None:
        self.config = config
        self.catalog = TableCatalog(config)
        # Table schema and stopped flag, read once per table and kept current by this applier's own
        # changes: an operator who alters a table or clears its stopped flag restarts the stream.
        self._states: dict[str, TableState] = {}
        self._stopped: dict[str, str] = {}
        # The newest landing each table holds, read from the table once, then kept by this applier.
        self._merged: dict[str, int] = {}
        # The newest landing each table's history holds (a table with ``history``), likewise.
        self._history: dict[str, int] = {}
        self._manifest = config.live_tables.enabled
        self._registry = TableRegistry(spark, registry_path(config))
        check_where(spark, config)

    def table(self, spark: SparkSession, name: str) -> TableConfig:
        """The table named ``name``; the table index is read again for a table made since this applier
        last read it (whose key comes from Debezium's record key, which the index keeps)."""
        try:
            return self.catalog.table(name)
        except KeyNotKnown:
            known = self.catalog = indexed(spark, self.config)  # whole: another thread may read it meanwhile
            return known.table(name)

    def stopped_tables(self) -> dict[str, str]:
        """The tables stopped in this process, with why."""
        return dict(self._stopped)

    def merged_position(self, spark: SparkSession, name: str) -> int:
        """The newest landing the table holds (-1: none, or no table yet)."""
        if name not in self._merged:
            path = self.config.table_path(name)
            recorded = stop_records.recorded(self.config, name)
            if recorded is not None:  # stopped where the table could not hold its flag: not read again
                self._states[path] = TableState(True, stopped=True, stopped_reason=recorded)
                self._stopped[name] = recorded
                self._merged[name] = -1
                return -1
            state = self._states.get(path) or self._read_state(spark, name, path)
            self._states[path] = state
            if state.stopped:
                self._stopped[name] = state.stopped_reason or f"table {name} is stopped (cdc_delta.stopped)"
            self._merged[name] = merged_through(spark, path, self.config.app_id, name) if state.exists else -1
        return self._merged[name]

    def apply(self, spark: SparkSession, batch: TableRound, work: TableChanges) -> TableResult:
        """Follow the table's schema and MERGE its pending changes, in ``spark`` (a session of the
        table's own while tables are merged concurrently). A table that fails, whatever the error,
        stops alone; only a failure of the process fails the round."""
        path = self.config.table_path(work.name)
        try:
            return self._write_table(batch, work, path, spark)
        except Exception as exc:  # noqa: BLE001 (one table's failure, whatever it is, is that table's)
            if fails_the_batch(spark, exc):
                raise
            return self._stop_table(spark, work, path, exc)

    def _write_table(self, batch: TableRound, work: TableChanges, path: str, spark: SparkSession) -> TableResult:
        position = self.merged_position(spark, work.name)
        state = self._states[path]
        if state.stopped:
            reason = self._stopped[work.name]
            return TableResult(work.name, work.events, error=reason)
        if position >= batch.through_seq:
            return TableResult(work.name, 0, merge=MergeResult(work.name, replayed=True))
        dead = self._dead_letters(spark, batch, work) if work.dead else 0
        if not state.exists and not work.descriptors:
            self._merged[work.name] = batch.through_seq
            return TableResult(work.name, work.events, dead=dead)  # no row: truncates, or dead letters
        self.table(spark, work.name)  # a key not known stops the table before anything is written
        # Schema changes are followed landing by landing: one the table cannot follow stops it after the
        # landings before it are merged (none before it: it stops here, nothing written).
        landings = {d: work.first_landings.get(d, position + 1) for d in work.descriptors}
        ordered = plan_in_order(work.name, state.business, landings, self.config.allow_type_widening)
        through = batch.through_seq if ordered.through is None else ordered.through
        if ordered.error is not None:  # merged through the landing before the refused one: its record says so
            held, left, newest = self._split_at(batch, work.name, through)
            work = dataclasses.replace(
                work,
                events=held,
                descriptors={d: work.descriptors[d] for d in ordered.covers(landings)},
                record=work.record.for_table(work.name, held, newest),
            )
        plan = ordered.plan
        hold = stream_hold(self.config, work.name)
        if state.exists and hold is not None:  # maintenance may be holding writes so that it can commit
            wait_while_held(hold, work.name)
        if state.exists and self._manifest and not state.manifest:  # a table from before live_tables.enabled
            enable_manifest(spark, path)
        created = not state.exists
        state = self._states[path] = self._follow_schema(spark, work, path, state, plan)
        merge = self._merge(batch, work, path, state, spark, position, created, through)
        self._merged[work.name] = through
        if ordered.error is None:
            return TableResult(work.name, work.events, merge=merge, dead=dead)
        merged = f"Its changes landed before that change are merged (through landing {through})."
        refused = SchemaChangeError(f"{ordered.error} {merged}")
        stopped = self._stop_table(spark, dataclasses.replace(work, events=left), path, refused)
        return dataclasses.replace(
            stopped, merge=merge, dead=dead, merged_through=through, merged_events=held, refused=str(ordered.error)
        )

    @staticmethod
    def _split_at(batch: TableRound, name: str, through: int) -> tuple[int, int, int | None]:
        """(the table's changes in the round up to landing ``through``, those after it, the newest source
        time of the first), in one job."""
        held = F.col(LAND_SEQ) <= through
        split = (
            batch.changes.where(field("table") == name)
            .agg(
                F.count_if(held).alias("held"),
                F.count_if(~held).alias("left"),
                F.max(F.when(held, field("source_ts_ms"))).alias("newest"),
            )
            .collect()[0]
        )
        return int(split["held"]), int(split["left"]), split["newest"]

    def _dead_letters(self, spark: SparkSession, batch: TableRound, work: TableChanges) -> int:
        """The table's changes the reference refused, with their records rebuilt, to the dead letters
        before its merge, each once: the dead letters record, per table, the newest landing whose
        refused changes they hold (a transaction id), and only newer ones are appended (a round run
        again, a table resumed or rebuilt append nothing twice). Returns how many were appended."""
        path = self.config.storage.dead_letters
        txn = txn_app_id(self.config.app_id, None, work.name, "dead-letters")
        held = txn_version(spark, path, txn)
        rows = batch.changes.where(is_dead() & (field("table") == work.name) & (F.col(LAND_SEQ) > held))
        found = rows.agg(F.count(F.lit(1)).alias("n"), F.max(LAND_SEQ).alias("newest")).collect()[0]
        if not found["n"]:
            return 0
        at = dt.datetime.now(dt.timezone.utc)
        letters = dead_letter_rows(rows, self.config.app_id, F.col("batch_id"), at, field("reason"))
        write_dead_letters(letters, path, txn, found["newest"])  # a race lost is retried there
        logger.warning(
            "table %s: %d changes could not be read where merged; they are in the dead letters (%s), with why",
            work.name,
            found["n"],
            path,
        )
        return int(found["n"])

    def _read_state(self, spark: SparkSession, name: str, path: str) -> TableState:
        """The table as it is now, checked against the registry (:class:`TableUnavailable` when it was
        deleted or replaced under the stream); a table written before the registry existed is registered."""
        state = table_state(spark, path)
        self._registry.check(name, path, state.table_id)
        if state.table_id is not None and self._registry.get(name) is None:
            self._registry.register(name, path, state.table_id)
        return state

    def _create(self, spark: SparkSession, name: str, path: str, business: tuple[tuple[str, str], ...]) -> None:
        table_id = create_table(spark, path, business, self._manifest)
        self._registry.register(name, path, table_id)

    def stop(self, spark: SparkSession, name: str, events: int, reason: str) -> TableResult:
        """Stop the table ``name`` before its changes are applied (they cannot be read: ``reason``)."""
        record = StreamCommit(app_id=self.config.app_id, table=name, events=events)
        work = TableChanges(name, events, {}, [], record)
        return self._stop_table(spark, work, self.config.table_path(name), CdcDeltaError(reason))

    def _stop_table(self, spark: SparkSession, work: TableChanges, path: str, exc: Exception) -> TableResult:
        """Stop the table with the reason (a table property, where the table can hold one); its changes
        stay pending in the changelog until an operator resumes it."""
        if isinstance(exc, CdcDeltaError):  # says what to do already
            reason = str(exc)
        else:
            reason = (
                f"table {work.name} failed: {one_line(exc)}. The table is stopped and its changes stay pending "
                f"in the changelog; fix the cause, then `cdc-delta resume-table --table {work.name}` and restart "
                "the stream: it merges them"
            )
        if not isinstance(exc, TableUnavailable):
            try:
                self._read_state(spark, work.name, path)  # a write that failed on a table deleted under it
            except TableUnavailable as gone:
                reason = str(gone)
            except Exception:  # noqa: BLE001 (the table's own failure is the reason given)
                logger.debug("table %s: state not readable after its failure", work.name, exc_info=True)
                self._record_stop(work.name, reason)
            else:
                self._mark_stopped(spark, work.name, path, reason)
        logger.error("%s (%d changes pending)", reason, work.events)
        self._states[path] = TableState(True, stopped=True, stopped_reason=reason)
        self._stopped[work.name] = reason
        return TableResult(work.name, work.events, error=reason)

    def _mark_stopped(self, spark: SparkSession, name: str, path: str, reason: str) -> None:
        """Flag the table as stopped (a table that does not exist yet is created empty to hold the flag);
        where even that fails, the table stays stopped for this process only."""
        try:
            if not table_state(spark, path).exists:
                self._create(spark, name, path, ())
            mark_stopped(spark, path, reason)
        except Exception as exc:  # noqa: BLE001 (its changes stay pending either way)
            if fails_the_batch(spark, exc):
                raise
            logger.debug("table %s: cannot flag it stopped: %s", name, one_line(exc))
            self._record_stop(name, reason)

    def _record_stop(self, name: str, reason: str) -> None:
        """Record the stop in the lake (:mod:`~cdc_delta.delta.stop_records`) where the table cannot hold it;
        where even that fails, the table stays stopped for this process only."""
        try:
            stop_records.record(self.config, name, reason)
        except Exception as exc:  # noqa: BLE001 (its changes stay pending either way)
            logger.error(
                "table %s: cannot record that it is stopped (%s); it stops until restarted", name, one_line(exc)
            )

    def _follow_schema(
        self, spark: SparkSession, work: TableChanges, path: str, state: TableState, plan: SchemaPlan
    ) -> TableState:
        """Create the table, or add and widen its columns; columns added at the source with a default
        get it on the rows that predate them (recorded first, so that a crash is finished on restart)."""
        if not state.exists:
            self._create(spark, work.name, path, plan.columns)
            created = column_defaults.added_defaults(plan, work.descriptors, filled=True)  # no older rows
            if created:
                column_defaults.save(spark, path, created)
            return TableState(True, plan.columns, defaults=created, manifest=self._manifest)
        added = column_defaults.added_defaults(plan, work.descriptors, filled=False)
        defaults = {**state.defaults, **added}
        if added:
            column_defaults.save(spark, path, defaults)
        if plan.changed:
            apply_schema_plan(spark, path, plan, self.config.type_widening)
        if self.table(spark, work.name).history is not None:
            history.backfill_defaults(spark, self.config, work.name, dict(plan.columns), defaults)
        defaults = column_defaults.finish(spark, path, dict(plan.columns), defaults)
        return TableState(True, plan.columns, defaults=defaults, manifest=self._manifest)

    def _merge(
        self,
        batch: TableRound,
        work: TableChanges,
        path: str,
        state: TableState,
        spark: SparkSession,
        position: int,
        created: bool,
        through: int,
    ) -> MergeResult:
        """MERGE the table's changes past ``position`` up to landing ``through``: one commit, or one per
        segment where truncates split them (:func:`~.truncates.segments`), each recording the landing it
        holds up to. The first segment into a table this round ``created`` is inserted
        (:func:`~.merge.merge_rows`'s ``empty``) where the table is known to hold no file yet."""
        table = self.table(spark, work.name)
        key = table.row_key
        events = batch.changes.where(is_row_event() & (field("table") == work.name))

        def typed(landed: DataFrame) -> DataFrame:
            rows = typed_rows(landed, state.business, F.col(LANDED_AT), state.defaults, list(work.descriptors))
            return archived_where(rows, table.archival_deletes)

        results: list[MergeResult] = []
        for segment in segments(work.truncates, position, through):
            landed = events.where((F.col(LAND_SEQ) > segment.after) & (F.col(LAND_SEQ) <= segment.through))
            rows = typed(landed)
            if table.history is not None:  # the history's append and the MERGE read the changes typed once
                rows = rows.persist(StorageLevel.MEMORY_AND_DISK)
            latest: DataFrame | None = None
            try:
                held = self._history_held(spark, work.name, position) if table.history is not None else segment.through
                if held < segment.through:  # appended before the MERGE; a round cut otherwise after a crash
                    # finds part of the segment held: only the landings past it
                    changes = rows if held <= segment.after else typed(landed.where(F.col(LAND_SEQ) > held))
                    history.append_segment(spark, self.config, work.name, changes, segment, work.truncates)
                    self._history[work.name] = segment.through
                latest = latest_per_key(rows, key).persist(StorageLevel.MEMORY_AND_DISK)
                record = dataclasses.replace(work.record, land_seq=segment.through).as_operation("merge")
                commit = Commit(merge_txn_app_id(self.config.app_id, work.name), segment.through, record)
                empty = created and not results and known_empty(spark, path)
                results.append(
                    merge_rows(
                        spark, path, latest, key, dict(state.business), commit, work.name, segment.truncates, empty
                    )
                )
            finally:
                if latest is not None:
                    latest.unpersist()
                if table.history is not None:  # persisted above (an uncached frame's unpersist still looks)
                    rows.unpersist()
        return _combined(work.name, results)

    def _history_held(self, spark: SparkSession, name: str, position: int) -> int:
        """The newest landing the table's history holds (:mod:`cdc_delta.history.append`), read once; a
        history that starts after the table (turned on for a table with rows) is seeded from its rows,
        which hold ``position``."""
        if name not in self._history:
            self._history[name] = history.held(spark, self.config, name)
        if self._history[name] < position:
            history.seed(spark, self.config, name, position)
            self._history[name] = position
        return self._history[name]


def _combined(table: str, results: list[MergeResult]) -> MergeResult:
    """One table's merges of a round as one result (its last commit's version)."""
    if not results:
        return MergeResult(table, replayed=True)
    return MergeResult(
        table=table,
        source_rows=sum(r.source_rows for r in results),
        inserted=sum(r.inserted for r in results),
        updated=sum(r.updated for r in results),
        truncated=sum(r.truncated for r in results),
        version=results[-1].version,
        replayed=all(r.replayed for r in results),
    )
