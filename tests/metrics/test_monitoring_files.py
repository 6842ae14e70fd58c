"""The alert rules and the Grafana dashboard name only series that cdc-delta exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

import promql_parser
import yaml
from prometheus_client import generate_latest

from cdc_delta.check.run import CheckReport, TableCheck
from cdc_delta.config import parse_config
from cdc_delta.kafka.offsets import PartitionLag
from cdc_delta.maintenance.run import MaintenanceReport, TableReport
from cdc_delta.merger.results import MergeResult, Pending, RoundResult, TableResult
from cdc_delta.metrics.stream import StreamMetrics
from cdc_delta.metrics.textfile import job_metrics
from cdc_delta.pii.scan import Finding, PiiReport, TableScan
from cdc_delta.snapshot.report import SnapshotReport, TableSnapshot
from cdc_delta.stream.results import BatchResult
from tests.prom import samples
from tests.services import ROOT

MONITORING = ROOT / "streaming" / "monitoring"
SERIES = re.compile(r"\bcdc_delta_[a-z_]+\b")


def exported(tmp_path: Path) -> set[str]:
    """Every sample name the stream's endpoint and the jobs' textfiles can hold."""
    config = parse_config(
        {
            "app_id": "t",
            "storage": {"root": str(tmp_path / "lake")},
            "tables": [{"name": "db.t", "topics": ["t"], "key": ["id"]}],
            "metrics": {"textfile_dir": str(tmp_path / "prom")},
        }
    )
    metrics = StreamMetrics(config)
    metrics.partition_lag.update([PartitionLag("t", 0, end=10, committed=7)])
    metrics.batch_done(
        BatchResult(
            1,
            rows_in=1,
            landed=1,
            land_seq=1,
            status_by_table={"db.t": {"ok": 1}},
            max_source_ts_ms_by_table={"db.t": 1},
        )
    )
    metrics.round_done(
        RoundResult(
            1,
            (TableResult("db.t", 1, MergeResult("db.t", version=3)),),
            pending={"db.t": Pending(events=2, oldest_landed_at=1.0, newest_seq=2)},
            finished_at=5.0,
        )
    )
    names = set(samples(generate_latest(metrics.registry).decode()))
    snapshot = SnapshotReport(
        "2026-01-01",
        "r",
        "c",
        1,
        {},
        [],
        [TableSnapshot("db.t", "ods.t", "/x", "none", 3, 1, 0, 1, 0, 0, source_count=1, count_difference=0)],
    )
    check = CheckReport("x", [TableCheck("db.t", "db.t", "failed", source_rows=2, delta_rows=1, difference=-1)], 1.0)
    pii = PiiReport("x", [TableScan("db.t", 10, 2, 1, [Finding("email", "email", 9, 10)])], 1.0)
    jobs = (
        ("maintenance", MaintenanceReport("x", [TableReport("db.t")])),
        ("snapshot", snapshot),
        ("check", check),
        ("scan_pii", pii),
    )
    for job, report in jobs:
        with job_metrics(config, job) as run:
            run.report, run.exit_code = report, 0
        names |= set(samples((tmp_path / "prom" / f"cdc_delta_{job}.prom").read_text()))
    return names


def test_alert_rules_are_complete_and_name_real_series(tmp_path: Path) -> None:
    rules = yaml.safe_load((MONITORING / "prometheus-alerts.yaml").read_text())
    alerts = [rule for group in rules["groups"] for rule in group["rules"]]
    assert len({a["alert"] for a in alerts}) == len(alerts) >= 10
    for rule in alerts:
        assert rule["expr"] and rule["labels"]["severity"] in {"critical", "warning", "info"}, rule["alert"]
        assert rule["annotations"]["summary"], rule["alert"]
    for rule in alerts:  # PromQL a real parser reads (Prometheus' own grammar, in Rust: promql-parser)
        parsed = promql_parser.parse(rule["expr"])
        assert type(parsed).__name__ == "BinaryExpr", (rule["alert"], parsed)  # a comparison: fires when true
    used = {name for rule in alerts for name in SERIES.findall(rule["expr"])}
    assert used - exported(tmp_path) == set()
    assert {
        "cdc_delta_maintenance_table_silent_seconds",
        "cdc_delta_maintenance_table_change_jump_ratio",
        "cdc_delta_scan_pii_table_plaintext_columns",
    } <= used
    assert {"cdc_delta_table_stopped", "cdc_delta_snapshot_last_success_timestamp_seconds"} <= used


def test_dashboard_panels_name_real_series(tmp_path: Path) -> None:
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    used = {name for expr in exprs for name in SERIES.findall(expr)}
    assert used and used - exported(tmp_path) == set()
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])


def test_a_table_stopped_partway_reports_the_landing_it_holds(tmp_path: Path) -> None:
    tables = [{"name": "db.t", "topics": ["t"], "key": ["id"]}]
    metrics = StreamMetrics(parse_config({"app_id": "t", "storage": {"root": str(tmp_path)}, "tables": tables}))
    merged = MergeResult("db.a", source_rows=3, inserted=3, version=4)
    metrics.round_done(
        RoundResult(
            through_seq=9,
            tables=(
                TableResult("db.a", 2, merge=merged, error="db.a: a type change", merged_through=6),
                TableResult("db.b", 5, merge=MergeResult("db.b", version=2)),
                TableResult("db.c", 1, error="db.c: failed"),
            ),
        )
    )
    found = samples(generate_latest(metrics.registry).decode())
    held = {dict(labels)["table"]: value for labels, value in found["cdc_delta_table_merged_landing"].items()}
    assert held == {"db.a": 6, "db.b": 9}  # db.c holds what it held: no value from this round
    stopped = {dict(labels)["table"]: value for labels, value in found["cdc_delta_table_stopped"].items()}
    assert stopped == {"db.a": 1, "db.b": 0, "db.c": 1, "db.t": 0}
