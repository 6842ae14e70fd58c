"""``cdc-delta merge`` as a job of its own (``merge.in_stream: false``), as a process: it merges what the
stream lands, learning of landings from the changelog, serves its metrics and health while it runs
(each table's merged landing, pending changes and merge lag, equal to the Delta tables), and ends on
SIGTERM with exit code 0; then ``--until-caught-up`` merges what landed since and ends."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from cdc_delta.changelog.table import ensure_tables
from cdc_delta.config import AppConfig, parse_config
from cdc_delta.delta.commits import merged_through
from cdc_delta.demo.batches import kafka_frame
from cdc_delta.demo.generator import Column, SourceTable, envelope
from cdc_delta.stream.batch import BatchProcessor
from tests.delta_rows import read_canonical
from tests.prom import samples
from tests.services import StreamProcess, cdc_delta_here, wait_for

pytestmark = pytest.mark.spark

TABLES = {f"shop.t{i}": SourceTable("shop", f"t{i}", (Column("id", "int64"), Column("qty", "int32"))) for i in range(2)}
PORT = re.compile(r"metrics on http://127\.0\.0\.1:(\d+)/metrics")
STARTED = "merger merge-job started"


def land(spark: Any, processor: BatchProcessor, batch_id: int, rows: dict[str, list[dict[str, Any]]]) -> None:
    """One landing (batch ``batch_id``) of ``rows`` per table, as creates and updates of their ids."""
    records = []
    for name, table_rows in rows.items():
        for i, row in enumerate(table_rows):
            pos = 1000 * batch_id + i + 1
            image = envelope(TABLES[name], "u", None, row, pos=pos, ts_ms=pos, server="srv")
            offset = 100 * batch_id + i
            records.append(
                (f"srv.{name}", 0, offset, json.dumps({"id": row["id"]}).encode(), json.dumps(image).encode())
            )
    result = processor.process(kafka_frame(spark, records), batch_id)
    assert result.landed == len(records)


def scrape(port: int) -> dict[str, dict[str, float]]:
    """Per sample name, per table label (or "" without one), its value."""
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for name, series in samples(requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text).items():
        for labels, value in series.items():
            out[name][dict(labels).get("table", "")] = value
    return out


def config_data(root: Path) -> dict[str, Any]:
    return {
        "app_id": "merge-job",
        "storage": {"root": str(root)},
        "tables": [{"name": name, "topics": [f"srv.{name}"], "key": ["id"]} for name in TABLES],
        # Due once their oldest change is 20 s old (a few changes never reach min_events): the job's
        # gauges show them pending meanwhile.
        "merge": {"in_stream": False, "max_delay_seconds": 20, "min_events": 1000},
        "metrics": {"port": 0, "host": "127.0.0.1", "unhealthy_after_seconds": 600},
    }


def test_the_merge_job_merges_what_lands_and_serves_metrics_equal_to_its_tables(spark: Any, tmp_path: Path) -> None:
    data = config_data(tmp_path / "lake")
    config: AppConfig = parse_config(data)
    path = tmp_path / "cdc.yaml"
    path.write_text(yaml.safe_dump(data))
    processor = BatchProcessor(config)  # lands only: the job merges
    ensure_tables(spark, config)  # the changelog, before the job reads it

    job = StreamProcess(path, tmp_path / "merge.log", command="merge")
    proc = job.start()
    try:
        wait_for(lambda: STARTED in job.log.read_text(errors="replace"), 180, "the merger's start")
        match = PORT.search(job.log.read_text(errors="replace"))
        assert match is not None
        port = int(match[1])

        def health() -> str:
            return requests.get(f"http://127.0.0.1:{port}/healthz", timeout=10).text

        # Its first look at the changelog done (a cold JVM's first reads took 20 s here): warm.
        wait_for(lambda: health().startswith("ok: last round"), 180, "the merger's first look for due tables")
        first = {"shop.t0": [{"id": 1, "qty": 1}, {"id": 2, "qty": 2}], "shop.t1": [{"id": 1, "qty": 5}]}
        land(spark, processor, 0, first)

        def merged_everything(landing: int) -> bool:
            got = scrape(port)
            return all(got["cdc_delta_table_merged_landing"].get(name) == landing for name in TABLES) and all(
                got["cdc_delta_table_pending_changes"][name] == 0 for name in TABLES
            )

        def pending() -> dict[str, float]:
            return scrape(port)["cdc_delta_table_pending_changes"]

        # Between rounds, before the tables are due (20 s; the job polls every 5 s at most): pending.
        wait_for(lambda: pending() == {"shop.t0": 2, "shop.t1": 1}, 15, "the changes pending")
        got = scrape(port)
        assert all(got["cdc_delta_table_merge_lag_seconds"][name] > 0 for name in TABLES), got
        assert got["cdc_delta_table_merged_landing"] == {}, got
        wait_for(lambda: merged_everything(1), 240, "both tables merged through landing 1")
        # A second landing, made while the job runs: it learns of it from the changelog and merges it.
        land(spark, processor, 1, {"shop.t0": [{"id": 2, "qty": 20}, {"id": 3, "qty": 3}]})
        wait_for(lambda: pending()["shop.t0"] == 2, 60, "landing 2 pending, learnt from the changelog")
        wait_for(lambda: scrape(port)["cdc_delta_table_merged_landing"].get("shop.t0") == 2, 120, "landing 2 merged")
        got = scrape(port)
        assert got["cdc_delta_changelog_landing"][""] == 2
        for name in TABLES:
            table_path = config.table_path(name)
            assert got["cdc_delta_table_merged_landing"][name] == merged_through(spark, table_path, config.app_id, name)
            assert got["cdc_delta_table_stopped"][name] == 0
            assert got["cdc_delta_table_merge_lag_seconds"][name] == 0
        assert got["cdc_delta_merge_round_duration_seconds_count"][""] >= 2
        rows = {
            name: sorted((r["id"], r["qty"]) for r in read_canonical(spark, config.table_path(name))[1])
            for name in TABLES
        }
        assert rows == {"shop.t0": [(1, 1), (2, 20), (3, 3)], "shop.t1": [(1, 5)]}
        answer = requests.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
        assert answer.status_code == 200 and answer.text.startswith("ok: last round"), answer.text
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    log = job.log.read_text(errors="replace")
    assert code == 0, log[-3000:]
    # What lands after it stopped: `--until-caught-up` merges it and ends (here, in the tests' JVM).
    land(spark, processor, 2, {"shop.t1": [{"id": 1, "qty": 6}]})
    run = cdc_delta_here(path, "merge", "--until-caught-up")
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    assert re.search(r"merger merge-job caught up: 1 rounds merged 1 changes in \d+s", run.stderr), run.stderr[-3000:]
    assert sorted((r["id"], r["qty"]) for r in read_canonical(spark, config.table_path("shop.t1"))[1]) == [(1, 6)]
    assert re.search(r"merger merge-job stopped on request: \d+ rounds merged 5 changes in \d+s$", log.strip()), log[
        -3000:
    ]
