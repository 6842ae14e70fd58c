"""One micro-batch end to end: decode, route, dedupe, MERGE per table, dead letters, one log line.

:class:`BatchProcessor` is the ``foreachBatch`` function of the stream. It never collects events to
the driver: only counts, offsets, schema descriptors and truncate markers (a few rows) come back
(:mod:`.batch_stats`).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.config import AppConfig
from cdc_delta.events.envelope import DEAD, OK, SKIP, DecodePlan
from cdc_delta.events.ordering import Seq
from cdc_delta.exceptions import CdcDeltaError, ConfigError, TableUnavailable
from cdc_delta.ingest import column_defaults
from cdc_delta.ingest.batch_stats import BatchStats, collect_stats, latest_truncates
from cdc_delta.ingest.dead_letters import dead_letter_rows, write_dead_letters
from cdc_delta.ingest.decode import DecodedBatch, decoder_for
from cdc_delta.ingest.decoded import field, is_dead, is_row_event
from cdc_delta.ingest.dedupe import latest_per_key
from cdc_delta.ingest.delta_tables import (
    TableState,
    apply_schema_plan,
    create_table,
    enable_manifest,
    mark_stopped,
    table_state,
)
from cdc_delta.ingest.merge import Commit, MergeResult, apply_truncate, merge_rows, txn_app_id
from cdc_delta.ingest.results import BatchResult, TableResult
from cdc_delta.ingest.rows import typed_rows
from cdc_delta.ingest.schema_evolution import SchemaPlan, plan_schema
from cdc_delta.ingest.table_registry import TableRegistry, registry_path
from cdc_delta.ingest.table_workers import TableWorkers, fails_the_batch, one_line
from cdc_delta.maintenance.write_hold import hold_path, lock_path, wait_while_held

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Batch:
    """What every table of one micro-batch shares."""

    spark: SparkSession
    decoding: DecodedBatch
    batch_id: int
    started: dt.datetime
    metadata: dict[str, Any]
    """Commit metadata of the whole batch (app, batch id, offsets and source times per partition)."""


@dataclass(frozen=True)
class _TableWork:
    """One table's share of a batch."""

    name: str
    events: int
    descriptors: dict[str, Seq]
    """The distinct ``schema_json`` of its row events, and the earliest event of each."""
    truncates: list[tuple[str | None, str | None, Seq]]
    metadata: dict[str, Any]
    """The batch's commit metadata plus this table's name, event count and newest source time."""


def _table_work(stats: BatchStats, batch_metadata: dict[str, Any]) -> list[_TableWork]:
    return [
        _TableWork(
            name=name,
            events=stats.events_by_table[name],
            descriptors=dict(stats.descriptors[name]),
            truncates=stats.truncates[name],
            metadata={
                **batch_metadata,
                "table": name,
                "events": stats.events_by_table[name],
                "table_max_source_ts_ms": stats.max_ts_by_table.get(name),
            },
        )
        for name in sorted(stats.events_by_table)
    ]


