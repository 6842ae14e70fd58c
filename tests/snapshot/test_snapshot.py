"""The nightly snapshot against a reference model: a stock export of 200 rows, three days of changes
(updates and deletes of stock-only keys, inserts, re-inserts, shards), a snapshot per day built on the
previous one; each equals the model at the stream position it records, read by Spark and by pyarrow."""

from __future__ import annotations

import datetime as dt
import decimal
import gzip
import json
import random
from pathlib import Path
from typing import Any

import pytest

from cdc_delta.config import AppConfig, parse_config
from cdc_delta.delta.snapshot_log import published
from cdc_delta.demo.batches import kafka_frame
from cdc_delta.demo.generator import ORDER_COLUMNS, SourceTable, envelope
from cdc_delta.exceptions import NotReady, SnapshotError
from cdc_delta.maintenance.run import run_maintenance
from cdc_delta.snapshot import hive_publish
from cdc_delta.snapshot.run import run_snapshot
from cdc_delta.stream.batch import BatchProcessor
from tests.batches import merging_processor
from tests.delta_rows import arrow_rows, canonical_columns
from tests.oracle import canonical

pytestmark = pytest.mark.spark

DAY0 = dt.date(2026, 3, 1)
T0 = int(dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc).timestamp() * 1000)
DAY_MS = 86_400_000
SOURCES = (
    SourceTable("inventory", "orders", ORDER_COLUMNS),
    SourceTable("shop_0", "orders_000", ORDER_COLUMNS),
    SourceTable("shop_1", "orders_001", ORDER_COLUMNS),
)
COLUMNS = {
    "id": "bigint",
    "customer": "string",
    "amount": "decimal(10,2)",
    "status": "string",
    "order_date": "date",
    "updated_at": "timestamp",
}
STOCK_ROWS = 200


def topic(source: SourceTable) -> str:
    return f"srv.{source.db}.{source.table}"


def make_config(root: Path, database: str, maintenance: dict[str, Any] | None = None, **snapshot: Any) -> AppConfig:
    return parse_config(
        {
            "app_id": "snap",
            "storage": {"root": str(root)},
            "merge": {"max_delay_seconds": 0},
            "tables": [
                {
                    "name": "inventory.orders",
                    "topics": [topic(s) for s in SOURCES],
                    "key": ["id"],
                    "columns": COLUMNS,
                    "stock": {"path": str(root / "export"), "delimiter": "\t", "null_marker": "\\N"},
                }
            ],
            "snapshot": {"database": database, **snapshot},
            "maintenance": maintenance or {},
        }
    )


def order_row(rng: random.Random, key: int) -> dict[str, Any]:
    when = dt.datetime(2026, 1, 1) + dt.timedelta(seconds=rng.randrange(86_400 * 30), microseconds=rng.randrange(10**6))
    return {
        "id": key,
        "customer": None if rng.random() < 0.1 else f"customer-{rng.randrange(1000)}",
        "amount": decimal.Decimal(rng.randrange(1, 10**7)).scaleb(-2),
        "status": rng.choice(("new", "paid", "shipped")),
        "order_date": when.date(),
        "updated_at": when,
    }


