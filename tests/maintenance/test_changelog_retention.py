"""The changelog's retention: maintenance deletes what a table has merged once it is old enough, never a
change a table has not merged yet; the table then still merges to the source's state."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from pyspark.sql import functions as F

from cdc_delta.changelog.table import changelog_path
from cdc_delta.cli.main import main
from cdc_delta.config import parse_config
from cdc_delta.demo.batches import kafka_frame
from cdc_delta.demo.generator import Column, SourceTable, envelope
from cdc_delta.maintenance.changelog import maintain_changelog
from cdc_delta.maintenance.run import run_maintenance
from cdc_delta.merger.rebuild import rebuild_table
from cdc_delta.merger.run import Merger
from cdc_delta.stream.batch import BatchProcessor
from tests.delta_rows import read_canonical

pytestmark = pytest.mark.spark

ITEMS = SourceTable("inventory", "items", (Column("id", "int64"), Column("qty", "int32")))
OTHER = SourceTable("inventory", "other", (Column("id", "int64"), Column("qty", "int32")))


def rec(table: SourceTable, offset: int, key: int, qty: int) -> tuple:
    value = envelope(table, "u", None, {"id": key, "qty": qty}, pos=1000 + offset, server="srv")
    return (f"srv.inventory.{table.table}", 0, offset, b"k", json.dumps(value).encode())


def test_retention_deletes_only_merged_changes(spark, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = parse_config(
        {
            "app_id": "keep",
            "storage": {"root": str(tmp_path)},
            "tables": [
                {"name": "inventory.items", "topics": ["srv.inventory.items"], "key": ["id"]},
                {"name": "inventory.other", "topics": ["srv.inventory.other"], "key": ["id"]},
            ],
            "changelog": {"retention_hours": 1},
            "merge": {"max_delay_seconds": 3600},  # merged only when the test says
            "maintenance": {"vacuum_retention_hours": 0, "allow_short_retention": True},
        }
    )
    merger = Merger(spark, config)
    processor = BatchProcessor(config, listener=merger)
    processor.process(kafka_frame(spark, [rec(ITEMS, 0, 1, 10), rec(OTHER, 0, 1, 20), rec(ITEMS, 1, 2, 11)]), 0)
    merger.merge_tables(["inventory.items"])
    processor.process(kafka_frame(spark, [rec(ITEMS, 2, 1, 12)]), 1)  # landed, not merged

    def landed() -> dict[str, list[int]]:
        rows = spark.read.format("delta").load(changelog_path(config)).groupBy("table").agg(F.collect_list("offset"))
        return {r[0]: sorted(r[1]) for r in rows.collect()}

    assert landed() == {"inventory.items": [0, 1, 2], "inventory.other": [0]}
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=2)  # every change is past the retention
    report = run_maintenance(spark, config, now=later)
    assert report.changelog is not None and report.changelog.rows_deleted == 2
    # items' first landing is merged and old: gone; its second is not merged, other's neither: kept.
    assert landed() == {"inventory.items": [2], "inventory.other": [0]}

    merger.merge_tables(["inventory.items", "inventory.other"])

    def qty(table: str) -> dict[int, int]:
        _, rows = read_canonical(spark, config.storage.table_path(config.table(table)))
        return {r["id"]: r["qty"] for r in rows}

    assert qty("inventory.items") == {1: 12, 2: 11} and qty("inventory.other") == {1: 20}
    # items' first changes are gone: it cannot be rebuilt from the changelog, and nothing changes; other's
    # are all there (retention kept what it had not merged): it can.
    config_file = tmp_path / "cdc.yaml"
    config_file.write_text(yaml.safe_dump(config.model_dump(mode="json", exclude_none=True)))
    assert main(["rebuild", "--config", str(config_file), "--table", "inventory.items"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "cdc-delta: error: cannot rebuild inventory.items from the changelog: its retention "
        "(changelog.retention_hours 1) may have deleted its changes up to landing 1. Read the table from the "
        "source again instead: cdc-delta resnapshot --table inventory.items --delete-missing"
    ], err
    assert qty("inventory.items") == {1: 12, 2: 11}
    assert rebuild_table(spark, config, "inventory.other").changes == 1 and qty("inventory.other") == {1: 20}
    again = run_maintenance(spark, config, now=later)
    assert again.changelog is not None and again.changelog.rows_deleted == 2 and landed() == {}


def test_compacted_changelog_files_keep_the_landings_row_groups(spark, tmp_path: Path) -> None:
    """A reader of one table's changes skips the others' row groups; OPTIMIZE must not merge them into one."""
    wide = SourceTable("inventory", "notes", (Column("id", "int64"), Column("note", "string")))
    config = parse_config(
        {
            "app_id": "groups",
            "storage": {"root": str(tmp_path)},
            "tables": [{"name": "inventory.notes", "topics": ["srv.inventory.notes"], "key": ["id"]}],
            "changelog": {"row_group_mb": 1},
            "merge": {"max_delay_seconds": 3600},
        }
    )
    processor = BatchProcessor(config, listener=Merger(spark, config))
    offset = 0
    for batch_id in range(3):  # three landings of about 1.5 MB each
        records = []
        for _ in range(2500):
            row = {"id": offset, "note": f"{offset:08d}" * 60}
            value = envelope(wide, "c", None, row, pos=1000 + offset, server="srv")
            records.append(("srv.inventory.notes", 0, offset, b"k", json.dumps(value).encode()))
            offset += 1
        processor.process(kafka_frame(spark, records), batch_id)
    report = maintain_changelog(spark, config, {"inventory.notes": -1}, dt.datetime.now(dt.timezone.utc))
    assert report.files_compacted >= 3 and report.rows_deleted == 0, report
    [compacted] = spark.read.format("delta").load(changelog_path(config)).inputFiles()
    metadata = pq.ParquetFile(compacted.removeprefix("file:")).metadata
    sizes = [metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups)]
    assert len(sizes) >= 3 and max(sizes) < 2 * 1024 * 1024, sizes
