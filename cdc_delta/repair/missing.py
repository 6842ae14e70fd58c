"""The keys a re-snapshot shows the source no longer has.

Before the signal, ``resnapshot`` notes the newest ordering key the table holds (its merged rows and
its changes still pending: :func:`newest_held`). Every row the source has when the snapshot reads it
comes back as a read placed after that (or as a newer binlog change, which drops the read), so once the
snapshot is merged, a live row whose ordering key is still at or below the one noted was neither read
nor changed since: the source no longer has it (a delete the lake missed, a row added in the lake
alone). Within ``--where``, the same condition applies to the table's rows, and only to those of the
source table read (a table folded from several keeps the others'). Where the reads could not be placed
(a blocking snapshot with no GTID to place them at), fewer rows than were read are newer than the mark:
then nothing is named missing (:func:`touched`).
"""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.config import AppConfig, TableConfig
from cdc_delta.events.ordering import Seq
from cdc_delta.retry import retry_on_conflict
from cdc_delta.rows.as_of import live_rows
from cdc_delta.rows.truncates import seq_literal, seq_sql


def newest_held(spark: SparkSession, config: AppConfig, table: TableConfig) -> Seq | None:
    """The newest ordering key among the table's rows and its pending changes (None: neither yet)."""
    rows = live_rows(spark, config, [table]).get(table.name)
    if rows is None:
        return None
    top = rows.agg(F.max(C.SEQ).alias("top")).first()
    return None if top is None or top["top"] is None else Seq(*top["top"])


def _stale(held: Seq, where: str | None, source: str) -> str:
    """The condition, as SQL, on the table's rows that the re-read of ``source`` (``db.table``) shows the
    source lacks: live, from that source table, within ``where``, untouched since ``held``."""
    db, table = source.split(".", 1)
    same = f"{C.SOURCE_DB} = {C.string_literal(db)} AND {C.SOURCE_TABLE} = {C.string_literal(table)}"
    condition = f"NOT {C.DELETED} AND {same} AND {C.SEQ} <= {seq_sql(held)}"
    return f"{condition} AND ({where})" if where else condition


def touched(spark: SparkSession, config: AppConfig, table: TableConfig, held: Seq, where: str | None) -> int:
    """The table's rows, within ``where``, that a change placed after ``held`` wrote (a read, or a newer
    change): each row the snapshot read is one of them, where its reads were placed."""
    rows = spark.read.format("delta").load(config.storage.table_path(table)).where(F.col(C.SEQ) > seq_literal(held))
    return rows.where(F.expr(where)).count() if where else rows.count()


def missing_rows(
    spark: SparkSession, config: AppConfig, table: TableConfig, held: Seq, where: str | None, source: str
) -> DataFrame:
    """The table's live rows, within ``where``, untouched since ``held``: their keys."""
    rows = spark.read.format("delta").load(config.storage.table_path(table))
    return rows.where(F.expr(_stale(held, where, source))).select(*[C.quote(k) for k in table.row_key])


def soft_delete_missing(
    spark: SparkSession, config: AppConfig, table: TableConfig, held: Seq, where: str | None, source: str
) -> int:
    """Soft-delete the rows :func:`missing_rows` names, in one commit (a row changed meanwhile has a newer
    ordering key and stays); returns how many."""
    path = config.storage.table_path(table)
    condition = _stale(held, where, source)
    statement = f"UPDATE {C.delta_path_identifier(path)} SET {C.DELETED} = true, {C.OP} = 'd' WHERE {condition}"
    result = retry_on_conflict(lambda: spark.sql(statement).first(), f"soft-deleting {table.name}'s missing rows")
    return int(result["num_affected_rows"]) if result else 0


def check_where(spark: SparkSession, config: AppConfig, table: TableConfig, where: str) -> str | None:
    """Why Spark cannot evaluate ``where`` over the table's rows (needed to find its missing keys), or None."""
    path = config.storage.table_path(table)
    if not DeltaTable.isDeltaTable(spark, path):
        return None
    try:
        spark.read.format("delta").load(path).where(F.expr(where)).limit(0).collect()
    except Exception as exc:  # noqa: BLE001 (a parse or analysis error, which Spark reports in its own words)
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return None
