"""A table's history against the table: its current versions must be the table's live rows, column for
column, ``_cdc_op`` and ``_cdc_seq`` included (``cdc-delta check --history``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.config import AppConfig, TableConfig
from cdc_delta.history.append import history_path
from cdc_delta.history.versions import IS_CURRENT, read_versions


@dataclass(frozen=True)
class HistoryCheck:
    """One table's history compared with the table."""

    table: str
    path: str
    """Where its history is."""
    live: int = 0
    """The table's live rows."""
    not_live: int = 0
    """Current versions that are no live row of the table."""
    not_current: int = 0
    """Live rows of the table that are no current version."""
    skipped: str | None = None

    @property
    def ok(self) -> bool:
        return not (self.not_live or self.not_current)

    def line(self) -> str:
        if self.skipped:
            return f"{self.table}: history skipped ({self.skipped})"
        if self.ok:
            return f"{self.table}: history ok ({self.live} live rows, each its current version)"
        return (
            f"{self.table}: history DIFFERS: {self.not_live} current versions are no live row, {self.not_current} "
            f"live rows are no current version (of {self.live}): to start it again from the table's rows (its "
            f"older versions lost), delete {self.path} and restart the stream (or the merge job): the table's "
            "next merge starts it"
        )


def check_history(spark: SparkSession, config: AppConfig, tables: Iterable[TableConfig]) -> list[HistoryCheck]:
    """Each of ``tables`` with ``history`` compared with its history (a table without it is left out)."""
    return [_check(spark, config, t) for t in tables if t.history is not None]


def _check(spark: SparkSession, config: AppConfig, table: TableConfig) -> HistoryCheck:
    assert table.history is not None
    path, table_path = history_path(config, table.name), config.storage.table_path(table)
    if not DeltaTable.isDeltaTable(spark, table_path):
        return HistoryCheck(table.name, path, skipped="no table yet")
    if not DeltaTable.isDeltaTable(spark, path):
        return HistoryCheck(table.name, path, skipped="no history yet: it starts at the table's next merge")
    lake = spark.read.format("delta").load(table_path)
    columns = [C.quote(c) for c in lake.columns if not c.startswith(C.PREFIX)] + [C.OP, C.SEQ]
    live = lake.where(~F.col(C.DELETED)).select(columns)
    current = read_versions(spark, path, table.row_key, table.history).where(F.col(IS_CURRENT)).select(columns)
    counts = (
        live.withColumn("_side", F.lit(1))
        .unionByName(current.withColumn("_side", F.lit(2)))
        .groupBy(*columns)
        .agg(
            F.sum(F.when(F.col("_side") == 1, 1).otherwise(0)).alias("_live"),
            F.sum(F.when(F.col("_side") == 2, 1).otherwise(0)).alias("_current"),
        )
        .agg(
            F.sum("_live").alias("live"),
            F.sum(F.greatest(F.col("_current") - F.col("_live"), F.lit(0))).alias("not_live"),
            F.sum(F.greatest(F.col("_live") - F.col("_current"), F.lit(0))).alias("not_current"),
        )
        .first()
    )
    assert counts is not None
    return HistoryCheck(
        table.name, path, int(counts["live"] or 0), int(counts["not_live"] or 0), int(counts["not_current"] or 0)
    )
