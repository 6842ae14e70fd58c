"""Maintenance on a fragmented table: fewer files, same rows, old tombstones purged, old files vacuumed
(and only those: time travel within the retention still works), a checkpoint written."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from pathlib import Path

import pytest

from cdc_delta.config import parse_config
from cdc_delta.delta.snapshot_log import absorbed_before
from cdc_delta.demo.batches import kafka_frame
from cdc_delta.demo.generator import Column, SourceTable, envelope
from cdc_delta.lock import exclusive_lock
from cdc_delta.maintenance.purge import PurgeDecision, purge_decision
from cdc_delta.maintenance.run import run_maintenance
from tests.batches import merging_processor
from tests.delta_rows import read_canonical

pytestmark = pytest.mark.spark
ITEMS = SourceTable("inventory", "items", (Column("id", "int64"), Column("qty", "int32")))
DAY_MS = 86_400_000
HOUR_MS = 3_600_000
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


def test_purge_cutoff_is_the_earliest_of_retention_stream_position_and_snapshot() -> None:
    now = dt.datetime(2026, 1, 10, tzinfo=dt.timezone.utc)
    day = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    assert purge_decision(now, 24, None) == PurgeDecision(None, "no stream position yet")
    assert purge_decision(now, 24, T0) == PurgeDecision(day)
    assert purge_decision(now, 24, T0 + 30 * DAY_MS) == PurgeDecision(dt.datetime(2026, 1, 9, tzinfo=dt.timezone.utc))
    # A snapshot table: none may go before a published snapshot absorbed them, then those before its cut-off.
    later = T0 + 30 * DAY_MS
    assert purge_decision(now, 24, later, True, None) == PurgeDecision(None, "no published snapshot yet")
    assert purge_decision(now, 24, later, True, day) == PurgeDecision(day)
    assert purge_decision(now, 24, None, True, day) == PurgeDecision(None, "no stream position yet")


def test_a_snapshot_absorbed_the_changes_before_its_cut_off_or_before_the_oldest_it_left_out() -> None:
    from pyspark.sql import Row

    def entry(day: int, **kept: dt.datetime) -> Row:
        return Row(cutoff=dt.datetime(2026, 1, day), **kept)

    assert absorbed_before([]) is None
    # Written before absorbed_before was kept (no column) or without a transaction cut (null): the cut-off.
    assert absorbed_before([entry(2), entry(3)]) == dt.datetime(2026, 1, 3, tzinfo=dt.timezone.utc)
    assert absorbed_before([entry(3, absorbed_before=None)]) == dt.datetime(2026, 1, 3, tzinfo=dt.timezone.utc)
    # Cut at a transaction that left out a change whose statement ran before the cut-off: before that one.
    left_out = dt.datetime(2026, 1, 2, 23, 58)
    assert absorbed_before([entry(2), entry(3, absorbed_before=left_out)]) == left_out.replace(tzinfo=dt.timezone.utc)


def test_maintenance_compacts_purges_and_vacuums(spark, tmp_path: Path) -> None:
    config = parse_config(
        {
            "app_id": "m",
            "storage": {"root": str(tmp_path)},
            "merge": {"max_delay_seconds": 0},
            "tables": [{"name": "inventory.items", "topics": ["srv.inventory.items"], "key": ["id"]}],
            "maintenance": {
                "vacuum_retention_hours": 0,
                "allow_short_retention": True,
                "tombstone_retention_hours": 24,
            },
        }
    )
    processor = merging_processor(spark, config)
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
    lock = tmp_path / "_cdc_maintenance.lock"
    assert lock.read_text() == ""  # released: no holder written in it
    with exclusive_lock(lock):  # and free to take
        pass
    # The run's own checkpoint, of the table's last version (the VACUUM END commit), and the pointer to it.
    log = Path(path) / "_delta_log"
    last = max(int(f.name.split(".")[0]) for f in log.glob("*.json"))
    assert t.checkpoint_version == last
    assert checkpoint_files(log, last), sorted(f.name for f in log.iterdir())
    assert json.loads((log / "_last_checkpoint").read_text())["version"] == last
    assert json.loads(reports[0].read_text())["tables"][0]["checkpoint_version"] == last
    # A run with nothing to compact or purge rewrites no file, and writes no checkpoint: VACUUM's two
    # commits alone are cheap to replay.
    again = run_maintenance(spark, config, now=now + dt.timedelta(minutes=1)).tables[0]
    assert (again.files_compacted, again.rows_purged, again.checkpoint_version) == (0, 0, None)
    assert (again.files_before, again.bytes_before) == (again.files_after, again.bytes_after) == (1, t.bytes_after)
    newest = max(int(f.name.split(".")[0]) for f in log.glob("*.json"))
    assert newest > last and not checkpoint_files(log, newest)
    assert json.loads((log / "_last_checkpoint").read_text())["version"] == last


def checkpoint_files(log: Path, version: int) -> list[str]:
    """The checkpoint files of ``version``: classic (``<v>.checkpoint.parquet``), multi-part
    (``<v>.checkpoint.<part>.<parts>.parquet``) or v2 (``<v>.checkpoint.<uuid>.parquet|json``)."""
    prefix = f"{version:020d}.checkpoint."
    return [f.name for f in log.iterdir() if f.name.startswith(prefix) and f.suffix in (".parquet", ".json")]


def age_commits(path: str, versions: range, hours: float) -> set[str]:
    """Move commits ``versions`` of the table, and the files they added, ``hours`` into the past, as
    if written then (Delta stamps removals with the wall clock, and a test cannot wait hours).
    Returns the data files those commits added."""
    shift_ms = round(hours * HOUR_MS)
    log = Path(path) / "_delta_log"
    added = set()
    for version in versions:
        commit = log / f"{version:020d}.json"
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line]
        for action in actions:
            if "commitInfo" in action:
                action["commitInfo"]["timestamp"] -= shift_ms
            if "remove" in action:
                action["remove"]["deletionTimestamp"] -= shift_ms
            if "add" in action:
                action["add"]["modificationTime"] -= shift_ms
                added.add(action["add"]["path"])
                data = Path(path) / action["add"]["path"]
                os.utime(data, (data.stat().st_mtime - shift_ms / 1000,) * 2)
        mtime = commit.stat().st_mtime - shift_ms / 1000
        commit.write_text("".join(json.dumps(a) + "\n" for a in actions))
        os.utime(commit, (mtime, mtime))
        # Hadoop's checksum of the rewritten commit, and Delta's summary of the version, no longer match.
        for stale in (f".{version:020d}.json.crc", f"{version:020d}.crc", f".{version:020d}.crc.crc"):
            (log / stale).unlink(missing_ok=True)
    return added


def test_vacuum_keeps_what_time_travel_within_retention_needs(spark, tmp_path: Path) -> None:
    config = parse_config(
        {
            "app_id": "m",
            "storage": {"root": str(tmp_path)},
            "merge": {"max_delay_seconds": 0},
            "tables": [{"name": "inventory.items", "topics": ["srv.inventory.items"], "key": ["id"]}],
            "maintenance": {"vacuum_retention_hours": 1, "allow_short_retention": True, "vacuum_interval_hours": 24},
        }
    )
    processor = merging_processor(spark, config)
    path = config.storage.table_path(config.tables[0])

    def merge(batch_id: int, keys: range) -> int:
        op = "c" if batch_id in (0, 3) else "u"
        records = [rec(10 * batch_id + i, op, key, T0) for i, key in enumerate(keys)]  # qty = offset
        result = processor.process(kafka_frame(spark, records), batch_id).merge.tables[0].merge
        assert result is not None and result.version is not None
        return result.version

    # 3 h ago: keys 0-9 inserted (files A), then all updated (files B replace A: A removed 3 h ago).
    v_insert = merge(0, range(10))
    v_update = merge(1, range(10))
    files_a = age_commits(path, range(v_insert + 1), hours=3)
    age_commits(path, range(v_insert + 1, v_update + 1), hours=3)
    spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # forget the unaged log
    # Now: all updated again (B removed now), keys 10-19 inserted; maintenance's OPTIMIZE then removes
    # both of these commits' files now too.
    v_update2 = merge(2, range(10))
    v_insert2 = merge(3, range(10, 20))
    on_disk_before = {f.name for f in Path(path).glob("*.parquet")}
    assert files_a and files_a < on_disk_before

    report = run_maintenance(spark, config, now=dt.datetime.now(dt.timezone.utc))
    t = report.tables[0]
    on_disk = {f.name for f in Path(path).glob("*.parquet")}
    # Exactly the files removed more than 1 h ago are gone: the compacted file is the one new file.
    assert on_disk_before - on_disk == files_a and t.files_vacuumed == len(files_a)
    assert len(on_disk - on_disk_before) == 1 and t.files_compacted >= 2

    def at(version: int) -> dict[int, int]:
        df = spark.read.format("delta").option("versionAsOf", version).load(path)
        return {r["id"]: r["qty"] for r in df.collect()}

    # Every version that was current within the last hour still reads right; v_update was the table
    # until v_update2 committed (now), so its files (B) stay though the commit itself is 3 h old.
    assert at(v_update) == {k: 10 + k for k in range(10)}
    assert at(v_update2) == {k: 20 + k for k in range(10)}
    assert at(v_insert2) == {k: 20 + k for k in range(20)}
    # The version superseded 3 h ago lost its files: it cannot be read any more.
    with pytest.raises(Exception, match="(?i)not exist|FileNotFound|FILE_NOT_EXIST"):
        at(v_insert)

    # maintenance.vacuum_interval_hours 24: the next runs VACUUM only once the last VACUUM (when Delta
    # wrote _last_vacuum_info) is a day old. A stray file past retention shows which run listed the folder.
    info = Path(path) / "_delta_log" / "_last_vacuum_info"
    stray = Path(path) / "part-00000-stray.snappy.parquet"
    stray.write_bytes(b"left by a failed write")
    os.utime(stray, (time.time() - 3 * 3600,) * 2)
    last = info.stat().st_mtime
    t = run_maintenance(spark, config, now=dt.datetime.now(dt.timezone.utc)).tables[0]
    assert not t.vacuumed and t.files_vacuumed == 0 and stray.exists() and info.stat().st_mtime == last
    os.utime(info, (last - 25 * 3600,) * 2)
    t = run_maintenance(spark, config, now=dt.datetime.now(dt.timezone.utc)).tables[0]
    assert t.vacuumed and not stray.exists() and info.stat().st_mtime > last
