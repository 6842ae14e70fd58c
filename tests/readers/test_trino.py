"""Trino reads the replicated tables as Spark does: a real Trino server (476, its Delta Lake connector over
the local file system, tables registered in a file metastore with ``register_table``, as the README says)
on the tables the demo's changes leave (inserts, updates, deletes, a table folded from several shards,
merged in four rounds): every row, column by column, and the column types. Timestamps compare at
milliseconds, which is what Trino's Delta connector reads (``timestamp(3) with time zone``, rounded)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from cdc_delta.demo.batches import demo_config, run_demo
from tests.services import Trino

pytestmark = [pytest.mark.integration, pytest.mark.spark]

# The same projection in both engines' SQL: values as text where their JSON or Python forms differ.
COLUMNS = {
    "id": ("id", "id"),
    "customer": ("customer", "customer"),
    "amount": ("CAST(amount AS varchar)", "CAST(amount AS string)"),
    "status": ("status", "status"),
    "order_date": ("CAST(order_date AS varchar)", "CAST(order_date AS string)"),
    # Trino's Delta connector reads a timestamp as timestamp(3): the microseconds Delta holds, rounded.
    "updated_at": (
        "date_diff('millisecond', TIMESTAMP '1970-01-01 00:00:00 UTC', updated_at)",
        "CAST(round(unix_micros(updated_at) / 1000) AS bigint)",
    ),
    "_cdc_op": ("_cdc_op", "_cdc_op"),
    "_cdc_deleted": ("_cdc_deleted", "_cdc_deleted"),
    "_cdc_seq": ("_cdc_seq.pos", "_cdc_seq.pos"),
    "_cdc_source_db": ("_cdc_source_db", "_cdc_source_db"),
    "_cdc_offset": ("_cdc_offset", "_cdc_offset"),
}


def rows(engine_rows: list[Any]) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in engine_rows), key=repr)


def test_trino_reads_every_replicated_row_and_type_as_spark(spark: SparkSession, trino: Trino, tmp_path: Path) -> None:
    run_demo(spark, tmp_path, events=400, batches=4)
    config = demo_config(tmp_path)
    schema = f"cdc_{tmp_path.name.lower().replace('-', '_')}"
    trino.query(f"CREATE SCHEMA delta.{schema} WITH (location = 'local://{tmp_path}')")
    for name in ("inventory.orders", "shop.orders"):
        path = config.storage.table_path(config.table(name))
        table = name.replace(".", "_")
        trino.query(
            f"CALL delta.system.register_table(schema_name => '{schema}', table_name => '{table}', "
            f"table_location => 'file://{path}')"
        )
        by_trino = trino.query(f"SELECT {', '.join(t for t, _ in COLUMNS.values())} FROM delta.{schema}.{table}")
        frame = spark.read.format("delta").load(path)
        by_spark = frame.selectExpr(*(s for _, s in COLUMNS.values())).collect()
        assert len(by_spark) > 50 and rows(by_trino) == rows(by_spark), name
        live = trino.query(f"SELECT count(*) FROM delta.{schema}.{table} WHERE NOT _cdc_deleted")
        assert live == [[frame.where("NOT _cdc_deleted").count()]]
        types = dict((c, t) for c, t, *_ in trino.query(f"DESCRIBE delta.{schema}.{table}"))
        assert [c for c in types] == frame.columns
        assert types["amount"] == "decimal(10,2)" and types["order_date"] == "date", types
        assert types["updated_at"] == types["_cdc_source_ts"] == "timestamp(3) with time zone", types
