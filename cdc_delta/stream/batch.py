"""One micro-batch end to end: decode, count, apply each table's changes, dead letters, one log line.

:class:`BatchProcessor` is the ``foreachBatch`` function of the stream. It never collects events to
the driver: only counts, offsets, schema descriptors and truncate markers (a few rows) come back
(:mod:`.stats`). Each table's changes are applied by :mod:`cdc_delta.merger.apply`, several tables at
once (:mod:`cdc_delta.delta.workers`).
"""

from __future__ import annotations

import datetime as dt
import logging
import time

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdc_delta.config import AppConfig
from cdc_delta.decode.batch import DecodedBatch, decoder_for
from cdc_delta.decode.decoded import field, is_dead
from cdc_delta.decode.plan import decode_plan
from cdc_delta.delta.commits import StreamCommit, txn_app_id
from cdc_delta.delta.workers import TableWorkers
from cdc_delta.events.envelope import DEAD, OK, SKIP
from cdc_delta.merger.apply import TableApplier, TableBatch, TableChanges
from cdc_delta.stream.dead_letters import dead_letter_rows, write_dead_letters
from cdc_delta.stream.results import BatchResult
from cdc_delta.stream.stats import BatchStats, collect_stats

logger = logging.getLogger(__name__)


def _table_changes(stats: BatchStats, record: StreamCommit) -> list[TableChanges]:
    return [
        TableChanges(
            name=name,
            events=stats.events_by_table[name],
            descriptors=dict(stats.descriptors[name]),
            truncates=stats.truncates[name],
            record=record.for_table(name, stats.events_by_table[name], stats.max_ts_by_table.get(name)),
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
        self.plan = decode_plan(config)
        self._workers: TableWorkers | None = None
        self._applier: TableApplier | None = None
        # Keeps the schemas read so far, by id: a batch reads only the schemas new to it.
        self._decode = decoder_for(config, self.plan)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        result = self.process(batch, batch_id)
        logger.info("%s", result.summary())

    def process(self, batch: DataFrame, batch_id: int) -> BatchResult:
        """Apply one batch of Kafka records (columns topic, partition, offset, timestamp, key, value)."""
        started = dt.datetime.now(dt.timezone.utc)
        t0 = time.monotonic()
        decoding = self._decode(batch)
        try:
            stats = collect_stats(decoding.frame)
            if not stats.rows_in:
                return BatchResult(batch_id, duration_s=time.monotonic() - t0)
            record = StreamCommit(
                app_id=self.config.app_id,
                epoch=self.epoch,
                batch_id=batch_id,
                offsets={t: dict(p) for t, p in stats.offsets.items()},
                max_source_ts_ms=stats.max_source_ts_ms,
                partition_max_source_ts_ms={t: dict(p) for t, p in stats.max_ts_by_partition.items()},
            )
            if self._workers is None or self._applier is None:
                self._workers = TableWorkers(batch.sparkSession, self.config.merge_concurrency)
                self._applier = TableApplier(batch.sparkSession, self.config, self.epoch)
            applier, shared = self._applier, TableBatch(decoding.frame, batch_id, started)
            changes = _table_changes(stats, record)
            tables = self._workers.map(lambda session, table: applier.apply(session, shared, table), changes)
            parked = [(t.table, t.error or "table stopped") for t in tables if t.parked]
            parked_count = sum(t.parked for t in tables)
            dead_count = stats.by_status[DEAD] + parked_count
            if dead_count:
                self._write_dead_letters(decoding, batch_id, started, parked)
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

    def _write_dead_letters(
        self, decoding: DecodedBatch, batch_id: int, started: dt.datetime, parked: list[tuple[str, str]]
    ) -> None:
        reason: Column = field("reason")
        selector = is_dead()
        for name, why in parked:
            is_parked = (field("status") == OK) & (field("table") == name)
            reason = F.when(is_parked, F.lit(why)).otherwise(reason)
            selector = selector | is_parked
        records = decoding.frame.where(selector)
        if parked:  # the JVM path keeps no value of the records it decoded
            records = decoding.with_values(records)
        rows = dead_letter_rows(records, self.config.app_id, batch_id, started, reason)
        txn = txn_app_id(self.config.app_id, self.epoch, "dead-letters")
        write_dead_letters(rows, self.config.storage.dead_letters, txn, batch_id)
