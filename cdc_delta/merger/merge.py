"""The guarded, idempotent MERGE of one table's deduplicated events into its Delta table.

Per key, the newer event (by ``_cdc_seq``) wins and an older or equal one changes nothing:
matched and newer -> every column is replaced by the event's image (a delete keeps the row with
``_cdc_deleted = true`` and the before image; a re-insert revives it); not matched -> insert (a delete
inserts a tombstone, since the key may live in the stock export). Each commit carries a Delta
transaction id (app and table) with the batch id as version, so a replayed batch commits nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.delta.commits import Commit, StreamCommit, app_commits, delta_transaction
from cdc_delta.delta.tables import current_version
from cdc_delta.events.ordering import SEQ_FIELDS, Seq
from cdc_delta.retry import retry_on_conflict

logger = logging.getLogger(__name__)

# Key column types whose batch min/max are added to the merge condition so file statistics prune.
_PRUNABLE = ("tinyint", "smallint", "int", "bigint", "string", "date", "timestamp")


@dataclass(frozen=True)
class MergeResult:
    """What one MERGE (and truncate) did to one table."""

    table: str
    source_rows: int = 0
    inserted: int = 0
    updated: int = 0
    truncated: int = 0
    version: int | None = None
    replayed: bool = False
    """True when Delta skipped the commit because this batch id was already applied."""


def _committed(table: DeltaTable, record: StreamCommit) -> tuple[int | None, dict[str, str]]:
    """The version and metrics of the commit of this write (app, epoch, batch, operation), if it happened.

    Looks at the newest commit first (right after a MERGE it is this one, unless maintenance committed
    in between), then the last 20: enough to report a replay; the transaction id guards it anyway.
    """
    for limit in (1, 20):
        for commit in app_commits(table, limit=limit):
            if commit.record.same_write(record):
                return commit.version, commit.metrics
    return None, {}


def _source_summary(rows: DataFrame, key: str, type_name: str) -> tuple[int, Column | None]:
    """The batch's row count, and ``t.key BETWEEN min AND max`` of the batch, which lets Delta skip
    files by their statistics (None where the key's type has no useful order or the batch is empty);
    one job, which also fills ``rows``'s cache."""
    prunable = type_name in _PRUNABLE
    bounds = [F.min(C.quote(key)).alias("lo"), F.max(C.quote(key)).alias("hi")] if prunable else []
    summary = rows.agg(F.count(F.lit(1)).alias("n"), *bounds).first()
    assert summary is not None
    if not prunable or summary["lo"] is None:
        return summary["n"], None
    return summary["n"], F.col(f"t.{C.quote(key)}").between(F.lit(summary["lo"]), F.lit(summary["hi"]))


def merge_rows(
    spark: SparkSession,
    path: str,
    rows: DataFrame,
    key: Sequence[str],
    key_types: dict[str, str],
    commit: Commit,
    table_name: str,
    check_replay: bool = True,
) -> MergeResult:
    """MERGE ``rows`` (at most one per key: see :func:`cdc_delta.merger.dedupe.latest_per_key`) into ``path``.

    A batch this app already merged into the table is not merged again (``replayed=True``): with
    ``check_replay`` the commit history is looked at first; always, Delta's transaction id refuses it.
    """
    target = DeltaTable.forPath(spark, path)
    commit = Commit(commit.txn_app_id, commit.record.as_operation("merge"))
    if check_replay:
        done, _ = _committed(target, commit.record)
        if done is not None:
            return MergeResult(table=table_name, version=done, replayed=True)
    condition = F.lit(True)
    for k in key:
        condition = condition & (F.col(f"t.{C.quote(k)}") == F.col(f"s.{C.quote(k)}"))
    source_rows, pruning = _source_summary(rows, key[0], key_types.get(key[0], ""))
    if pruning is not None:
        condition = pruning & condition
    merge = (
        target.alias("t")
        .merge(rows.alias("s"), condition)
        .whenMatchedUpdateAll(condition=F.col(f"s.{C.SEQ}") > F.col(f"t.{C.SEQ}"))
        .whenNotMatchedInsertAll()
    )
    with delta_transaction(spark, commit):
        # A conflict with maintenance (OPTIMIZE, purge) is retried: the guard and the transaction id
        # make a second attempt safe.
        metrics = retry_on_conflict(lambda: merge.execute().collect(), f"MERGE into {table_name}")
    if not metrics:  # Delta skipped it: this batch id was committed, by a concurrent run of the batch
        return MergeResult(table=table_name, replayed=True)
    return MergeResult(
        table=table_name,
        source_rows=source_rows,
        inserted=int(metrics[0]["num_inserted_rows"]),
        updated=int(metrics[0]["num_updated_rows"]),
        version=current_version(spark, path),
    )


def seq_literal(seq: Seq) -> Column:
    """A literal ``_cdc_seq`` struct."""
    fields = zip(SEQ_FIELDS, seq, strict=True)
    return F.struct(*[F.lit(value).cast(type_name).alias(name) for (name, type_name), value in fields])


def apply_truncate(
    spark: SparkSession,
    path: str,
    source_db: str | None,
    source_table: str | None,
    seq: Seq,
    commit: Commit,
) -> tuple[int, bool]:
    """Soft-delete every row of one source table older than a TRUNCATE; returns (rows, replayed)."""
    target = DeltaTable.forPath(spark, path)
    if _committed(target, commit.record)[0] is not None:
        return 0, True
    same_source = F.col(C.SOURCE_DB).eqNullSafe(F.lit(source_db)) & F.col(C.SOURCE_TABLE).eqNullSafe(
        F.lit(source_table)
    )
    with delta_transaction(spark, commit):
        retry_on_conflict(
            lambda: target.update(
                condition=same_source & (F.col(C.SEQ) < seq_literal(seq)),
                set={
                    C.DELETED: F.lit(True),
                    C.OP: F.lit("t"),
                    C.SEQ: seq_literal(seq),
                    C.SOURCE_TS: F.timestamp_millis(F.lit(seq.ts_ms)),
                },
            ),
            f"truncate of {source_db}.{source_table}",
        )
    version, metrics = _committed(target, commit.record)
    return int(metrics.get("numUpdatedRows", 0)), version is None
