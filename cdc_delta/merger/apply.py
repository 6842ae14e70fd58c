"""Applying one table's changes of a batch: follow its schema, MERGE its events (typed, the latest per
key), apply its truncates. A table that fails, whatever the error, stops alone: its events are parked
with the reason (the caller writes them to the dead letters) and later batches park them too, until an
operator resumes it; a table deleted or replaced under the stream stops likewise (the registry,
:mod:`cdc_delta.delta.registry`). Only a failure of the process fails the batch
(:func:`~cdc_delta.delta.workers.fails_the_batch`)."""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from cdc_delta import columns as C
from cdc_delta.config import AppConfig
from cdc_delta.decode.decoded import field, is_row_event
from cdc_delta.delta.commits import Commit, StreamCommit, txn_app_id
from cdc_delta.delta.hold import hold_path, wait_while_held
from cdc_delta.delta.registry import TableRegistry, registry_path
from cdc_delta.delta.tables import create_table, enable_manifest, mark_stopped
from cdc_delta.delta.workers import fails_the_batch, one_line
from cdc_delta.events.ordering import Seq
from cdc_delta.exceptions import CdcDeltaError, ConfigError, TableUnavailable
from cdc_delta.lock import lock_path
from cdc_delta.merger import column_defaults
from cdc_delta.merger.dedupe import latest_per_key
from cdc_delta.merger.merge import MergeResult, apply_truncate, merge_rows
from cdc_delta.merger.rows import typed_rows
from cdc_delta.merger.schema_evolution import SchemaPlan, plan_schema
from cdc_delta.merger.target import TableState, apply_schema_plan, table_state

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableBatch:
    """What every table of one batch shares."""

    events: DataFrame
    """The batch's decoded records (:mod:`cdc_delta.decode.decoded`)."""
    batch_id: int
    started: dt.datetime


@dataclass(frozen=True)
class TableChanges:
    """One table's share of a batch."""

    name: str
    events: int
    descriptors: dict[str, Seq]
    """The distinct ``schema_json`` of its row events, and the earliest event of each."""
    truncates: list[tuple[str | None, str | None, Seq]]
    record: StreamCommit
    """What its commits record: the batch's positions, this table's name, events and newest time."""


@dataclass(frozen=True)
class TableResult:
    """What a batch did to one table."""

    table: str
    events: int
    merge: MergeResult | None = None
    truncated: int = 0
    parked: int = 0
    error: str | None = None


def latest_truncates(truncates: list[tuple[str | None, str | None, Seq]]) -> dict[tuple[str | None, str | None], Seq]:
    """The latest truncate of each source table."""
    latest: dict[tuple[str | None, str | None], Seq] = {}
    for db, tbl, seq in truncates:
        if (db, tbl) not in latest or seq > latest[(db, tbl)]:
            latest[(db, tbl)] = seq
    return latest


