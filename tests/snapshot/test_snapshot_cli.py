"""`cdc-delta snapshot` as a process against the real broker: it refuses while the stream has not
read the day, then publishes a partition that equals the source, readable without Spark."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdc_delta.demo.batches import DEMO_TABLES
from cdc_delta.demo.generator import ChangeGenerator
from cdc_delta.demo.producer import ensure_topics, produce
from tests.delta_rows import arrow_rows
from tests.oracle import canonical
from tests.prom import samples
from tests.services import ROOT, MariaDB, caught_up_here, write_config

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def snapshot(config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cdc_delta.cli", "snapshot", "--config", str(config), *extra],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=400,
    )


def test_snapshot_waits_for_the_stream_then_publishes_the_source_state(
    spark: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    server = "snapcli"
    generator = ChangeGenerator(DEMO_TABLES, seed=21, server=server)  # source times on 2026-01-01 (UTC)
    changes = list(generator.changes(600))
    ensure_topics(kafka_bootstrap, sorted({c.topic for c in changes}), partitions=2)
    produce(kafka_bootstrap, changes)
    config = write_config(tmp_path, kafka_bootstrap, server)
    data = yaml.safe_load(config.read_text())
    data["snapshot"] = {"idle_grace_minutes": 1}
    data["metrics"] = {"textfile_dir": str(tmp_path / "textfiles")}
    data["scan_pii"] = {"nightly": True}
    config.write_text(yaml.safe_dump(data))
    lake = tmp_path / "lake"
    prom = tmp_path / "textfiles" / "cdc_delta_snapshot.prom"

    # Nothing read yet: the records of every partition wait, so nothing is published (exit 75).
    refused = snapshot(config, "--date", "2026-01-01")
    assert refused.returncode == 75, refused.stderr
    assert "has not passed the cut-off 2026-01-02T00:00:00+00:00" in refused.stderr
    assert "record(s) not read" in refused.stderr
    assert not (lake / "_cdc_warehouse").exists() and not (lake / "_cdc_snapshots").exists()
    assert samples(prom.read_text())["cdc_delta_snapshot_exit_code"] == {(): 75}  # for the textfile collector
    assert "cdc_delta_snapshot_last_success_timestamp_seconds" not in samples(prom.read_text())

    caught_up_here(config)
    done = snapshot(config, "--date", "2026-01-01")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ods.orders dt=2026-01-01:" in done.stdout and "snapshot 2026-01-01 published" in done.stdout
    # scan_pii.nightly: every table scanned after publishing, with its own textfile
    assert "inventory.orders: nothing found in 2 string columns" in done.stdout, done.stdout
    assert "scan-pii: 2 table(s), 0 column(s) with plain text" in done.stdout
    assert samples((tmp_path / "textfiles" / "cdc_delta_scan_pii.prom").read_text())[
        "cdc_delta_scan_pii_exit_code"
    ] == {(): 0}
    report = json.loads(next((lake / "_cdc_snapshot_reports").glob("snapshot-2026-01-01-*.json")).read_text())
    # Only inventory.orders: shop.orders keys include the shard, which a stock export cannot carry.
    (table,) = report["tables"]
    assert table["hive_table"] == "ods.orders" and table["base"] == "none"
    assert sorted(report["idle_partitions"]) == sorted(f"{c}[{p}]" for c in {c.topic for c in changes} for p in (0, 1))
    expected = sorted(
        ({k: canonical(v) for k, v in row.items()} for row in generator.rows[("inventory", "orders")].values()),
        key=repr,
    )
    assert arrow_rows(table["location"]) == expected
    assert table["rows"] == len(expected) and "STORED AS PARQUET" in table["ddl"]
    got = samples(prom.read_text())
    assert got["cdc_delta_snapshot_exit_code"] == {(): 0}
    assert got["cdc_delta_snapshot_last_success_timestamp_seconds"][()] > time.time() - 600
    labels = (("table", "inventory.orders"),)
    assert got["cdc_delta_snapshot_table_rows"] == {labels: table["rows"]}
    assert got["cdc_delta_snapshot_table_deletes_applied"] == {labels: table["deletes_applied"]}


def test_kill_9_during_the_write_leaves_everything_as_it_was(spark, tmp_path: Path) -> None:
    """The second night's run is killed while Spark writes its files: the metastore, the first night's
    partition and the snapshot log are as before, and a re-run publishes the day once."""
    rows = 300_000
    export = tmp_path / "export"
    spark.range(rows).selectExpr(
        "id", "concat('name-', id) AS name", "CAST(id % 100000 / 100 AS DECIMAL(10,2)) AS amount"
    ).write.parquet(str(export))
    config = tmp_path / "cdc.yaml"
    lake = tmp_path / "lake"
    config.write_text(
        yaml.safe_dump(
            {
                "app_id": "kill",
                "storage": {"root": str(lake)},
                "spark": {"master": "local[2]", "shuffle_partitions": 2, "conf": {"spark.ui.enabled": "false"}},
                "tables": [
                    {
                        "name": "shop.items",
                        "topics": ["srv.shop.items"],
                        "key": ["id"],
                        "columns": {"id": "bigint", "name": "string", "amount": "decimal(10,2)"},
                        "stock": {"path": str(export), "format": "parquet"},
                    }
                ],
            },
            sort_keys=False,  # columns: are in export order
        )
    )
    first = snapshot(config, "--date", "2026-03-01", "--skip-kafka-check")
    assert first.returncode == 0, first.stderr[-3000:]
    report = json.loads(next((lake / "_cdc_snapshot_reports").glob("snapshot-2026-03-01-*.json")).read_text())
    day1 = Path(report["tables"][0]["location"].removeprefix("file:"))
    day1_files = sorted((p.name, p.stat().st_size) for p in day1.iterdir())
    partition = lake / "_cdc_warehouse" / "ods.db" / "items" / "dt=2026-03-02"

    proc = subprocess.Popen(
        [sys.executable, "-m", "cdc_delta.cli", "snapshot", "--config", str(config), "--date", "2026-03-02"]
        + ["--skip-kafka-check"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    deadline = time.monotonic() + 300
    while not list(partition.glob("run-*/_temporary")):
        assert proc.poll() is None, "the run ended before its write could be interrupted"
        assert time.monotonic() < deadline, "the run never started writing"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)  # Spark is writing: _temporary goes away only when the job commits
    proc.wait(timeout=30)

    log = spark.read.format("delta").load(str(lake / "_cdc_snapshots"))
    assert [r["dt"] for r in log.select("dt").collect()] == ["2026-03-01"]
    assert sorted((p.name, p.stat().st_size) for p in day1.iterdir()) == day1_files

    again = snapshot(config, "--date", "2026-03-02", "--skip-kafka-check")
    assert again.returncode == 0, again.stderr[-3000:]
    # The metastore never saw the killed run's folder: the re-run adds the partition, not replaces it.
    assert "ods.items dt=2026-03-02" in again.stdout and "new partition" in again.stderr
    (folder,) = partition.iterdir()
    assert sorted(r["id"] for r in arrow_rows(str(folder))) == list(range(rows))


def test_the_source_count_over_jdbc_is_reported_and_its_password_never_shown(
    spark, mariadb: MariaDB, tmp_path: Path
) -> None:
    mariadb.sql(
        "CREATE DATABASE jdbc_shop; USE jdbc_shop; CREATE TABLE items (id BIGINT PRIMARY KEY);"
        "INSERT INTO items SELECT seq FROM seq_1_to_497;"
        "CREATE USER 'counter'@'%' IDENTIFIED BY 'n0t-in-any-log'; GRANT SELECT ON jdbc_shop.* TO 'counter'@'%';"
    )
    export = tmp_path / "export"
    spark.range(500).write.parquet(str(export))
    secret = tmp_path / "db-password"
    secret.write_text("n0t-in-any-log\n")
    lake = tmp_path / "lake"

    def write_config(password_file: Path) -> Path:
        config = tmp_path / "cdc.yaml"
        jdbc = {
            "url": f"jdbc:mariadb://127.0.0.1:{mariadb.port}/jdbc_shop",
            "query": "SELECT COUNT(*) FROM items",
            "user": "counter",
            "password_file": str(password_file),
        }
        table = {
            "name": "shop.items",
            "topics": ["srv.shop.items"],
            "key": ["id"],
            "columns": {"id": "bigint"},
            "stock": {"path": str(export), "format": "parquet"},
            "source_count_jdbc": jdbc,
        }
        config.write_text(yaml.safe_dump({"app_id": "jdbc", "storage": {"root": str(lake)}, "tables": [table]}))
        return config

    done = snapshot(write_config(secret), "--date", "2026-03-01", "--skip-kafka-check")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "source count 497 (difference 3)" in done.stdout
    report_file = next((lake / "_cdc_snapshot_reports").glob("snapshot-2026-03-01-*.json"))
    table = json.loads(report_file.read_text())["tables"][0]
    assert (table["rows"], table["source_count"], table["count_difference"]) == (500, 497, 3)

    wrong = tmp_path / "wrong-password"
    wrong.write_text("guess")
    refused = snapshot(write_config(wrong), "--date", "2026-03-02", "--skip-kafka-check")
    assert refused.returncode == 2
    assert "counting shop.items at the source over jdbc:mariadb://" in refused.stderr
    assert "Access denied" in refused.stderr
    shown = done.stdout + done.stderr + refused.stdout + refused.stderr + report_file.read_text()
    assert "n0t-in-any-log" not in shown and "guess" not in shown
    assert not (lake / "_cdc_warehouse" / "ods.db" / "items" / "dt=2026-03-02").exists()
