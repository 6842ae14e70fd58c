"""A batch's pattern tables decided against the table index (:mod:`cdc_delta.changelog.table_index`):
the records of a refused (table, topic) become dead letters with the reason, in the stream and in a
replay of dead letters alike."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdc_delta.changelog.table_index import Claims, RecordKeys
from cdc_delta.config import AppConfig
from cdc_delta.decode.batch import DecodedBatch
from cdc_delta.decode.decoded import DECODED, field, is_dead
from cdc_delta.events.envelope import DEAD, OK
from cdc_delta.stream.stats import BatchStats, collect_stats

KeyColumns = Callable[[bytes | None], tuple[str, ...]]
"""The columns a record key names (the decoder's ``key_columns``)."""


def record_keys(config: AppConfig, stats: BatchStats, key_columns: KeyColumns) -> RecordKeys:
    """Per (table, topic) of a table that takes its key from the records, the key columns its sampled
    records name (:attr:`~.stats.BatchStats.key_samples`), for :func:`~cdc_delta.changelog.table_index.claim`."""
    return {
        (table, topic): {key_columns(s) for s in samples}
        for (table, topic), samples in stats.key_samples.items()
        if config.key_from_records(table)
    }


def apply_claims(decoding: DecodedBatch, stats: BatchStats, claims: Claims) -> tuple[DecodedBatch, BatchStats]:
    """``decoding`` and its ``stats`` with the records of the refused (table, topic) pairs dead."""
    if not claims.refused:
        return decoding, stats
    reason: Column | None = None
    for (table, topic), why in sorted(claims.refused.items()):
        hit = (field("table") == table) & (F.col("topic") == topic) & (field("status") == OK)
        reason = F.when(hit, F.lit(why)) if reason is None else reason.when(hit, F.lit(why))
    assert reason is not None
    dead = F.col(DECODED).withField("status", F.lit(DEAD)).withField("reason", reason)
    frame = decoding.frame.withColumn(DECODED, F.when(reason.isNotNull(), dead).otherwise(F.col(DECODED)))
    return dataclasses.replace(decoding, frame=frame), collect_stats(frame)


def dead_records(decoding: DecodedBatch, claims: Claims) -> DataFrame:
    """The dead records of ``decoding``, each with its Kafka value: a refused record the JVM decoded
    (its value not kept) is read again from the batch (as many as a topic's share of the batch: joined,
    not broadcast)."""
    records = decoding.frame.where(is_dead())
    if claims.refused:
        kept = F.col("value").isNotNull()
        records = records.where(kept).unionByName(decoding.with_values(records.where(~kept), broadcast=False))
    # A record whose masked columns arrived unmasked keeps them masked (cdc_delta.events.masking).
    masked = F.coalesce(field("redacted").cast("binary"), F.col("value").cast("binary"))
    return records.withColumn("value", masked)
