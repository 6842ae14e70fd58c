"""Re-apply dead letters (after their cause was fixed: a config, a decoder).

The records are decoded again and land in the changelog as a landing of their own, numbered after the
stream's, so that they reach the tables the way every change does: merged by the merger (their history
versions, the activity counts, the live views' pending changes), and counted by the consistent point, a
transaction whose change was a dead letter becoming whole. The changelog has one lander at a time: the
command holds the stream's lease (a running stream is refused; stop it, replay, start it). A replay
landing records no Kafka position (``batch_id`` None: :attr:`~cdc_delta.delta.commits.StreamCommit.from_dead_letters`),
and whoever reads the stream's positions passes over it. Then, where no merge job holds the merge lease,
it merges the tables it landed for.

The dead letters it landed get ``replayed_at`` (those it dead-letters again too: the new row is the one
still to do), so the count still to do falls and a second replay reads only what is left. Run twice (a
crash between the landing and the marking), it lands the same changes twice, which the merge's ordering
guard and the point's count of distinct changes make harmless."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc_delta.changelog.append import Changelog
from cdc_delta.changelog.purges import find_purges
from cdc_delta.columns import REPLAYED_AT
from cdc_delta.config import AppConfig
from cdc_delta.decode.batch import decoder_for
from cdc_delta.decode.canonical import canonical_frame
from cdc_delta.decode.decoded import field
from cdc_delta.decode.plan import decode_plan
from cdc_delta.delta.commits import StreamCommit, txn_app_id
from cdc_delta.delta.dead_letters import dead_letter_rows, mark_replayed, write_dead_letters
from cdc_delta.events.envelope import DEAD, OK, SKIP
from cdc_delta.exceptions import CdcDeltaError
from cdc_delta.merger import Merger
from cdc_delta.merger.results import RoundResult
from cdc_delta.stream.claims import apply_claims, dead_records, record_keys
from cdc_delta.stream.results import BatchResult
from cdc_delta.stream.stats import collect_stats

logger = logging.getLogger(__name__)


def replay_dead_letters(
    spark: SparkSession, config: AppConfig, table: str | None, since: dt.datetime | None, merge: bool = True
) -> BatchResult:
    """Land the dead letters (of one table, dead-lettered since a time) again, as one landing; with
    ``merge``, merge the tables it landed for. Run it holding the stream's lease (the command does).

    Records that still cannot be decoded are dead-lettered again, under the app id ``<app_id>.replay``.
    The result's ``batch_id`` is the replay's number (its start, in epoch milliseconds), ``land_seq`` its
    landing (None where nothing landed)."""
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
    started = dt.datetime.now(dt.timezone.utc)
    t0 = time.monotonic()
    # Above every earlier replay's: the dead letters it writes again are a transaction version of their own.
    number = int(started.timestamp() * 1000)
    plan = decode_plan(config, with_salt=True)
    decoder = decoder_for(config, plan)
    decoded = decoder(records)
    try:
        # The images the JVM left as Debezium wrote them are made canonical here, as a merge would.
        made = canonical_frame(decoded.frame, plan, decoder.connect_schemas())
    except BaseException:
        decoded.release()
        raise
    decoding = dataclasses.replace(decoded, frame=made.frame)
    land_seq: int | None = None
    try:
        # Read now: the records read the dead letters still to do, which the marking changes.
        keys = records.select("topic", "partition", "offset").collect()
        stats = collect_stats(decoding.frame, key_samples=config.keys_from_records)
        changelog = Changelog(spark, config, None)
        claims = changelog.claim(stats.origins, record_keys(config, stats, decoder.key_columns))
        decoding, stats = apply_claims(decoding, stats, claims)
        if stats.by_status[OK]:
            record = StreamCommit(app_id=config.app_id, max_source_ts_ms=stats.max_source_ts_ms)
            descriptors = {d for table_descriptors in stats.descriptors.values() for d in table_descriptors}
            landing = changelog.land(
                decoding.frame,
                None,
                started,
                record,
                descriptors,
                decoder.connect_schemas(),
                dict(stats.events_by_table),
                claims.new,
                find_purges(config, decoding.frame, stats.events_by_table),
            )
            land_seq = landing.land_seq
        if stats.by_status[DEAD]:  # dead again: new rows, still to do (dead-lettered at the replay's start)
            replay_app = f"{config.app_id}.replay"
            rows = dead_letter_rows(dead_records(decoding, claims), replay_app, number, started, field("reason"))
            write_dead_letters(rows, path, txn_app_id(replay_app, None, "dead-letters"), number)
        # Every record read is done now: landed, dead again (its new row is the one to do) or skipped.
        done = spark.createDataFrame(keys, "topic string, partition int, offset bigint")
        marked = mark_replayed(spark, path, done, started)
    finally:
        made.release()
        decoded.release()
    landed_s = time.monotonic() - t0
    merged = _merge(spark, config, sorted(stats.events_by_table)) if merge and land_seq is not None else None
    result = BatchResult(
        batch_id=number,
        rows_in=stats.rows_in,
        landed=stats.by_status[OK],
        dead_lettered=stats.by_status[DEAD],
        skipped=stats.by_status[SKIP],
        skips=dict(stats.skips),
        land_seq=land_seq,
        duration_s=time.monotonic() - t0,
        landed_s=landed_s,
        status_by_table={t: dict(c) for t, c in stats.status_by_table.items()},
        merge=merged,
    )
    logger.info("replay of dead letters: %s; %d dead letters marked replayed", result.summary(), marked)
    return result


def _merge(spark: SparkSession, config: AppConfig, tables: list[str]) -> RoundResult | None:
    """Merge ``tables`` now (every change pending in them, the replay's landing among them)."""
    merger = Merger(spark, config)
    try:
        return merger.merge_tables(tables)
    finally:
        merger.close()
