"""Appending to a table's history: before a merge segment is committed to the table, the segment's
changes (every one, not only the latest per key) and its truncates are appended to the history under the
Delta transaction id ``<app_id>:<table>:history``, whose version is the segment's last landing. The
history is written first: a merge repeated after a crash finds its landings held there and appends
nothing twice, and the table is never ahead of its history.

A table whose history starts after the table (``history`` turned on later, or off for a while) first gets
its rows as they are (:func:`seed`): its current rows are where its versions start.

Each change is stored with the landing of its segment (:data:`LAND_SEQ`): a truncate closes the rows its
source's changes of that landing or earlier made, as the merge does (:mod:`cdc_delta.rows.truncates`).
A truncate is a row of its own, ``_cdc_op = 't'`` with no image; a row a truncate had soft-deleted in the
table is seeded as a delete."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from functools import reduce

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from cdc_delta import columns as C
from cdc_delta.changelog.pending import Truncate
from cdc_delta.config import AppConfig
from cdc_delta.delta.commits import txn_app_id, txn_version
from cdc_delta.retry import retry_on_conflict
from cdc_delta.rows import column_defaults
from cdc_delta.rows.column_defaults import ColumnDefault
from cdc_delta.rows.schema_evolution import SchemaPlan
from cdc_delta.rows.target import apply_schema_plan
from cdc_delta.rows.truncates import Segment, seq_literal

logger = logging.getLogger(__name__)

LAND_SEQ = "_cdc_land_seq"
"""The landing whose merge appended the change (its segment's last)."""
TRUNCATE = "t"


def history_path(config: AppConfig, name: str) -> str:
    """Where the history of the table named ``name`` lives: ``<storage.root>/_cdc_history/<db>/<table>``."""
    return f"{config.under_root(None, '_cdc_history')}/{name.replace('.', '/')}"


def history_txn_id(config: AppConfig, name: str) -> str:
    """The Delta transaction id of the history's appends; its version is the newest landing they hold."""
    return txn_app_id(config.app_id, None, name, "history")


def held(spark: SparkSession, config: AppConfig, name: str) -> int:
    """The newest landing the table's history holds (-1: none, or no history yet)."""
    return txn_version(spark, history_path(config, name), history_txn_id(config, name))


def append_segment(
    spark: SparkSession, config: AppConfig, name: str, rows: DataFrame, segment: Segment, truncates: Iterable[Truncate]
) -> None:
    """Append ``rows`` (the typed rows of the segment's changes the history does not hold yet) and the
    segment's truncates (every one of ``truncates`` in it: the merge needs only the latest of each source,
    a version closes at the first), in one commit holding landing ``segment.through``."""
    out = rows.withColumn(LAND_SEQ, F.lit(segment.through).cast("bigint"))
    marks = [
        out.sparkSession.range(1).select(
            F.lit(TRUNCATE).alias(C.OP),
            F.lit(True).alias(C.DELETED),
            seq_literal(t.seq).alias(C.SEQ),
            F.timestamp_millis(F.lit(t.seq.ts_ms)).alias(C.SOURCE_TS),
            F.lit(t.source_db).cast("string").alias(C.SOURCE_DB),
            F.lit(t.source_table).cast("string").alias(C.SOURCE_TABLE),
            F.lit(segment.through).cast("bigint").alias(LAND_SEQ),
        )
        for t in truncates
        if segment.after < t.land_seq <= segment.through
    ]
    if marks:
        out = out.unionByName(reduce(DataFrame.unionByName, marks), allowMissingColumns=True)
    # One file a segment: a merge's share of a table is small, and a task per partition of the round's
    # changes costs more than it writes (the maintenance compacts the files later).
    _write(spark, config, name, out.coalesce(1), segment.through)


def seed(spark: SparkSession, config: AppConfig, name: str, position: int) -> None:
    """Start the history of the table named ``name`` from its rows now, which hold landing ``position``
    (a row a truncate soft-deleted is a delete there: :data:`TRUNCATE` rows are truncates)."""
    rows = spark.read.format("delta").load(config.table_path(name))
    op = F.when(F.col(C.OP) == TRUNCATE, F.lit("d")).otherwise(F.col(C.OP))
    _write(
        spark, config, name, rows.withColumn(C.OP, op).withColumn(LAND_SEQ, F.lit(position).cast("bigint")), position
    )
    logger.info("table %s: its history starts from its rows now (landing %d)", name, position)


def backfill_defaults(
    spark: SparkSession, config: AppConfig, name: str, types: Mapping[str, str], defaults: Mapping[str, ColumnDefault]
) -> None:
    """Give the history's changes older than each column the source added with a default (and not filled
    yet in the table) that default, as the table's rows get it (:func:`~cdc_delta.rows.column_defaults.backfill`):
    called before the table records them filled, so that a crash between does both again (only NULLs change)."""
    from delta.tables import DeltaTable

    path = history_path(config, name)
    pending = {n: d for n, d in defaults.items() if not d.filled}
    if not pending or not DeltaTable.isDeltaTable(spark, path):
        return
    have = set(spark.read.format("delta").load(path).columns)
    missing = tuple((n, types[n]) for n in pending if n not in have)
    if missing:
        apply_schema_plan(spark, path, SchemaPlan(columns=(), added=missing))
    column_defaults.backfill(spark, path, types, pending)


def _write(spark: SparkSession, config: AppConfig, name: str, rows: DataFrame, through: int) -> None:
    path = history_path(config, name)
    writer = (
        rows.write.format("delta")
        .mode("append")
        .option("txnAppId", history_txn_id(config, name))
        .option("txnVersion", str(through))
        .option("mergeSchema", "true")  # columns the source added
    )
    try:
        retry_on_conflict(lambda: writer.save(path), f"appending to the history of {name}")
    except Exception as exc:  # the JVM's errors carry no Python type of their own
        if _WIDER not in str(exc):
            raise
        _widen(spark, config, path, rows.schema)  # read only then: it costs a read of the history's schema
        retry_on_conflict(lambda: writer.save(path), f"appending to the history of {name}")


_WIDER = "DELTA_FAILED_TO_MERGE_FIELDS"
"""Delta's error for an append whose column is of a type the table's column is not (a wider one)."""


def _widen(spark: SparkSession, config: AppConfig, path: str, incoming: StructType) -> None:
    """Widen the history's columns the table widened (an append cannot: its schema merge refuses a wider
    type), as the table was (:func:`~cdc_delta.rows.target.apply_schema_plan`)."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        return
    have = {f.name: f.dataType for f in spark.read.format("delta").load(path).schema.fields}
    widened = tuple(
        (f.name, have[f.name].simpleString(), f.dataType.simpleString())
        for f in incoming.fields
        if f.name in have and not f.name.startswith(C.PREFIX) and have[f.name] != f.dataType
    )
    if widened:
        apply_schema_plan(spark, path, SchemaPlan(columns=(), widened=widened), config.type_widening)
