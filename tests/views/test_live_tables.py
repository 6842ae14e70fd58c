"""Hive tables over the live Delta tables (symlink manifests): through the metastore's table and view,
a reader gets the Delta table's rows and live rows after merges, a column added with a default and a
key widened INT -> BIGINT (the real connector's wide table), a tombstone purge and OPTIMIZE + VACUUM."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdc_delta.config import parse_config
from cdc_delta.delta.tables import MANIFEST_PROPERTY
from cdc_delta.demo.batches import kafka_frame
from cdc_delta.maintenance.run import run_maintenance
from cdc_delta.views.live_tables import live_tables, register
from tests.batches import merging_processor
from tests.decode.test_avro import captured
from tests.hive_manifest import manifest_files, read_symlink_table, read_view
from tests.maintenance.test_maintenance import DAY_MS, T0, rec
from tests.services import ROOT

pytestmark = pytest.mark.spark


def rows(df: Any) -> list:
    return sorted((tuple(r) for r in df.collect()), key=repr)


def assert_readers_see_delta(spark: Any, config: Any) -> None:
    for live in live_tables(spark, config):
        delta = spark.read.format("delta").load(config.storage.table_path(config.table(live.table)))
        through_table = read_symlink_table(spark, live.hive_table)
        assert [f.name.lower() for f in through_table.schema] == [f.name.lower() for f in delta.schema]
        assert rows(through_table) == rows(delta) and rows(delta), live.table
        live_rows = read_view(spark, live.view, live.hive_table)
        assert rows(live_rows) == rows(delta.where("NOT _cdc_deleted")), live.view


def test_live_tables_read_like_delta_through_schema_changes_purge_and_vacuum(spark: Any, tmp_path: Path) -> None:
    data = {
        "app_id": "live",
        "storage": {"root": str(tmp_path / "lake")},
        "merge": {"max_delay_seconds": 0},
        "tables": [
            {"name": "e2e.wide", "topics": ["cap.e2e.wide"], "key": ["id"]},
            {"name": "inventory.items", "topics": ["srv.inventory.items"], "key": ["id"]},
        ],
        "live_tables": {"enabled": True, "database": "live_it"},
        "maintenance": {
            "vacuum_retention_hours": 0,
            "allow_short_retention": True,
            "tombstone_retention_hours": 24,
        },
        "spark": {"master": "local[1]", "conf": {"spark.ui.enabled": "false"}},
    }
    config = parse_config(data)
    processor = merging_processor(spark, config)
    wide = [r for r in captured() if r[0] == "cap.e2e.wide"]
    batches = [wide[i : i + 6] for i in range(0, len(wide), 6)]
    items = [[rec(i, "c", i, T0) for i in range(10)], [rec(10 + i, "d", i, T0 + 1000) for i in range(3)]]
    items += [[rec(13 + i, "c", 20 + i, T0 + 2 * DAY_MS)] for i in range(4)]
    first = len(batches) // 2
    for batch_id, batch in enumerate(batches[:first] + items[:1]):  # wide: before its ALTERs
        processor.process(kafka_frame(spark, batch if batch_id < first else items[0]), batch_id)

    created = register(spark, config)
    assert {(t.hive_table, t.view, t.action) for t in created} == {
        ("live_it.wide_all", "live_it.wide", "created"),
        ("live_it.items_all", "live_it.items", "created"),
    }
    assert "ROW FORMAT SERDE" in created[0].table_ddl and "_symlink_format_manifest" in created[0].manifest
    assert_readers_see_delta(spark, config)

    # The rest: the wide table gains a column and its key widens; items get deletes, a file per batch.
    # Delta rewrites the manifests after each commit; the readers see each change at once.
    rest = batches[first:] + items[1:]
    for batch_id, batch in enumerate(rest, start=first + 1):
        processor.process(kafka_frame(spark, batch), batch_id)
    for table in config.tables:
        properties = spark.sql(f"SHOW TBLPROPERTIES delta.`{config.storage.table_path(table)}`").collect()
        assert {(r["key"], r["value"]) for r in properties} >= {(MANIFEST_PROPERTY, "true")}
    again = {t.hive_table: t.action for t in register(spark, config)}
    assert again == {"live_it.wide_all": "re-created (columns changed)", "live_it.items_all": "unchanged"}
    assert dict(spark.table("live_it.wide_all").dtypes)["id"] == "bigint"
    assert_readers_see_delta(spark, config)

    items_path = config.storage.table_path(config.table("inventory.items"))
    listed_before = set(manifest_files(f"{items_path}/_symlink_format_manifest"))
    now = dt.datetime.fromtimestamp((T0 + 3 * DAY_MS) / 1000, tz=dt.timezone.utc)
    report = {t.table: t for t in run_maintenance(spark, config, now=now).tables}
    assert report["inventory.items"].rows_purged == 3 and report["inventory.items"].files_vacuumed > 0
    listed_after = manifest_files(f"{items_path}/_symlink_format_manifest")
    assert len(listed_after) == 1 and not set(listed_after) & listed_before  # OPTIMIZE's one file
    assert all(Path(f.removeprefix("file:")).exists() for f in listed_after)  # nothing listed was vacuumed
    assert_readers_see_delta(spark, config)

    # The command registers the same tables in the config's own metastore (embedded Derby under the lake).
    (tmp_path / "cdc.yaml").write_text(yaml.safe_dump(data))
    cli = [sys.executable, "-m", "cdc_delta.cli", "live-tables", "--config", str(tmp_path / "cdc.yaml"), "--register"]
    done = subprocess.run(cli, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        "e2e.wide: Hive table live_it.wide_all, view live_it.wide (created)",
        "inventory.items: Hive table live_it.items_all, view live_it.items (created)",
    ]
    assert (tmp_path / "lake" / "_cdc_metastore").is_dir()


def test_registering_needs_live_tables_enabled(tmp_path: Path) -> None:
    config = tmp_path / "cdc.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "app_id": "x",
                "storage": {"root": str(tmp_path)},
                "merge": {"max_delay_seconds": 0},
                "tables": [{"name": "a.b", "topics": ["t"], "key": ["id"]}],
            }
        )
    )
    cli = [sys.executable, "-m", "cdc_delta.cli", "live-tables", "--config", str(config), "--register"]
    refused = subprocess.run(cli, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert refused.returncode == 2 and "live_tables.enabled is off: set it to true" in refused.stderr
