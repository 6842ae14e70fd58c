"""The guarded, idempotent MERGE of one table's deduplicated changes into its Delta table.

Per key, the newer change (by ``_cdc_seq``) wins and an older or equal one changes nothing: matched and
newer -> every column is replaced by the change's image (a delete keeps the row with
``_cdc_deleted = true`` and the before image; a re-insert revives it); not matched -> insert (a delete
inserts a tombstone, since the key may live in the stock export). A segment's truncates
(:mod:`cdc_delta.rows.truncates`) are part of the same commit: the change that wins is applied first, then the rows
of the truncated source table older than the truncate are soft-deleted, the source's rows and the
table's alike. Each commit carries a Delta transaction id with the newest landing it holds as version,
so merging the same landings again commits nothing.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Sequence
from functools import reduce

from delta.tables import DeltaMergeBuilder, DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.delta.commits import Commit, delta_transaction
from cdc_delta.delta.tables import current_version
from cdc_delta.exceptions import CdcDeltaError
from cdc_delta.merger.results import MergeResult
from cdc_delta.retry import retry_on_conflict
from cdc_delta.rows.archival import replaces
from cdc_delta.rows.truncates import Truncates, marked, same_source, seq_literal

logger = logging.getLogger(__name__)

# Key column types whose batch min/max are added to the merge condition so file statistics prune.
_PRUNABLE = ("tinyint", "smallint", "int", "bigint", "string", "date", "timestamp")


def _source_summary(rows: DataFrame, keys: Sequence[str], type_name: str, table_name: str) -> tuple[int, Column | None]:
    """The source's row count, and ``t.key BETWEEN min AND max`` of its first key column, which lets Delta
    skip files by their statistics (None where the key's type has no useful order or the source is empty);
    one job, which also fills ``rows``'s cache. Rows with a null key column (a key that the record key names,
    ``message.key.columns`` over a nullable column) would never match a row: :class:`NullKey` stops the table."""
    key = keys[0]
    prunable = type_name in _PRUNABLE
    bounds = [F.min(C.quote(key)).alias("lo"), F.max(C.quote(key)).alias("hi")] if prunable else []
    null_key = F.count(F.when(reduce(operator.or_, [F.col(C.quote(k)).isNull() for k in keys]), 1)).alias("nulls")
    summary = rows.agg(F.count(F.lit(1)).alias("n"), null_key, *bounds).first()
    assert summary is not None
    if summary["nulls"]:
        raise NullKey(
            f"{summary['nulls']} change(s) of table {table_name} have a null key column (key {list(keys)}): a key "
            "must be NOT NULL at the source (a connector's message.key.columns may name a nullable column). Give the "
            "table a key of NOT NULL columns (its own entry), then cdc-delta resume-table"
        )
    if not prunable or summary["lo"] is None:
        return summary["n"], None
    return summary["n"], F.col(f"t.{C.quote(key)}").between(F.lit(summary["lo"]), F.lit(summary["hi"]))


class NullKey(CdcDeltaError):
    """Changes of a table with a null key column."""


_CHANGE_SEQ = "_cdc_change_seq"
"""The ordering key of the change itself, beside a truncate's that marked it (the source row of a MERGE
only)."""


def merge_rows(
    spark: SparkSession,
    path: str,
    rows: DataFrame,
    key: Sequence[str],
    key_types: dict[str, str],
    commit: Commit,
    table_name: str,
    truncates: Truncates | None = None,
    empty: bool = False,
) -> MergeResult:
    """MERGE ``rows`` (at most one per key: :func:`cdc_delta.rows.dedupe.latest_per_key`) into
    ``path``, then ``truncates`` (of the segment's last landing) in the same commit. Delta's transaction
    id skips a commit of landings the table holds already (``replayed=True``). ``empty``: the table holds
    no row (made by this round), so every change is inserted by an insert-only MERGE, which Delta runs
    without first scanning the table for the files its changes touch (five Spark jobs fewer)."""
    target = DeltaTable.forPath(spark, path)
    condition = F.lit(True)
    for k in key:
        condition = condition & (F.col(f"t.{C.quote(k)}") == F.col(f"s.{C.quote(k)}"))
    source_rows, pruning = _source_summary(rows, key, key_types.get(key[0], ""), table_name)
    if pruning is not None and not truncates:  # a truncate reaches rows outside the source's key range
        condition = pruning & condition
    newer = _replaces(C.SEQ)
    if not truncates:
        merge = target.alias("t").merge(rows.alias("s"), condition)
        merge = (merge if empty else merge.whenMatchedUpdateAll(condition=newer)).whenNotMatchedInsertAll()
    else:
        merge = _with_truncates(target, rows, condition, truncates)
    with delta_transaction(spark, commit):
        # A conflict with maintenance (OPTIMIZE, purge) is retried: the guard and the transaction id
        # make a second attempt safe.
        metrics = retry_on_conflict(lambda: merge.execute().collect(), f"MERGE into {table_name}")
    if not metrics:  # Delta skipped it: the table held these landings (a concurrent merger committed)
        return MergeResult(table=table_name, replayed=True)
    version = current_version(spark, path)
    by_source = _by_source_updates(target, version) if truncates else 0
    return MergeResult(
        table=table_name,
        source_rows=source_rows,
        inserted=int(metrics[0]["num_inserted_rows"]),
        updated=int(metrics[0]["num_updated_rows"]) - by_source,
        truncated=by_source,
        version=version,
    )


def _with_truncates(target: DeltaTable, rows: DataFrame, condition: Column, truncates: Truncates) -> DeltaMergeBuilder:
    """The MERGE of a segment that ends with truncates. Each change is marked by the truncate of its
    source it is older than (:func:`~.truncates.marked`), keeping its own ordering key beside: a matched
    row takes the change's image only where the change itself is newer, and the truncate's mark where
    the truncate is; rows the changes do not touch are marked where older than the truncate."""
    source = marked(rows.withColumn(_CHANGE_SEQ, F.col(C.SEQ)), truncates)
    columns = [f.name for f in target.toDF().schema.fields]
    every: dict[str, str | Column] = {C.quote(c): F.col(f"s.{C.quote(c)}") for c in columns}
    mark: dict[str, str | Column] = {c: F.col(f"s.{c}") for c in (C.DELETED, C.OP, C.SEQ, C.SOURCE_TS)}
    newer = _replaces(C.SEQ)
    merge = (
        target.alias("t")
        .merge(source.alias("s"), condition)
        .whenMatchedUpdate(condition=newer & _replaces(_CHANGE_SEQ), set=every)
        .whenMatchedUpdate(condition=newer, set=mark)
        .whenNotMatchedInsert(values=every)
    )
    for (db, table), at in truncates.items():
        older = same_source(db, table, "t.") & (F.col(f"t.{C.SEQ}") < seq_literal(at))
        merge = merge.whenNotMatchedBySourceUpdate(
            condition=older,
            set={
                C.DELETED: F.lit(True),
                C.OP: F.lit("t"),
                C.SEQ: seq_literal(at),
                C.SOURCE_TS: F.timestamp_millis(F.lit(at.ts_ms)),
            },
        )
    return merge


def _replaces(seq: str) -> Column:
    """Whether the source row ``s`` (its ordering key in column ``seq``) replaces the target row ``t``
    (:func:`~cdc_delta.rows.archival.replaces`)."""
    return replaces(F.col(f"s.{seq}"), F.col(f"s.{C.OP}"), F.col(f"t.{C.SEQ}"), F.col(f"t.{C.OP}"))


def _by_source_updates(target: DeltaTable, version: int) -> int:
    """Rows a MERGE's truncates soft-deleted (its not-matched-by-source updates), from its history entry."""
    for row in target.history(5).select("version", "operationMetrics").collect():
        if row["version"] == version:
            return int((row["operationMetrics"] or {}).get("numTargetRowsNotMatchedBySourceUpdated", 0))
    return 0
