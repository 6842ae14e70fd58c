"""Maintenance runs (separate processes) while the batch function keeps merging: nothing is lost.

Batches are merged for as long as each maintenance process runs (at least one batch per round), so the
test's time is the maintenance runs' own, whatever this machine's speed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cdc_delta.config import load_config
from cdc_delta.demo.batches import DEMO_TABLES, demo_tables, kafka_frame
from cdc_delta.demo.generator import ChangeGenerator
from tests.batches import merging_processor
from tests.delta_rows import landings_per_commit

pytestmark = [pytest.mark.integration, pytest.mark.spark]
ROOT = Path(__file__).parents[2]


def maintain(config: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cdc_delta.cli", "maintain", "--config", str(config), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )


def test_maintenance_beside_merges_loses_nothing_and_never_overlaps(spark, tmp_path: Path) -> None:
    config_path = tmp_path / "cdc.yaml"
    config_path.write_text(
        yaml.safe_dump(
            {
                "app_id": "maint",
                "storage": {"root": str(tmp_path / "lake")},
                "merge": {"max_delay_seconds": 0},
                "spark": {"master": "local[1]", "shuffle_partitions": 2, "conf": {"spark.ui.enabled": "false"}},
                "tables": demo_tables(),
                # Tombstones stay (the generator stamps January 2026): this test compares them all.
                "maintenance": {
                    "vacuum_retention_hours": 1,
                    "allow_short_retention": True,
                    "tombstone_retention_hours": 1e6,
                },
            }
        )
    )
    config = load_config(config_path, env={})
    processor = merging_processor(spark, config)
    generator = ChangeGenerator(DEMO_TABLES, seed=11)
    changes = iter(generator.changes(1_000_000))  # drawn as the batches need them
    offsets: dict[str, int] = {}
    batch_id = 0

    def merge_one_batch(size: int = 150) -> None:
        nonlocal batch_id
        records = []
        for change in changes:
            offsets[change.topic] = offsets.get(change.topic, -1) + 1
            records.append((change.topic, 0, offsets[change.topic], change.key, change.value))
            if len(records) == size:
                break
        processor.process(kafka_frame(spark, records), batch_id)
        batch_id += 1

    merge_one_batch()
    first = maintain(config_path)
    second = maintain(config_path)  # overlaps the first: refused by the lock
    merge_one_batch()
    while first.poll() is None or second.poll() is None:
        merge_one_batch()
    out_first, out_second = first.communicate(timeout=300)[0], second.communicate(timeout=300)[0]
    codes = (first.returncode, second.returncode)
    assert set(codes) <= {0, 75}, out_first[-2000:] + out_second[-2000:]
    ran = [out for out in (out_first, out_second) if "maintenance done" in out]
    refused = [out for out in (out_first, out_second) if "maintenance is already running" in out]
    assert len(ran) >= 1 and len(ran) + len(refused) == 2
    assert codes.count(75) == len(refused)  # a held lock: exit 75 (retry later), as the snapshot answers
    final = maintain(config_path)
    out_final = final.communicate(timeout=300)[0]
    assert final.returncode == 0, out_final[-2000:]
    for out in (*ran, out_final):  # quiet: Delta's VACUUM prints a line a table, its history a warning
        assert "Deleted " not in out and "DeltaHistoryManager" not in out, out[-2000:]
    for name, sources in (("inventory.orders", DEMO_TABLES[:1]), ("shop.orders", DEMO_TABLES[1:])):
        path = config.storage.table_path(config.table(name))
        rows = {(r["_cdc_source_db"], r["id"]): r for r in spark.read.format("delta").load(path).collect()}
        live = {(t.db, k): v for t in sources for k, v in generator.rows[(t.db, t.table)].items()}
        deleted = {(t.db, k) for t in sources for k in generator.deleted[(t.db, t.table)]}
        assert {k for k, r in rows.items() if not r["_cdc_deleted"]} == set(live)
        assert {k for k, r in rows.items() if r["_cdc_deleted"]} == deleted
        assert all(rows[k]["amount"] == v["amount"] for k, v in live.items())
        ids = landings_per_commit(spark, path)
        assert ids == sorted(set(ids)), f"a batch was merged twice into {name}"
        files = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["numFiles"]
        assert files <= 2, f"{name} has {files} files after the final OPTIMIZE"
