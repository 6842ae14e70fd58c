"""A read at the consistent point (:mod:`.point`): every table as the source was when the point's
transaction committed, never half of a transaction.

The changes read are those landed up to the point's landing (:attr:`~.point.Point.through`) that belong to
a transaction up to the point: a change landed before the point's :attr:`~.point.Point.scan_from` (every
transaction past the point landed its changes from there on), one of a transaction the point passed
(:func:`~.point.passed_ids`), and one without a transaction that waits for nothing (a snapshot read, a
truncate). Each table is read at its newest Delta version whose merges hold no landing with a change the
cut leaves out (Delta time travel, where a merge went past the point), overridden by those changes past
it (:class:`cdc_delta.rows.as_of.Cut`).
"""

from __future__ import annotations

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from cdc_delta.changelog.table import LAND_SEQ, TABLE, changelog_path
from cdc_delta.config import AppConfig
from cdc_delta.consistency.point import Point, passed_ids
from cdc_delta.events.transactions import TXN_END
from cdc_delta.rows.as_of import Cut


def visible(point: Point, passed: list[str], txn: Column, op: Column) -> Column:
    """Whether a changelog row (its landing, transaction block and op) is read at ``point``, whose passed
    ENDs since its ``scan_from`` have the ids ``passed``."""
    landing = F.col(LAND_SEQ)
    waits_for_nothing = txn.isNull() | (op == "t")
    return (landing <= point.through) & (
        (landing < point.scan_from) | waits_for_nothing | txn.getField("id").isin(passed)
    )


def consistent_cut(spark: SparkSession, config: AppConfig, point: Point) -> Cut:
    """The cut at ``point``: which changes are read, and per table the newest landing its merged version
    may hold. Two small jobs over the landings from the point's ``scan_from``."""
    landed = spark.read.format("delta").load(changelog_path(config))
    window = landed.where(F.col(LAND_SEQ) >= point.scan_from)
    within = window.where(F.col(LAND_SEQ) <= point.through)
    # One job: each END's id and offset, and each transaction id of the changes (offset null).
    end = F.col("op") == TXN_END
    found = (
        within.where(F.col("txn").isNotNull())
        .select(end.alias("end"), F.col("txn.id").alias("id"), F.when(end, F.col("offset")).alias("offset"))
        .distinct()
        .collect()
    )
    ends = {r["id"]: r["offset"] for r in found if r["end"]}
    passed = sorted(passed_ids(point, ends, {r["id"] for r in found if not r["end"]}))
    shown = visible(point, passed, F.col("txn"), F.col("op"))
    left_out = (
        window.where(F.col(TABLE).isNotNull() & ~shown)
        .groupBy(TABLE)
        .agg(F.min(LAND_SEQ).alias("first"), F.min("source_ts_ms").alias("oldest"))
        .collect()
    )
    held = {r[TABLE]: min(int(r["first"]) - 1, point.through) for r in left_out}
    oldest = {r[TABLE]: int(r["oldest"]) for r in left_out if r["oldest"] is not None}
    return Cut(point.through, held, visible(point, passed, F.col("_decoded.txn"), F.col("_decoded.op")), oldest)
