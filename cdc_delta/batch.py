"""One micro-batch end to end: decode, route, dedupe, MERGE per table, dead letters, one log line.

:class:`BatchProcessor` is the ``foreachBatch`` function of the stream. It never collects events to
the driver: only counts, offsets, schema descriptors and truncate markers (a few rows) come back.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import defaultdict
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.config import AppConfig
from cdc_delta.dead_letters import dead_letter_rows, write_dead_letters
from cdc_delta.decode import decode_batch, field, is_dead, is_row_event, is_tombstone, is_truncate
from cdc_delta.dedupe import latest_per_key
from cdc_delta.delta_tables import TableState, apply_schema_plan, create_table, mark_stopped, table_state
from cdc_delta.envelope import DEAD, OK, SKIP, DecodePlan
from cdc_delta.exceptions import ConfigError, SchemaChangeError
from cdc_delta.maintenance import lock_path
from cdc_delta.merge import Commit, MergeResult, apply_truncate, merge_rows
from cdc_delta.ordering import Seq
from cdc_delta.rows import typed_rows
from cdc_delta.schema_evolution import SchemaPlan, plan_schema
from cdc_delta.write_hold import hold_path, wait_while_held

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableResult:
    """What a batch did to one table."""

    table: str
    events: int
    merge: MergeResult | None = None
    truncated: int = 0
    parked: int = 0
    error: str | None = None


@dataclass(frozen=True)
class BatchResult:
    """Counts of one micro-batch. Always: rows_in == applied + dead_lettered + skipped."""

    batch_id: int
    rows_in: int = 0
    applied: int = 0
    dead_lettered: int = 0
    skipped: int = 0
    tombstones: int = 0
    tables: tuple[TableResult, ...] = ()
    offsets: dict[str, dict[str, int]] = dc_field(default_factory=dict)
    max_source_ts_ms: int | None = None
    duration_s: float = 0.0

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
            f"{self.dead_lettered} dead-lettered, {self.skipped} skipped ({self.tombstones} tombstones)"
            f" [{'; '.join(parts)}] in {self.duration_s:.1f}s{lag}"
        )


@dataclass
class _Stats:
    rows_in: int = 0
    by_status: dict[str, int] = dc_field(default_factory=lambda: defaultdict(int))
    tombstones: int = 0
    events_by_table: dict[str, int] = dc_field(default_factory=lambda: defaultdict(int))
    offsets: dict[str, dict[str, int]] = dc_field(default_factory=lambda: defaultdict(dict))
    max_ts_by_table: dict[str, int] = dc_field(default_factory=dict)
    max_ts_by_partition: dict[str, dict[str, int]] = dc_field(default_factory=lambda: defaultdict(dict))
    descriptors: dict[str, set[str]] = dc_field(default_factory=lambda: defaultdict(set))
    truncates: dict[str, list[tuple[str | None, str | None, Seq]]] = dc_field(default_factory=lambda: defaultdict(list))

    @property
    def max_source_ts_ms(self) -> int | None:
        return max(self.max_ts_by_table.values(), default=None)


def _collect_stats(decoded: DataFrame) -> _Stats:
    """Counts, offsets, schema descriptors and truncate markers of a batch, in one small Spark job."""
    truncate = F.when(is_truncate(), F.struct(field("source_db"), field("source_table"), field("seq")))
    rows = (
        decoded.groupBy(
            "topic",
            "partition",
            field("status").alias("status"),
            field("table").alias("table"),
            is_tombstone().alias("tombstone"),
        )
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.max("offset").alias("max_offset"),
            F.max(field("source_ts_ms")).alias("max_ts"),
            F.collect_set(F.when(is_row_event(), field("schema_json"))).alias("schemas"),
            F.collect_set(truncate).alias("truncates"),
        )
        .collect()
    )
    stats = _Stats()
    for r in rows:
        stats.rows_in += r["n"]
        stats.by_status[r["status"]] += r["n"]
        stats.tombstones += r["n"] if r["tombstone"] else 0
        partition = str(r["partition"])
        stats.offsets[r["topic"]][partition] = max(stats.offsets[r["topic"]].get(partition, -1), r["max_offset"])
        if r["max_ts"] is not None:
            seen = stats.max_ts_by_partition[r["topic"]]
            seen[partition] = max(seen.get(partition, 0), r["max_ts"])
        if r["status"] == OK and r["table"] is not None:
            table = r["table"]
            stats.events_by_table[table] += r["n"]
            stats.descriptors[table].update(r["schemas"])
            stats.truncates[table] += [(t[0], t[1], Seq(*t[2])) for t in r["truncates"]]
            if r["max_ts"] is not None:
                stats.max_ts_by_table[table] = max(stats.max_ts_by_table.get(table, 0), r["max_ts"])
    return stats


class BatchProcessor:
    """The ``foreachBatch`` function: ``query.foreachBatch(BatchProcessor(config))``."""

    def __init__(self, config: AppConfig) -> None:
        self.config = config
        self.plan = DecodePlan.from_config(config)
        # Table schema and stopped flag, read once per table and kept current by this processor's own
        # changes: an operator who alters a table or clears its stopped flag restarts the stream.
        self._states: dict[str, TableState] = {}
        # The last batch id this processor merged per table: a batch id not above it is a replay, and
        # the first batch after a start is checked against the table's commit history.
        self._last_batch: dict[str, int] = {}
        self._lock_file = _maintenance_lock(config)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        result = self.process(batch, batch_id)
        logger.info("%s", result.summary())

    def process(self, batch: DataFrame, batch_id: int) -> BatchResult:
        """Apply one batch of Kafka records (columns topic, partition, offset, timestamp, key, value)."""
        started = dt.datetime.now(dt.timezone.utc)
        t0 = time.monotonic()
        spark = batch.sparkSession
        decoded = decode_batch(batch, self.plan).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            stats = _collect_stats(decoded)
            if not stats.rows_in:
                return BatchResult(batch_id, duration_s=time.monotonic() - t0)
            base = {
                "app_id": self.config.app_id,
                "batch_id": batch_id,
                "offsets": stats.offsets,
                "max_source_ts_ms": stats.max_source_ts_ms,
                # How far the stream has read on each partition, in source time: tombstone purge
                # waits until every partition is past a tombstone (cdc_delta.maintenance).
                "partition_max_source_ts_ms": {t: dict(p) for t, p in stats.max_ts_by_partition.items()},
            }
            tables = []
            parked: list[tuple[str, str]] = []
            for name in sorted(stats.events_by_table):
                meta = {
                    **base,
                    "table": name,
                    "events": stats.events_by_table[name],
                    "table_max_source_ts_ms": stats.max_ts_by_table.get(name),
                }
                result = self._apply_table(
                    spark,
                    decoded,
                    name,
                    sorted(stats.descriptors[name]),
                    stats.truncates[name],
                    batch_id,
                    meta,
                    started,
                )
                if result.parked:
                    parked.append((name, result.error or "table stopped"))
                tables.append(result)
            parked_count = sum(t.parked for t in tables)
            dead_count = stats.by_status[DEAD] + parked_count
            if dead_count:
                self._write_dead_letters(decoded, parked, batch_id, started)
            return BatchResult(
                batch_id=batch_id,
                rows_in=stats.rows_in,
                applied=stats.by_status[OK] - parked_count,
                dead_lettered=dead_count,
                skipped=stats.by_status[SKIP],
                tombstones=stats.tombstones,
                tables=tuple(tables),
                offsets={t: dict(p) for t, p in stats.offsets.items()},
                max_source_ts_ms=stats.max_source_ts_ms,
                duration_s=time.monotonic() - t0,
            )
        finally:
            decoded.unpersist()

    def _apply_table(
        self,
        spark: SparkSession,
        decoded: DataFrame,
        name: str,
        descriptors: list[str],
        truncates: list[tuple[str | None, str | None, Seq]],
        batch_id: int,
        meta: dict[str, Any],
        started: dt.datetime,
    ) -> TableResult:
        table = self.config.table(name)
        path = self.config.storage.table_path(table)
        events = meta["events"]
        state = self._states.get(path) or table_state(spark, path)
        if not state.exists and not descriptors:
            return TableResult(name, events)  # only truncates of a table that holds nothing yet
        if state.stopped:
            reason = (
                f"table {name} is stopped (table property cdc_delta.stopped=true) after an "
                "incompatible schema change; event parked for replay"
            )
            logger.error("%s: %d events parked", reason, events)
            return TableResult(name, events, parked=events, error=reason)
        try:
            plan = plan_schema(name, state.business, descriptors, self.config.allow_type_widening)
        except SchemaChangeError as exc:
            logger.error("%s", exc)
            if not state.exists:
                create_table(spark, path, ())
            mark_stopped(spark, path)
            self._states[path] = TableState(True, state.business, stopped=True)
            return TableResult(name, events, parked=events, error=str(exc))
        if state.exists and self._lock_file:  # maintenance may be holding writes so that it can commit
            wait_while_held(hold_path(self._lock_file, name), name)
        if not state.exists:
            create_table(spark, path, plan.columns)
        elif plan.changed:
            apply_schema_plan(spark, path, plan)
        self._states[path] = TableState(True, plan.columns)
        merge = (
            self._merge(spark, decoded, table.name, path, plan, batch_id, meta, started)
            if descriptors
            else MergeResult(name, replayed=False)
        )
        truncated = 0
        for (db, tbl), seq in _latest_truncates(truncates).items():
            # One transaction id per source table: two truncates in a batch are two commits.
            commit = Commit(
                f"{self.config.app_id}:{name}:truncate:{db}.{tbl}",
                batch_id,
                {**meta, "operation": "truncate", "source": f"{db}.{tbl}"},
            )
            rows, _ = apply_truncate(spark, path, db, tbl, seq, commit)
            truncated += rows
        return TableResult(name, events, merge=merge, truncated=truncated)

    def _merge(
        self,
        spark: SparkSession,
        decoded: DataFrame,
        name: str,
        path: str,
        plan: SchemaPlan,
        batch_id: int,
        meta: dict[str, Any],
        started: dt.datetime,
    ) -> MergeResult:
        table = self.config.table(name)
        key = list(table.key) + (list(C.SHARD_KEY) if table.key_includes_source else [])
        rows = typed_rows(decoded.where(is_row_event() & (field("table") == name)), plan.columns, started)
        latest = latest_per_key(rows, key).persist(StorageLevel.MEMORY_AND_DISK)
        check_replay = batch_id <= self._last_batch.get(name, -1) or name not in self._last_batch
        try:
            commit = Commit(f"{self.config.app_id}:{name}", batch_id, meta)
            result = merge_rows(spark, path, latest, key, dict(plan.columns), commit, name, check_replay=check_replay)
        finally:
            latest.unpersist()
        self._last_batch[name] = max(batch_id, self._last_batch.get(name, -1))
        return result

    def _write_dead_letters(
        self, decoded: DataFrame, parked: list[tuple[str, str]], batch_id: int, at: dt.datetime
    ) -> None:
        reason: Column = field("reason")
        selector = is_dead()
        for name, why in parked:
            is_parked = (field("status") == OK) & (field("table") == name)
            reason = F.when(is_parked, F.lit(why)).otherwise(reason)
            selector = selector | is_parked
        rows = dead_letter_rows(decoded.where(selector), self.config.app_id, batch_id, at, reason)
        write_dead_letters(rows, self.config.storage.dead_letters, self.config.app_id, batch_id)


def _maintenance_lock(config: AppConfig) -> str | None:
    """The maintenance lock, beside which maintenance leaves its holds; None where maintenance cannot
    run either (a remote storage root without maintenance.lock_path)."""
    try:
        return lock_path(config)
    except ConfigError:
        return None


def _latest_truncates(truncates: list[tuple[str | None, str | None, Seq]]) -> dict[tuple[str | None, str | None], Seq]:
    latest: dict[tuple[str | None, str | None], Seq] = {}
    for db, tbl, seq in truncates:
        if (db, tbl) not in latest or seq > latest[(db, tbl)]:
            latest[(db, tbl)] = seq
    return latest
