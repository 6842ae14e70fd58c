"""The demo (README command one) ends with Delta tables equal to the generator's source state."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cdc_delta.demo.batches import DEMO_TABLES, demo_config, demo_tables, run_demo
from cdc_delta.demo.generator import ChangeGenerator
from tests.services import cdc_delta

pytestmark = pytest.mark.spark


def test_demo_tables_equal_the_source(spark, tmp_path: Path) -> None:
    results = run_demo(spark, tmp_path, events=300, batches=3)
    assert sum(r.rows_in for r in results) == 302
    assert sum(r.dead_lettered for r in results) == 1 and sum(r.tombstones for r in results) == 1
    source = ChangeGenerator(DEMO_TABLES, seed=42)
    for _ in source.changes(300):
        pass
    config = demo_config(tmp_path)
    plain = spark.read.format("delta").load(config.storage.table_path(config.table("inventory.orders")))
    live = {r["id"]: r for r in plain.where("NOT _cdc_deleted").collect()}
    expected = source.rows[("inventory", "orders")]
    assert set(live) == set(expected)
    assert all(live[k]["amount"] == v["amount"] and live[k]["customer"] == v["customer"] for k, v in expected.items())
    shards = spark.read.format("delta").load(config.storage.table_path(config.table("shop.orders")))
    live_shards = {(r["_cdc_source_db"], r["id"]) for r in shards.where("NOT _cdc_deleted").collect()}
    assert live_shards == {(t.db, k) for t in DEMO_TABLES[1:] for k in source.rows[(t.db, t.table)]}
    # nothing in them looks like a sensitive value: scan-pii raises no false alarm
    path = tmp_path / "cdc.yaml"
    path.write_text(yaml.safe_dump({"app_id": "demo", "storage": {"root": str(tmp_path)}, "tables": demo_tables()}))
    clean = cdc_delta(path, "scan-pii")
    assert clean.returncode == 0, clean.stderr
    for table in ("inventory.orders", "shop.orders"):
        assert f"{table}: nothing found in 2 string columns" in clean.stdout, clean.stdout


def test_the_demo_command_applies_the_events_and_shows_the_tables(spark, tmp_path: Path, capsys) -> None:
    from cdc_delta.cli.main import main

    try:
        assert main(["demo", "--dir", str(tmp_path), "--events", "120", "--batches", "2"]) == 0
    finally:  # the session is the suite's: its catalog keeps no table of this folder
        for table in ("inventory.orders", "shop.orders"):
            spark.sql(f"DROP TABLE IF EXISTS {table}")
    out = capsys.readouterr().out
    assert "demo: 2 batches, 122 records in, 120 landed, 1 dead-lettered, 1 skipped; tables under " in out, out
    assert "FROM shop.orders GROUP BY 1" in out and "dead letters:" in out
