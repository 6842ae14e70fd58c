"""Re-apply dead letters (after their cause was fixed: a config, a decoder).

The records are decoded again and each table's share is merged straight into the table by the merger
(:func:`cdc_delta.merger.apply_changes`; guarded by the ordering key, so the order against the
changelog's changes does not matter), under the app id ``<app_id>.replay``: the changelog is the
stream's alone, and a replay neither lands there nor moves a table's merged position. The dead letters
it applied get ``replayed_at`` (those it dead-letters again too: the new row is the one still to do), so
the count still to do falls and a second replay reads only what is left."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time

from delta.tables import DeltaTable
from pyspark import StorageLevel
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc_delta.changelog import table_index
from cdc_delta.changelog.pending import LANDED_AT
from cdc_delta.changelog.table import LAND_SEQ
from cdc_delta.columns import REPLAYED_AT
from cdc_delta.config import AppConfig
from cdc_delta.decode.batch import decoder_for
from cdc_delta.decode.canonical import canonical_frame
from cdc_delta.decode.decoded import field, is_dead, is_row_event, is_truncate
from cdc_delta.decode.plan import decode_plan
from cdc_delta.delta.commits import txn_app_id
from cdc_delta.delta.dead_letters import dead_letter_rows, mark_replayed, write_dead_letters
from cdc_delta.events.envelope import DEAD, OK, SKIP
from cdc_delta.exceptions import CdcDeltaError
from cdc_delta.merger import apply_changes
from cdc_delta.merger.results import RoundResult
from cdc_delta.stream.claims import apply_claims, dead_records, record_keys
from cdc_delta.stream.results import BatchResult
from cdc_delta.stream.stats import collect_stats

logger = logging.getLogger(__name__)


def replay_dead_letters(
    spark: SparkSession, config: AppConfig, table: str | None, since: dt.datetime | None
) -> BatchResult:
    """Apply the dead letters (of one table, dead-lettered since a time) again.

    Safe to repeat: the guarded MERGE ignores changes not newer than what a table holds. Records that
    still cannot be decoded are dead-lettered again, under the app id ``<app_id>.replay``.
    """
    path = config.storage.dead_letters
    if not DeltaTable.isDeltaTable(spark, path):
        raise CdcDeltaError(f"there are no dead letters at {path}")
    if table is not None:
        config.entry(table)  # a clear error for an unknown table name
    letters = spark.read.format("delta").load(path)
    if REPLAYED_AT in letters.columns:  # those an earlier replay applied (or dead-lettered again) are done
        letters = letters.where(F.col(REPLAYED_AT).isNull())
    if table is not None:
        letters = letters.where(F.col("table") == table)
    if since is not None:
        letters = letters.where(F.col("dead_lettered_at") >= F.lit(since))
    # A record parked twice (by the stream and by an earlier replay) is replayed once.
    records = letters.select(
        "topic", "partition", "offset", F.col("kafka_timestamp").alias("timestamp"), "key", "value"
    ).dropDuplicates(["topic", "partition", "offset"])
    replay = config.model_copy(update={"app_id": f"{config.app_id}.replay"})
    started = dt.datetime.now(dt.timezone.utc)
    t0 = time.monotonic()
    # Above every earlier replay's: each replay is a transaction version of its own for every table.
    number = int(started.timestamp() * 1000)
    plan = decode_plan(replay, with_salt=True)
    decoder = decoder_for(replay, plan)
    decoded = decoder(records)
    try:
        # The images the JVM left as Debezium wrote them are made canonical here, as a merge would.
        made = canonical_frame(decoded.frame, plan, decoder.connect_schemas())
    except BaseException:
        decoded.release()
        raise
    decoding = dataclasses.replace(decoded, frame=made.frame)
    try:
        stats = collect_stats(decoding.frame, key_samples=config.keys_from_records)
        keys = record_keys(config, stats, decoder.key_columns)
        claims = table_index.claim(config, table_index.discovered(spark, config), stats.origins, keys)
        decoding, stats = apply_claims(decoding, stats, claims)
        if claims.new:  # before the tables are created: every job lists them from the index
            table_index.record(spark, config, claims.new, number, started)
        frame = (
            decoding.frame.where(is_row_event() | is_truncate())
            .withColumn(LAND_SEQ, F.lit(number).cast("bigint"))
            .withColumn(LANDED_AT, F.lit(started).cast("timestamp"))
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        try:
            tables = apply_changes(spark, replay, frame, sorted(stats.events_by_table), number)
        finally:
            frame.unpersist()
        # Done: every record but the changes of a table whose merge failed (they stay to replay). Read now:
        # the frame reads the dead letters still to do, which the marking changes.
        failed = [t.table for t in tables if t.error]
        done_keys = (
            decoding.frame.where(~F.coalesce(field("table").isin(failed) & ~is_dead(), F.lit(False)))
            .select("topic", "partition", "offset")
            .distinct()
            .collect()
        )
        if stats.by_status[DEAD]:  # dead again: new rows, still to do (dead-lettered at the replay's start)
            rows = dead_letter_rows(dead_records(decoding, claims), replay.app_id, number, started, field("reason"))
            write_dead_letters(
                rows, config.storage.dead_letters, txn_app_id(replay.app_id, None, "dead-letters"), number
            )
        done = spark.createDataFrame(done_keys, "topic string, partition int, offset bigint")
        marked = mark_replayed(spark, path, done, started)
    finally:
        made.release()
        decoded.release()
    result = BatchResult(
        batch_id=number,
        rows_in=stats.rows_in,
        landed=stats.by_status[OK],
        dead_lettered=stats.by_status[DEAD],
        skipped=stats.by_status[SKIP],
        skips=dict(stats.skips),
        duration_s=time.monotonic() - t0,
        status_by_table={t: dict(c) for t, c in stats.status_by_table.items()},
        merge=RoundResult(number, tuple(tables), time.monotonic() - t0),
    )
    logger.info("replay of dead letters: %s; %d dead letters marked replayed", result.summary(), marked)
    return result