class TableApplier:
    """Applies tables' changes batch after batch, keeping what it learnt of each table (schema, stopped
    flag, the last batch merged) between batches; thread-safe per table (the table workers give each
    table to one thread)."""

    def __init__(self, spark: SparkSession, config: AppConfig, epoch: str | None = None) -> None:
        """``epoch``: the checkpoint's (:mod:`cdc_delta.stream.checkpoint`), part of every transaction id
        and commit; None where there is no checkpoint (a replay of dead letters) or it predates epochs."""
        self.config = config
        self.epoch = epoch or None
        # Table schema and stopped flag, read once per table and kept current by this applier's own
        # changes: an operator who alters a table or clears its stopped flag restarts the stream.
        self._states: dict[str, TableState] = {}
        # The last batch id merged per table: a batch id not above it is a replay, and the first batch
        # after a start is checked against the table's commit history.
        self._last_batch: dict[str, int] = {}
        self._lock_file = _maintenance_lock(config)
        self._manifest = config.live_tables.enabled
        self._registry = TableRegistry(spark, registry_path(config))

    def apply(self, spark: SparkSession, batch: TableBatch, work: TableChanges) -> TableResult:
        """Follow the table's schema, MERGE its events, apply its truncates, in ``spark`` (a session of
        the table's own while tables are applied concurrently). A table that fails, whatever the error,
        stops alone and its events are parked; only a failure of the process (Spark stopped, the batch
        cancelled) fails the batch."""
        path = self.config.storage.table_path(self.config.table(work.name))
        try:
            return self._write_table(batch, work, path, spark)
        except Exception as exc:  # noqa: BLE001 (one table's failure, whatever it is, is that table's)
            if fails_the_batch(spark, exc):
                raise
            return self._stop_table(spark, work, path, exc)

    def _write_table(self, batch: TableBatch, work: TableChanges, path: str, spark: SparkSession) -> TableResult:
        state = self._states.get(path) or self._read_state(spark, work.name, path)
        if state.stopped:
            reason = state.stopped_reason or f"table {work.name} is stopped (table property cdc_delta.stopped)"
            logger.error("%s (%d events parked)", reason, work.events)
            return TableResult(work.name, work.events, parked=work.events, error=reason)
        if not state.exists and not work.descriptors:
            return TableResult(work.name, work.events)  # only truncates of a table that holds nothing yet
        plan = plan_schema(work.name, state.business, list(work.descriptors), self.config.allow_type_widening)
        if state.exists and self._lock_file:  # maintenance may be holding writes so that it can commit
            wait_while_held(hold_path(self._lock_file, work.name), work.name)
        if state.exists and self._manifest and not state.manifest:  # a table from before live_tables.enabled
            enable_manifest(spark, path)
        state = self._states[path] = self._follow_schema(spark, work, path, state, plan)
        merge = self._merge(batch, work, path, state, spark) if work.descriptors else MergeResult(work.name)
        truncated = self._truncate(batch, work, path, spark)
        return TableResult(work.name, work.events, merge=merge, truncated=truncated)

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

    def _stop_table(self, spark: SparkSession, work: TableChanges, path: str, exc: Exception) -> TableResult:
        """Stop the table with the reason (a table property, where the table can hold one) and park its
        events; later batches park them too, until an operator resumes it."""
        if isinstance(exc, CdcDeltaError):  # says what to do already
            reason = str(exc)
        else:
            reason = (
                f"table {work.name} failed: {one_line(exc)}. The table is stopped and its events are parked in the "
                f"dead letters; fix the cause, then `cdc-delta resume-table --table {work.name}` and "
                f"`cdc-delta replay-dead-letters --table {work.name}`"
            )
        if not isinstance(exc, TableUnavailable):
            try:
                self._read_state(spark, work.name, path)  # a write that failed on a table deleted under it
            except TableUnavailable as gone:
                reason = str(gone)
            except Exception:  # noqa: BLE001 (the table's own failure is the reason given)
                logger.debug("table %s: state not readable after its failure", work.name, exc_info=True)
            else:
                self._mark_stopped(spark, work.name, path, reason)
        logger.error("%s (%d events parked)", reason, work.events)
        self._states[path] = TableState(True, stopped=True, stopped_reason=reason)
        return TableResult(work.name, work.events, parked=work.events, error=reason)

    def _mark_stopped(self, spark: SparkSession, name: str, path: str, reason: str) -> None:
        """Flag the table as stopped (a table that does not exist yet is created empty to hold the flag);
        where even that fails, the table stays stopped for this process only."""
        try:
            if not table_state(spark, path).exists:
                self._create(spark, name, path, ())
            mark_stopped(spark, path, reason)
        except Exception as exc:  # noqa: BLE001 (the events are parked either way)
            if fails_the_batch(spark, exc):
                raise
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
        defaults = column_defaults.finish(spark, path, dict(plan.columns), defaults)
        return TableState(True, plan.columns, defaults=defaults, manifest=self._manifest)

    def _merge(
        self, batch: TableBatch, work: TableChanges, path: str, state: TableState, spark: SparkSession
    ) -> MergeResult:
        table = self.config.table(work.name)
        key = list(table.key) + (list(C.SHARD_KEY) if table.key_includes_source else [])
        events = batch.events.where(is_row_event() & (field("table") == work.name))
        rows = typed_rows(events, state.business, batch.started, state.defaults, list(work.descriptors))
        latest = latest_per_key(rows, key)
        latest = latest.persist(StorageLevel.MEMORY_AND_DISK)
        check_replay = batch.batch_id <= self._last_batch.get(work.name, -1) or work.name not in self._last_batch
        try:
            commit = Commit(txn_app_id(self.config.app_id, self.epoch, work.name), work.record)
            result = merge_rows(
                spark, path, latest, key, dict(state.business), commit, work.name, check_replay=check_replay
            )
        finally:
            latest.unpersist()
        self._last_batch[work.name] = max(batch.batch_id, self._last_batch.get(work.name, -1))
        return result

    def _truncate(self, batch: TableBatch, work: TableChanges, path: str, spark: SparkSession) -> int:
        """Apply the batch's latest truncate of each source table; returns the rows soft-deleted."""
        truncated = 0
        for (db, tbl), seq in latest_truncates(work.truncates).items():
            # One transaction id per source table: two truncates in a batch are two commits.
            commit = Commit(
                txn_app_id(self.config.app_id, self.epoch, work.name, f"truncate:{db}.{tbl}"),
                work.record.as_operation("truncate", f"{db}.{tbl}"),
            )
            rows, _ = apply_truncate(spark, path, db, tbl, seq, commit)
            truncated += rows
        return truncated


def _maintenance_lock(config: AppConfig) -> str | None:
    """The maintenance lock, beside which maintenance leaves its holds; None where maintenance cannot
    run either (a remote storage root without maintenance.lock_path)."""
    try:
        return lock_path(config, "maintenance")
    except ConfigError:
        return None
