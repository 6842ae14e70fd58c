"""Maintenance on a fragmented table: fewer files, same rows, old tombstones purged, old files vacuumed."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from cdc_delta.batch import BatchProcessor
from cdc_delta.config import parse_config
from cdc_delta.demo import kafka_frame
from cdc_delta.generator import Column, SourceTable, envelope
from cdc_delta.maintenance import purge_cutoff, run_maintenance
from tests.delta_rows import read_canonical

pytestmark = pytest.mark.spark
ITEMS = SourceTable("inventory", "items", (Column("id", "int64"), Column("qty", "int32")))
DAY_MS = 86_400_000
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def rec(offset: int, op: str, key: int, ts_ms: int, partition: int = 0) -> tuple:
    values = {"id": key, "qty": offset}
    value = envelope(
        ITEMS,
        op,
        values if op == "d" else None,
        None if op == "d" else values,
        pos=1000 + offset,
        ts_ms=ts_ms,
        server="srv",
    )
    return ("srv.inventory.items", partition, offset, b"k", json.dumps(value).encode())


def test_purge_cutoff_is_the_earlier_of_retention_and_stream_position() -> None:
    now = dt.datetime(2026, 1, 10, tzinfo=dt.timezone.utc)
    assert purge_cutoff(now, 24, None) is None
    assert purge_cutoff(now, 24, T0) == dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    assert purge_cutoff(now, 24, T0 + 30 * DAY_MS) == dt.datetime(2026, 1, 9, tzinfo=dt.timezone.utc)


def test_maintenance_compacts_purges_and_vacuums(spark, tmp_path: Path) -> None:
    config = parse_config(
        {
            "app_id": "m",
            "storage": {"root": str(tmp_path)},
            "tables": [{"name": "inventory.items", "topics": ["srv.inventory.items"], "key": ["id"]}],
            "maintenance": {
                "vacuum_retention_hours": 0,
                "allow_short_retention": True,
                "tombstone_retention_hours": 24,
            },
        }
    )
    processor = BatchProcessor(config)
    offset = 0
    # Day 0: keys 0-9 inserted; keys 0-2 deleted. Day 2: keys 20-25 inserted, a batch each. Day 5: key 3
    # deleted.
    # Partition 1 only ever reaches day 1, so the stream has passed nothing after day 1 on every partition.
    batches = [[rec(i, "c", i, T0) for i in range(10)], [rec(10 + i, "d", i, T0 + 1000) for i in range(3)]]
    batches += [[rec(13 + i, "c", 20 + i, T0 + 2 * DAY_MS)] for i in range(6)]  # one new file each
    batches += [[rec(19, "d", 3, T0 + 5 * DAY_MS), rec(0, "c", 99, T0 + DAY_MS, partition=1)]]
    for batch_id, batch in enumerate(batches):
        processor.process(kafka_frame(spark, batch), batch_id)
        offset += len(batch)
    path = config.storage.table_path(config.tables[0])
    _, before = read_canonical(spark, path)
    parquet_before = len(list(Path(path).glob("*.parquet")))
    now = dt.datetime.fromtimestamp((T0 + 5 * DAY_MS + DAY_MS // 2) / 1000, tz=dt.timezone.utc)
    report = run_maintenance(spark, config, now=now)
    t = report.tables[0]
    assert t.files_before >= 6 and t.files_after == 1 and t.files_compacted == t.files_before
    # Cut-off = min(now - 24 h = day 4.5, stream watermark = day 1 on partition 1): keys 0-2 (day 0) go;
    # key 3 (day 5) stays: it is younger than the watermark.
    assert t.rows_purged == 3
    _, after = read_canonical(spark, path)
    assert after == [r for r in before if r["id"] not in (0, 1, 2)]
    assert any(r["id"] == 3 and r["_cdc_deleted"] for r in after)
    assert t.files_vacuumed > 0 and len(list(Path(path).glob("*.parquet"))) < parquet_before
    reports = list((tmp_path / "_cdc_maintenance_reports").glob("maintenance-*.json"))
    assert len(reports) == 1 and json.loads(reports[0].read_text())["tables"][0]["rows_purged"] == 3
    assert not (tmp_path / "_cdc_maintenance.lock").exists()
