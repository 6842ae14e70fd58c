"""The hourly maintenance counts each table's changes per 15 minutes of source time, once per landing
however often it runs, and judges the table: a table that stopped three hours ago after four busy
days is silent in the maintenance's report and metrics; a change landed after the count ends the silence
for ``status`` before the next count. The maintenance's textfile carries the silence for the alert."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdc_delta.activity.judge import BUCKET_MS, DAY_MS, HOUR_MS, OK, SILENT
from cdc_delta.activity.read import histories, verdicts
from cdc_delta.changelog.table import changelog_path
from cdc_delta.config import parse_config
from cdc_delta.delta.delta_rs import count, open_table
from cdc_delta.demo.batches import kafka_frame
from cdc_delta.maintenance.run import run_maintenance
from cdc_delta.metrics.textfile import job_metrics
from tests.batches import merging_processor
from tests.maintenance.test_maintenance import T0, rec
from tests.prom import samples
from tests.services import cdc_delta

pytestmark = pytest.mark.spark


def test_counted_once_per_landing_judged_silent_and_no_longer_once_a_change_lands(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = {
        "app_id": "act",
        "storage": {"root": str(tmp_path / "lake")},
        "merge": {"max_delay_seconds": 0},
        "tables": [{"name": "inventory.items", "topics": ["srv.inventory.items"], "key": ["id"]}],
        "metrics": {"textfile_dir": str(tmp_path / "prom")},
    }
    config = parse_config(raw)
    processor = merging_processor(spark, config)
    stop = T0 + 4 * DAY_MS + 10 * HOUR_MS  # busy from T0, a change every 7.5 minutes, then nothing
    times = list(range(T0, stop, BUCKET_MS // 2))
    records = [rec(i, "c" if i < 50 else "u", i % 50, ts) for i, ts in enumerate(times)]
    for batch_id, start in enumerate(range(0, len(records), 300)):
        processor.process(kafka_frame(spark, records[start : start + 300]), batch_id)
    expected = Counter(ts - ts % BUCKET_MS for ts in times)

    now = dt.datetime.fromtimestamp((stop + 3 * HOUR_MS) / 1000, dt.timezone.utc)
    for _ in range(2):  # a second run counts nothing again
        with job_metrics(config, "maintenance") as run:
            report = run.report = run_maintenance(spark, config, now=now)
            run.exit_code = 0
        (items,) = report.tables
        assert items.activity == SILENT, items
        assert abs(items.silent_seconds - (3 * 3600 + 450)) < 1, items  # the last change at stop - 7.5 min
        assert items.activity_reason.startswith("no change for 3 h 7 min; in the same hours each of the last 4 days")
        history = histories(config)["inventory.items"]
        assert dict(history.buckets) == dict(expected) and history.last_change_ms == times[-1]
        got = samples((tmp_path / "prom" / "cdc_delta_maintenance.prom").read_text())  # what the alert reads
        assert got["cdc_delta_maintenance_table_silent_seconds"] == {(("table", "inventory.items"),): 11250.0}

    # status (a process: delta-rs, no Spark) flags it, with Kafka out of reach: the lake's side is shown.
    path = tmp_path / "cdc.yaml"
    path.write_text(yaml.safe_dump({**raw, "kafka": {"bootstrap_servers": "127.0.0.1:1"}}))
    status = cdc_delta(path, "status", "--json")
    assert status.returncode == 69, status.stderr
    judged = json.loads(status.stdout)["activity"]["inventory.items"]
    assert judged["state"] == SILENT and judged["silent_s"] > 3 * 3600, judged  # it is later now: still silent

    # The change lands after the count: status sees it (the changelog's tail past the counted landings).
    processor.process(kafka_frame(spark, [rec(len(times), "u", 1, stop + 3 * HOUR_MS - 60_000)]), 99)
    now_ms = stop + 3 * HOUR_MS
    assert verdicts(config, ["inventory.items"], now_ms)["inventory.items"].state == OK
    assert dict(histories(config)["inventory.items"].buckets) != dict(expected)

    # A week and a day after the landings (the changelog's retention: all may go), a count that fails: the
    # maintenance goes on, and the retention keeps what was not counted (the last landing's change).
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=8)

    def broken(*args: Any) -> None:
        raise OSError("the store went away")

    with monkeypatch.context() as patched:
        patched.setattr("cdc_delta.maintenance.run.refresh", broken)
        (items,) = run_maintenance(spark, config, now=later).tables
    assert items.activity == "" and items.files_after > 0
    changelog = open_table(config, changelog_path(config))
    assert changelog is not None and count(changelog.to_pyarrow_dataset()) == 1  # only the uncounted one is left
    # Then a count that works: it goes too; a table that stopped stays silent, its busy days kept past
    # activity.history_days.
    (items,) = run_maintenance(spark, config, now=later).tables
    assert items.activity == SILENT and items.silent_seconds > 300 * 86400, items
    assert count(open_table(config, changelog_path(config)).to_pyarrow_dataset()) == 0
    assert len(histories(config)["inventory.items"].buckets) == len(expected) + 1