class BatchProcessor:
    """The ``foreachBatch`` function: ``query.foreachBatch(BatchProcessor(config))``."""

    def __init__(self, config: AppConfig, epoch: str | None = None) -> None:
        """``epoch``: the checkpoint's (:mod:`.checkpoint`), part of every transaction id and commit; None
        where there is no checkpoint (a replay of dead letters) or it predates epochs."""
        self.config = config
        self.epoch = epoch or None
        self.plan = DecodePlan.from_config(config)
        # Table schema and stopped flag, read once per table and kept current by this processor's own
        # changes: an operator who alters a table or clears its stopped flag restarts the stream.
        self._states: dict[str, TableState] = {}
        # The last batch id this processor merged per table: a batch id not above it is a replay, and
        # the first batch after a start is checked against the table's commit history.
        self._last_batch: dict[str, int] = {}
        self._lock_file = _maintenance_lock(config)
        self._manifest = config.live_tables.enabled
        self._workers: TableWorkers | None = None
        self._registry_at = registry_path(config)
        self._known: TableRegistry | None = None
        # Keeps the schemas read so far, by id: a batch reads only the schemas new to it.
        self._decode = decoder_for(config, self.plan)

    @property
    def _registry(self) -> TableRegistry:
        assert self._known is not None, "the registry is read at the start of each batch"
        return self._known

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        result = self.process(batch, batch_id)
        logger.info("%s", result.summary())

    def process(self, batch: DataFrame, batch_id: int) -> BatchResult:
        """Apply one batch of Kafka records (columns topic, partition, offset, timestamp, key, value)."""
        started = dt.datetime.now(dt.timezone.utc)
        t0 = time.monotonic()
        decoding = self._decode(batch)
        decoded = decoding.frame
        try:
            stats = collect_stats(decoded)
            if not stats.rows_in:
                return BatchResult(batch_id, duration_s=time.monotonic() - t0)
            metadata = {
                "app_id": self.config.app_id,
                "epoch": self.epoch,
                "batch_id": batch_id,
                "offsets": stats.offsets,
                "max_source_ts_ms": stats.max_source_ts_ms,
                # How far the stream has read on each partition, in source time: tombstone purge
                # waits until every partition is past a tombstone (cdc_delta.maintenance.purge).
                "partition_max_source_ts_ms": {t: dict(p) for t, p in stats.max_ts_by_partition.items()},
            }
            ctx = _Batch(batch.sparkSession, decoding, batch_id, started, metadata)
            if self._known is None:
                self._known = TableRegistry(batch.sparkSession, self._registry_at)
            if self._workers is None:
                self._workers = TableWorkers(batch.sparkSession, self.config.merge_concurrency)
            works = _table_work(stats, metadata)
            tables = self._workers.map(lambda session, work: self._apply_table(ctx, work, session), works)
            parked = [(t.table, t.error or "table stopped") for t in tables if t.parked]
            parked_count = sum(t.parked for t in tables)
            dead_count = stats.by_status[DEAD] + parked_count
            if dead_count:
                self._write_dead_letters(ctx, parked)
            return BatchResult(
                batch_id=batch_id,
                rows_in=stats.rows_in,
                applied=stats.by_status[OK] - parked_count,
                dead_lettered=dead_count,
                skipped=stats.by_status[SKIP],
                skips=dict(stats.skips),
                tables=tuple(tables),
                offsets={t: dict(p) for t, p in stats.offsets.items()},
                max_source_ts_ms=stats.max_source_ts_ms,
                duration_s=time.monotonic() - t0,
                status_by_table={t: dict(c) for t, c in stats.status_by_table.items()},
                max_source_ts_ms_by_table=dict(stats.max_ts_by_table),
            )
        finally:
            decoding.release()

    def _apply_table(self, ctx: _Batch, work: _TableWork, spark: SparkSession) -> TableResult:
        """Follow the table's schema, MERGE its events, apply its truncates, in ``spark`` (a session of
        the table's own while tables are merged concurrently). A table that fails, whatever the error,
        stops alone and its events are parked; only a failure of the process (Spark stopped, the batch
        cancelled) fails the batch."""
        path = self.config.storage.table_path(self.config.table(work.name))
        try:
            return self._write_table(ctx, work, path, spark)
        except Exception as exc:  # noqa: BLE001 (one table's failure, whatever it is, is that table's)
            if fails_the_batch(spark, exc):
                raise
            return self._stop_table(spark, work, path, exc)

    def _write_table(self, ctx: _Batch, work: _TableWork, path: str, spark: SparkSession) -> TableResult:
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
        merge = self._merge(ctx, work, path, state, spark) if work.descriptors else MergeResult(work.name)
        truncated = self._truncate(ctx, work, path, spark)
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

    def _stop_table(self, spark: SparkSession, work: _TableWork, path: str, exc: Exception) -> TableResult:
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
        self, spark: SparkSession, work: _TableWork, path: str, state: TableState, plan: SchemaPlan
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

    def _merge(self, ctx: _Batch, work: _TableWork, path: str, state: TableState, spark: SparkSession) -> MergeResult:
        table = self.config.table(work.name)
        key = list(table.key) + (list(C.SHARD_KEY) if table.key_includes_source else [])
        events = ctx.decoding.frame.where(is_row_event() & (field("table") == work.name))
        rows = typed_rows(events, state.business, ctx.started, state.defaults, list(work.descriptors))
        latest = latest_per_key(rows, key)
        latest = latest.persist(StorageLevel.MEMORY_AND_DISK)
        check_replay = ctx.batch_id <= self._last_batch.get(work.name, -1) or work.name not in self._last_batch
        try:
            commit = Commit(txn_app_id(self.config.app_id, self.epoch, work.name), ctx.batch_id, work.metadata)
            result = merge_rows(
                spark, path, latest, key, dict(state.business), commit, work.name, check_replay=check_replay
            )
        finally:
            latest.unpersist()
        self._last_batch[work.name] = max(ctx.batch_id, self._last_batch.get(work.name, -1))
        return result

    def _truncate(self, ctx: _Batch, work: _TableWork, path: str, spark: SparkSession) -> int:
        """Apply the batch's latest truncate of each source table; returns the rows soft-deleted."""
        truncated = 0
        for (db, tbl), seq in latest_truncates(work.truncates).items():
            # One transaction id per source table: two truncates in a batch are two commits.
            commit = Commit(
                txn_app_id(self.config.app_id, self.epoch, work.name, f"truncate:{db}.{tbl}"),
                ctx.batch_id,
                {**work.metadata, "operation": "truncate", "source": f"{db}.{tbl}"},
            )
            rows, _ = apply_truncate(spark, path, db, tbl, seq, commit)
            truncated += rows
        return truncated

    def _write_dead_letters(self, ctx: _Batch, parked: list[tuple[str, str]]) -> None:
        reason: Column = field("reason")
        selector = is_dead()
        for name, why in parked:
            is_parked = (field("status") == OK) & (field("table") == name)
            reason = F.when(is_parked, F.lit(why)).otherwise(reason)
            selector = selector | is_parked
        records = ctx.decoding.frame.where(selector)
        if parked:  # the JVM path keeps no value of the records it decoded
            records = ctx.decoding.with_values(records)
        rows = dead_letter_rows(records, self.config.app_id, ctx.batch_id, ctx.started, reason)
        txn = txn_app_id(self.config.app_id, self.epoch, "dead-letters")
        write_dead_letters(rows, self.config.storage.dead_letters, txn, ctx.batch_id)


def _maintenance_lock(config: AppConfig) -> str | None:
    """The maintenance lock, beside which maintenance leaves its holds; None where maintenance cannot
    run either (a remote storage root without maintenance.lock_path)."""
    try:
        return lock_path(config)
    except ConfigError:
        return None
