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

import pyarrow as pa
import pyarrow.compute as pc
from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.changelog.status import merged_landing
from cdc_delta.changelog.table import LAND_SEQ, TABLE
from cdc_delta.config import AppConfig, TableConfig
from cdc_delta.delta.delta_rs import open_table, read
from cdc_delta.events.ordering import Seq
from cdc_delta.retry import retry_on_conflict
from cdc_delta.rows.truncates import seq_literal, seq_sql


def newest_held(config: AppConfig, table: TableConfig) -> Seq | None:
    """The newest ordering key among the table's rows and its changes landed but not merged (None:
    neither yet), read with delta-rs: no Spark to start before the signal. Read while the stream goes on, it
    may miss the newest landing, which can only make the mark lower: fewer rows named missing, never a row
    the snapshot read."""
    import pyarrow.dataset as ds

    tops = []
    found = open_table(config, config.storage.table_path(table))
    if found is not None:
        tops.append(_newest(read(found.to_pyarrow_dataset(), [C.SEQ])[C.SEQ]))
    changelog = open_table(config, config.changelog.located(config.storage.root))
    if changelog is not None:
        where = (ds.field(TABLE) == table.name) & (ds.field(LAND_SEQ) > merged_landing(config, table.name))
        tops.append(_newest(read(changelog.to_pyarrow_dataset(), ["seq"], where)["seq"]))
    held = [t for t in tops if t is not None]
    return max(held) if held else None


def _newest(seqs: pa.ChunkedArray) -> Seq | None:
    """The greatest of ``seqs`` (a struct column of the ordering key's fields), compared as tuples."""
    rows = seqs.combine_chunks()
    rows = rows.filter(pc.is_valid(rows))
    for name in Seq._fields:
        if not len(rows):
            return None
        values = pc.struct_field(rows, name)
        top = pc.max(values)
        if top.is_valid:  # a field null in every row left orders none of them
            rows = rows.filter(pc.fill_null(pc.equal(values, top), False))
    return Seq(*(rows[0].as_py()[name] for name in Seq._fields)) if len(rows) else None


def _stale(held: Seq, where: str | None, source: str) -> str:
    """The condition, as SQL, on the table's rows that the re-read of ``source`` (``db.table``) shows the
    source lacks: live, from that source table, within ``where``, untouched since ``held``."""
    db, table = source.split(".", 1)
    same = f"{C.SOURCE_DB} = {C.string_literal(db)} AND {C.SOURCE_TABLE} = {C.string_literal(table)}"
    # An archived row (a purge's, kept) is one the source lacks on purpose.
    condition = f"NOT {C.DELETED} AND {C.OP} <> '{C.ARCHIVE}' AND {same} AND {C.SEQ} <= {seq_sql(held)}"
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
