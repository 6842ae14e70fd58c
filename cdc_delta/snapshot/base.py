"""The snapshot's base: the latest published snapshot before the day, else the stock export (its
rejected lines kept in a Delta table, too many of them failing the run), else nothing."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.storagelevel import StorageLevel

from cdc_delta.config import AppConfig, TableConfig
from cdc_delta.exceptions import SnapshotError
from cdc_delta.snapshot.stock_export import read_stock

logger = logging.getLogger(__name__)

REJECTS_SCHEMA = "table string, dt string, run_id string, file string, line bigint, reason string, content string"


@dataclass(frozen=True)
class Base:
    """The rows the day's changes are applied to."""

    rows: DataFrame | None
    kind: str
    """``stock``, ``snapshot dt=<day>`` or ``none``."""
    expected_rows: int | None = None
    """The row count the base was published with (a previous snapshot)."""
    rejects: int = 0
    release: Callable[[], None] = lambda: None
    """Frees what reading the base cached (a parsed text export), once the snapshot is written."""


def rejects_path(config: AppConfig) -> str:
    return f"{config.storage.root.rstrip('/')}/_cdc_stock_rejects"


def stock_base(spark: SparkSession, config: AppConfig, table: TableConfig, day: str, run_id: str) -> Base:
    """The stock export as the base; its rejects go to the rejects table, more than allowed fail the run."""
    stock = read_stock(spark, table)
    rejects = stock.rejects.persist(StorageLevel.MEMORY_AND_DISK)
    count = rejects.count()
    if count:
        tagged = rejects.select(
            F.lit(table.name).alias("table"), F.lit(day).alias("dt"), F.lit(run_id).alias("run_id"), "*"
        )
        tagged.write.format("delta").mode("append").save(rejects_path(config))
        for r in rejects.limit(5).collect():
            logger.warning("stock reject %s:%s: %s", r["file"], r["line"], r["reason"])
    rejects.unpersist()
    limit = config.snapshot.max_rejects
    if count > limit:
        stock.release()
        raise SnapshotError(
            f"{count} rejected line(s) in the stock export of {table.name}, "
            f"more than snapshot.max_rejects = {limit}: nothing published. The lines and reasons are in "
            f"the Delta table {rejects_path(config)} (run_id = '{run_id}'); fix the export or raise "
            "the threshold"
        )
    return Base(stock.rows, "stock", rejects=count, release=stock.release)


def choose_base(
    spark: SparkSession,
    config: AppConfig,
    table: TableConfig,
    earlier: list[Row],
    day: str,
    run_id: str,
    from_stock: bool,
) -> Base:
    """The latest snapshot in ``earlier`` (published before the day), else the stock export, else nothing."""
    if earlier and not from_stock:
        last = earlier[-1]
        return Base(spark.read.parquet(last["location"]), f"snapshot dt={last['dt']}", last["rows"])
    if table.stock is not None:
        return stock_base(spark, config, table, day, run_id)
    return Base(None, "none")