def write_stock(root: Path, rows: dict[int, dict[str, Any]]) -> None:
    """Two gzip files, tab-separated, \\N for NULL, as DataX's txtfilewriter writes them."""
    folder = root / "export"
    folder.mkdir()
    keys = sorted(rows)

    def line(r: dict[str, Any]) -> str:
        values = [r["id"], r["customer"], r["amount"], r["status"], r["order_date"], r["updated_at"]]
        return "\t".join("\\N" if v is None else str(v) for v in values)

    for n, part in enumerate((keys[: len(keys) // 2], keys[len(keys) // 2 :])):
        body = "".join(line(rows[k]) + "\n" for k in part)
        (folder / f"orders__{n:04d}-6c1f").write_bytes(gzip.compress(body.encode()))


class World:
    """The source: the state after each change, and the change events as Kafka records."""

    def __init__(self, seed: int = 11) -> None:
        self.rng = random.Random(seed)
        self.stock = {k: order_row(self.rng, k) for k in range(1, STOCK_ROWS + 1)}
        self.state = dict(self.stock)
        self.deleted: set[int] = set()
        self.next_key = 10_000
        self.pos = 4
        self.offsets: dict[tuple[str, int], int] = {}
        self.records: list[tuple[str, int, int, bytes, bytes]] = []
        self.events: list[tuple[str, int, int, str, int, dict[str, Any] | None]] = []  # topic, part, off, op, key, row

    def emit(self, op: str, key: int, ts_ms: int, source: SourceTable | None = None) -> None:
        source = source or self.rng.choice(SOURCES)
        before = self.state.get(key)
        after = None if op == "d" else order_row(self.rng, key)
        self.pos += 100
        value = envelope(source, op, before if op != "c" else None, after, pos=self.pos, ts_ms=ts_ms, server="srv")
        part = key % 2
        where = (topic(source), part)
        offset = self.offsets.get(where, 0)
        self.offsets[where] = offset + 1
        self.records.append((where[0], part, offset, json.dumps({"id": key}).encode(), json.dumps(value).encode()))
        self.events.append((where[0], part, offset, op, key, after))
        if after is None:
            self.state.pop(key, None)
            self.deleted.add(key)
        else:
            self.state[key] = after
            self.deleted.discard(key)

    def day(self, n: int, changes: int) -> None:
        """One day: first an event on every topic partition (so the stream passes yesterday's end
        everywhere), then updates, deletes (stock-only keys included), inserts and re-inserts."""
        start = T0 + n * DAY_MS
        for source in SOURCES:
            for part in (0, 1):
                key = self.next_key + (part - self.next_key % 2) % 2
                self.next_key = key + 1
                self.emit("c", key, start + 1000, source)
        for i in range(changes):
            ts = start + 60_000 * (i + 1)
            roll = self.rng.random()
            live = sorted(self.state)
            if roll < 0.3:
                self.emit("u", self.rng.choice(live), ts)
            elif roll < 0.5:
                stock_only = [k for k in live if k <= STOCK_ROWS]
                self.emit("d", self.rng.choice(stock_only or live), ts)
            elif roll < 0.6 and self.deleted:
                self.emit("c", self.rng.choice(sorted(self.deleted)), ts)
            else:
                self.emit("c", self.next_key, ts)
                self.next_key += 1

    def expected(self, positions: dict[str, dict[str, int]]) -> list[dict[str, Any]]:
        """The source table after every event up to ``positions`` (a snapshot's recorded offsets)."""
        rows = dict(self.stock)
        for t, part, offset, _op, key, after in self.events:
            if offset > positions.get(t, {}).get(str(part), -1):
                continue
            if after is None:
                rows.pop(key, None)
            else:
                rows[key] = after
        return sorted(({c: canonical(v) for c, v in r.items()} for r in rows.values()), key=repr)


def spark_rows(spark: Any, config: AppConfig, day: dt.date) -> list[dict[str, Any]]:
    table = hive_publish.hive_table(config, config.tables[0])
    df = spark.table(table).where(f"dt = '{day}'").drop("dt")
    return sorted((r.asDict() for r in df.select(*canonical_columns(df)).collect()), key=repr)


def apply(spark: Any, processor: BatchProcessor, world: World, start: int, batch_id: int, size: int = 50) -> int:
    """Apply the records from ``start`` on in batches; returns the next batch id."""
    records = world.records[start:]
    for i in range(0, len(records), size):
        processor.process(kafka_frame(spark, records[i : i + size]), batch_id)
        batch_id += 1
    return batch_id


def test_three_nightly_snapshots_equal_the_source_at_their_recorded_positions(spark, tmp_path: Path) -> None:
    config = make_config(tmp_path, "ods_rolling", full_check=True)
    world = World()
    write_stock(tmp_path, world.stock)
    processor = merging_processor(spark, config)
    world.day(0, 50)
    batch_id = apply(spark, processor, world, 0, 0)
    with pytest.raises(NotReady, match="has not passed the cut-off 2026-03-02T00:00:00"):
        run_snapshot(spark, config, DAY0, lambda: None)
    assert published(spark, config, "inventory.orders") == []
    assert not spark.catalog.databaseExists("ods_rolling")

    reports = []
    for n in range(3):
        done = len(world.records)
        world.day(n + 1, 50)
        # The next day's first records (one per partition) and a few more reach Delta; the rest wait.
        upto = done + 6 + 10
        for i in range(done, upto, 8):
            processor.process(kafka_frame(spark, world.records[i : min(i + 8, upto)]), batch_id)
            batch_id += 1
        day = DAY0 + dt.timedelta(days=n)
        report = run_snapshot(spark, config, day, lambda: None)
        reports.append(report)
        t = report.tables[0]
        assert t.base == ("stock" if n == 0 else f"snapshot dt={day - dt.timedelta(days=1)}")
        expected = world.expected(report.positions)
        assert spark_rows(spark, config, day) == expected
        assert arrow_rows(t.location) == expected
        assert t.rows == len(expected) and t.duplicate_keys == 0 and t.stock_rejects == 0
        assert "PARTITIONED BY (dt STRING)" in t.ddl and "STORED AS PARQUET" in t.ddl
        # Later records of the day after stay out: the snapshot stops where the stream passed the cut-off.
        assert sum(o + 1 for parts in report.positions.values() for o in parts.values()) < upto
        # The rest of the day after arrives before the next snapshot.
        batch_id = apply(spark, processor, world, upto, batch_id)
    assert reports[0].tables[0].deletes_applied > 0
    # Earlier partitions are untouched by later runs.
    assert spark_rows(spark, config, DAY0) == world.expected(reports[0].positions)
    hive_name = hive_publish.hive_table(config, config.tables[0])
    assert [r["partition"] for r in spark.sql(f"SHOW PARTITIONS {hive_name}").collect()] == [
        "dt=2026-03-01",
        "dt=2026-03-02",
        "dt=2026-03-03",
    ]
    # The current view: the latest snapshot plus everything Delta holds now = the source now.
    everything: dict[str, dict[str, int]] = {}
    for (name, part), next_offset in world.offsets.items():
        everything.setdefault(name, {})[str(part)] = next_offset - 1
    current = spark.table(f"{hive_name}_current")
    got = sorted((r.asDict() for r in current.select(*canonical_columns(current)).collect()), key=repr)
    assert got == world.expected(everything)
    reported = json.loads(next((tmp_path / "_cdc_snapshot_reports").glob("snapshot-2026-03-03-*.json")).read_text())
    assert reported["tables"][0]["rows"] == reports[2].tables[0].rows


def test_a_failed_publish_leaves_the_previous_partition_and_a_rerun_replaces_it_once(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = make_config(tmp_path, "ods_atomic")
    world = World(seed=5)
    write_stock(tmp_path, world.stock)
    processor = merging_processor(spark, config)
    world.day(0, 20)
    world.day(1, 0)
    apply(spark, processor, world, 0, 0)
    first = run_snapshot(spark, config, DAY0, lambda: None)
    expected = world.expected(first.positions)
    location = first.tables[0].location

    real_write = hive_publish.write_files

    def crash_mid_write(rows: Any, folder: str, files: int | None = None) -> None:
        real_write(rows.limit(3), folder)  # some files are there, then the job dies
        raise RuntimeError("killed during the write")

    monkeypatch.setattr(hive_publish, "write_files", crash_mid_write)
    with pytest.raises(RuntimeError, match="killed"):
        run_snapshot(spark, config, DAY0, lambda: None)
    assert spark_rows(spark, config, DAY0) == expected
    assert [r["location"] for r in published(spark, config, "inventory.orders")] == [location]

    monkeypatch.setattr(hive_publish, "write_files", real_write)
    again = run_snapshot(spark, config, DAY0, lambda: None)
    assert spark_rows(spark, config, DAY0) == expected
    assert again.tables[0].location != location
    partition_dir = Path(again.tables[0].location.removeprefix("file:")).parent
    assert [p.name for p in partition_dir.iterdir()] == [Path(again.tables[0].location).name]

    # A base whose files changed since it was published is refused, and nothing is published.
    done = len(world.records)
    world.day(2, 0)
    apply(spark, processor, world, done, 100)
    victim = max(Path(again.tables[0].location.removeprefix("file:")).glob("*.parquet"), key=lambda p: p.stat().st_size)
    victim.unlink()
    with pytest.raises(SnapshotError, match="now reads .* rows, it was published with .*: its files were changed"):
        run_snapshot(spark, config, DAY0 + dt.timedelta(days=1), lambda: None)
    assert [r["dt"] for r in published(spark, config, "inventory.orders")] == ["2026-03-01"]


def test_stock_rejects_past_the_threshold_fail_the_run_and_are_kept(spark, tmp_path: Path) -> None:
    config = make_config(tmp_path, "ods_rejects", max_rejects=1)
    folder = tmp_path / "export"
    folder.mkdir()
    good = "1\tann\t12.50\tnew\t2026-01-01\t2026-01-01 10:00:00\n"
    bad = [
        "2\tbob\t1.00\tnew\t2026-01-01\n",  # too few fields
        "3\tcy\t1.00\tnew\t2026-01-01\t2026-01-01 10:00:00\textra\n",  # too many
        "4\tdi\tlots\tnew\t2026-01-01\t\\N\n",  # bad number
        "5\ted\t1.00\tnew\t2026-02-30\t\\N\n",  # bad date
    ]
    (folder / "orders__0001").write_bytes((good + "".join(bad)).encode() + b"6\t\xc3\x28\t1\tnew\t2026-01-01\t\\N\n")
    with pytest.raises(SnapshotError, match=r"5 rejected line\(s\).*max_rejects = 1: nothing published"):
        run_snapshot(spark, config, DAY0, lambda: None)
    rejects = spark.read.format("delta").load(str(tmp_path / "_cdc_stock_rejects")).orderBy("line").collect()
    assert [(r["line"], r["reason"]) for r in rejects] == [
        (2, "5 fields, expected 6"),
        (3, "7 fields, expected 6"),
        (4, "column amount: cannot read 'lots' as decimal(10,2)"),
        (5, "column order_date: cannot read '2026-02-30' as date"),
        (6, "not valid utf-8 at byte 2"),
    ]
    assert all(r["file"].endswith("orders__0001") for r in rejects)
    assert not spark.catalog.databaseExists("ods_rejects")


def test_tombstones_are_purged_only_once_a_published_snapshot_absorbed_them(spark, tmp_path: Path) -> None:
    config = make_config(tmp_path, "ods_purge", maintenance={"tombstone_retention_hours": 0})
    world = World(seed=3)
    write_stock(tmp_path, world.stock)
    processor = merging_processor(spark, config)
    for n in range(3):
        world.day(n, 30 if n < 2 else 0)
    apply(spark, processor, world, 0, 0)
    path = config.storage.table_path(config.tables[0])
    later = dt.datetime(2026, 6, 1, tzinfo=dt.timezone.utc)  # every tombstone is past the retention

    def tombstones() -> list[tuple[int, dt.datetime]]:
        rows = spark.read.format("delta").load(path).where("_cdc_deleted").select("id", "_cdc_source_ts").collect()
        return sorted((r["id"], r["_cdc_source_ts"]) for r in rows)

    before = tombstones()
    # The stock export is configured, so the first snapshot will start from it: nothing may go yet.
    report = run_maintenance(spark, config, now=later)
    assert report.tables[0].rows_purged == 0 and report.tables[0].purge_cutoff is None
    assert tombstones() == before

    first = run_snapshot(spark, config, DAY0, lambda: None)
    report = run_maintenance(spark, config, now=later)
    midnight = dt.datetime(2026, 3, 2)
    absorbed = [t for t in before if t[1] < midnight]
    assert absorbed and len(absorbed) < len(before)
    assert report.tables[0].rows_purged == len(absorbed)
    assert report.tables[0].purge_cutoff == "2026-03-02T00:00:00+00:00"
    assert tombstones() == [t for t in before if t[1] >= midnight]
    # The next snapshot starts from the first: the purged deletes stay deleted.
    second = run_snapshot(spark, config, DAY0 + dt.timedelta(days=1), lambda: None)
    assert second.tables[0].base == "snapshot dt=2026-03-01"
    assert spark_rows(spark, config, DAY0 + dt.timedelta(days=1)) == world.expected(second.positions)
    assert first.tables[0].deletes_applied > 0
