"""One micro-batch end to end, phase 1: decode, count, land every change in the changelog (one commit),
dead letters, one log line; then its listener is told (the merger, which may merge at once).

:class:`BatchProcessor` is the ``foreachBatch`` function of the stream. It never collects events to
the driver: only counts, offsets, schema descriptors and truncate markers (a few rows) come back
(:mod:`.stats`). The changes land in the changelog (:mod:`cdc_delta.changelog.append`); whoever applies
them to the tables is a :class:`LandingListener` the stream is handed.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from contextlib import AbstractContextManager
from typing import Protocol

from pyspark.sql import DataFrame

from cdc_delta.changelog.append import Changelog, Landing
from cdc_delta.changelog.purges import find_purges
from cdc_delta.config import AppConfig
from cdc_delta.consistency.read import PointKeeper
from cdc_delta.decode.batch import decoder_for
from cdc_delta.decode.decoded import field
from cdc_delta.decode.plan import decode_plan
from cdc_delta.delta.commits import StreamCommit, txn_app_id
from cdc_delta.delta.dead_letters import dead_letter_rows, write_dead_letters
from cdc_delta.events.debezium_records import TRANSACTION
from cdc_delta.events.envelope import DEAD, OK, SKIP
from cdc_delta.merger.results import RoundResult
from cdc_delta.spark_session import JOB_DESCRIPTION, describe_jobs
from cdc_delta.stream.claims import apply_claims, dead_records, record_keys
from cdc_delta.stream.results import BatchResult, Steps
from cdc_delta.stream.stats import collect_stats

logger = logging.getLogger(__name__)


class LandingListener(Protocol):
    """Who is told of the stream's landings: the merger of the stream's process
    (:mod:`cdc_delta.merger.with_stream`, or a :class:`~cdc_delta.merger.run.Merger` itself)."""

    def landing(self) -> AbstractContextManager[object]:
        """Around one batch's landing (merges beside it give way to it)."""
        ...

    def landed(self, landing: Landing | None) -> RoundResult | None:
        """Told of a landing (None: a batch with nothing to land); the merge round run at once, if any."""
        ...

    def check(self) -> None:
        """Raise the failure that ended the listener's own work, if one did."""
        ...


class BatchProcessor:
    """The ``foreachBatch`` function: ``query.foreachBatch(BatchProcessor(config))``."""

    def __init__(self, config: AppConfig, epoch: str | None = None, listener: LandingListener | None = None) -> None:
        """``epoch``: the checkpoint's (:mod:`.checkpoint`), recorded with every landing (a batch landed
        before is known by it and its batch id); None where there is no checkpoint (tests, tools) or it
        predates epochs. ``listener``: who is told of each landing (the merger); None: the batches only
        land (``merge.in_stream: false``: ``cdc-delta merge`` merges them)."""
        self.config = config
        self.epoch = epoch or None
        self.plan = decode_plan(config, with_salt=True)
        self.listener = listener
        self._changelog: Changelog | None = None
        # Keeps the schemas read so far, by id: a batch reads only the schemas new to it.
        self._decode = decoder_for(config, self.plan)
        self._point = PointKeeper(config)
        """The consistent point, moved on after the landings that may move it."""

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        result = self.process(batch, batch_id)
        logger.info("%s", result.summary())

    def process(self, batch: DataFrame, batch_id: int) -> BatchResult:
        """Land one batch of Kafka records (columns topic, partition, offset, timestamp, key, value)."""
        started = dt.datetime.now(dt.timezone.utc)
        t0 = time.monotonic()
        spark = batch.sparkSession
        streaming = spark.sparkContext.getLocalProperty(JOB_DESCRIPTION)  # Spark's own, put back after
        steps = Steps(lambda step: describe_jobs(spark, streaming if step is None else f"batch {batch_id}: {step}"))
        steps.begin("decode")  # read from Kafka, parsed and decoded (into a local checkpoint)
        try:
            decoding = self._decode(batch)
        except BaseException:
            steps.end()
            raise
        try:
            steps.begin("count")
            stats = collect_stats(decoding.frame, key_samples=self.config.keys_from_records)
            if not stats.rows_in:
                steps.end()
                merged = self.listener.landed(None) if self.listener is not None else None
                return BatchResult(batch_id, duration_s=time.monotonic() - t0, merge=merged)
            record = StreamCommit(
                app_id=self.config.app_id,
                epoch=self.epoch,
                batch_id=batch_id,
                offsets={t: dict(p) for t, p in stats.offsets.items()},
                max_source_ts_ms=stats.max_source_ts_ms,
                partition_max_source_ts_ms={t: dict(p) for t, p in stats.max_ts_by_partition.items()},
                consistent=self._point.kept(),
            )
            steps.begin("claim")  # the pattern tables against the table index
            if self._changelog is None:
                self._changelog = Changelog(spark, self.config, self.epoch)
            claims = self._changelog.claim(stats.origins, record_keys(self.config, stats, self._decode.key_columns))
            decoding, stats = apply_claims(decoding, stats, claims)
            purges = find_purges(self.config, decoding.frame, stats.events_by_table)
            steps.begin("land")
            descriptors = {d for table in stats.descriptors.values() for d in table}
            landing = self._changelog.land(
                decoding.frame,
                batch_id,
                started,
                record,
                descriptors,
                self._decode.connect_schemas(),
                dict(stats.events_by_table),
                claims.new,
                purges,
            )
            if stats.by_status[DEAD]:
                steps.begin("dead_letters")
                self._write_dead_letters(dead_records(decoding, claims), batch_id, started)
            consistency = self._point.now
            if not landing.replayed:
                steps.begin("consistent_point")
                consistency = self._point.landed(landing.land_seq, stats.skips.get(TRANSACTION, 0))
            steps.end()
            landed_s = time.monotonic() - t0
            logger.debug("batch %d steps: %s", batch_id, steps.line())
            merged = self.listener.landed(landing) if self.listener is not None else None
            return BatchResult(
                batch_id=batch_id,
                rows_in=stats.rows_in,
                landed=stats.by_status[OK],
                dead_lettered=stats.by_status[DEAD],
                skipped=stats.by_status[SKIP],
                skips=dict(stats.skips),
                land_seq=None if landing.replayed else landing.land_seq,
                offsets={t: dict(p) for t, p in stats.offsets.items()},
                max_source_ts_ms=stats.max_source_ts_ms,
                duration_s=time.monotonic() - t0,
                landed_s=landed_s,
                status_by_table={t: dict(c) for t, c in stats.status_by_table.items()},
                max_source_ts_ms_by_table=dict(stats.max_ts_by_table),
                merge=merged,
                steps=dict(steps.seconds),
                archived=dict(purges.archived) if purges is not None and not landing.replayed else {},
                consistency=consistency,
            )
        finally:
            decoding.release()
            steps.end()

    def _write_dead_letters(self, records: DataFrame, batch_id: int, started: dt.datetime) -> None:
        rows = dead_letter_rows(records, self.config.app_id, batch_id, started, field("reason"))
        txn = txn_app_id(self.config.app_id, self.epoch, "dead-letters")
        write_dead_letters(rows, self.config.storage.dead_letters, txn, batch_id)
