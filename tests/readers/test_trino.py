"""Trino reads the replicated tables as Spark does: a real Trino server (476, its Delta Lake connector over
the local file system, tables registered in a file metastore with ``register_table``, as the README says)
on the tables the demo's changes leave (inserts, updates, deletes, a table folded from several shards,
merged in four rounds): every row, column by column, and the column types. Timestamps compare at
milliseconds, which is what Trino's Delta connector reads (``timestamp(3) with time zone``, rounded)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession

from cdc_delta.config import load_config
from cdc_delta.demo.batches import DEMO_TABLES, demo_config, run_demo
from cdc_delta.demo.generator import ChangeGenerator
from cdc_delta.demo.producer import ensure_topics, produce
from tests.services import ROOT, Trino, caught_up_here, write_config

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


def test_trino_reads_the_nightly_snapshot_and_the_live_tables_through_the_hive_metastore(
    spark: SparkSession, kafka_bootstrap: str, trino: Trino, tmp_path: Path
) -> None:
    """What a team with a Hive metastore gets: the stream keeps each table's symlink manifest current
    (``live_tables.enabled``); the nightly ``cdc-delta snapshot`` publishes ``ods.<table>`` dt=D and
    ``cdc-delta live-tables --register`` registers the live tables and their views, each in its own
    process with Spark on the Thrift metastore of ``snapshot.metastore_uri``; Trino's Hive connector
    reads all three from that metastore."""
    server = "trinohive"
    generator = ChangeGenerator(DEMO_TABLES, seed=23, server=server)  # source times on 2026-01-01 (UTC)
    changes = list(generator.changes(400))
    ensure_topics(kafka_bootstrap, sorted({c.topic for c in changes}), partitions=1)
    produce(kafka_bootstrap, changes)
    config_path = write_config(tmp_path, kafka_bootstrap, server)
    data = yaml.safe_load(config_path.read_text())
    data["tables"][1]["name"] = "shop.shop_orders"  # live tables are named without the database: one each
    data["snapshot"] = {"idle_grace_minutes": 1, "metastore_uri": trino.metastore_uri}
    data["live_tables"] = {"enabled": True, "database": "cdc_live"}
    config_path.write_text(yaml.safe_dump(data))
    caught_up_here(config_path)

    def cdc_delta(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "cdc_delta.cli", *args, "--config", str(config_path)]
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=400)
        assert done.returncode == 0, done.stderr[-3000:]
        return done

    published = cdc_delta("snapshot", "--date", "2026-01-01")
    registered = cdc_delta("live-tables", "--register")
    assert "cdc_live.orders_all" in registered.stdout and "cdc_live.shop_orders" in registered.stdout, registered.stdout
    assert "ods.orders dt=2026-01-01:" in published.stdout, published.stdout
    config = load_config(config_path, env={})
    select = ", ".join(t for t, _ in COLUMNS.values() if not t.startswith("_cdc"))

    # The snapshot partition: the source's rows at the end of the day (inventory.orders only: the shards'
    # keys include the shard, which the stock export cannot carry).
    snapshot = trino.query(f"SELECT {select} FROM hive.ods.orders WHERE dt = '2026-01-01'")
    report = json.loads(next((tmp_path / "lake" / "_cdc_snapshot_reports").glob("*.json")).read_text())
    by_spark = spark.read.parquet(report["tables"][0]["location"])
    assert len(snapshot) == len(generator.rows[("inventory", "orders")]) > 20
    assert rows(snapshot) == rows(
        by_spark.selectExpr(*(s for t, s in COLUMNS.values() if not t.startswith("_cdc"))).collect()
    )

    # The live tables (every row of the Delta table, through its manifest) and their views (live rows).
    for name, short in (("inventory.orders", "orders"), ("shop.shop_orders", "shop_orders")):
        delta = spark.read.format("delta").load(config.storage.table_path(config.table(name)))
        by_trino = trino.query(f"SELECT {', '.join(t for t, _ in COLUMNS.values())} FROM hive.cdc_live.{short}_all")
        assert len(by_trino) > 20 and rows(by_trino) == rows(
            delta.selectExpr(*(s for _, s in COLUMNS.values())).collect()
        )
        live = trino.query(f"SELECT id FROM hive.cdc_live.{short}")
        assert sorted(r[0] for r in live) == sorted(r["id"] for r in delta.where("NOT _cdc_deleted").collect()), name
        assert delta.where("_cdc_deleted").count() > 0, name  # the view leaves out rows the table holds
