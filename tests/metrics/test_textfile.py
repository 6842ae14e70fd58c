"""The jobs' textfile-collector files: what a run writes, and what a failed run keeps."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_delta.config import parse_config
from cdc_delta.exceptions import MetastoreUnavailable
from cdc_delta.maintenance.run import MaintenanceReport, TableReport
from cdc_delta.metrics.textfile import job_metrics
from tests import prom


def samples(path: Path) -> dict[tuple[str, tuple], float]:
    return {
        (name, labels): v for name, series in prom.samples(path.read_text()).items() for labels, v in series.items()
    }


def config(folder: Path | None):  # type: ignore[no-untyped-def]
    return parse_config(
        {
            "app_id": "t",
            "storage": {"root": "/tmp/lake"},
            "tables": [{"name": "db.t", "topics": ["t"], "key": ["id"]}],
            "metrics": {"textfile_dir": str(folder) if folder else None},
        }
    )


def test_a_run_writes_its_outcome_and_every_number_of_its_report(tmp_path: Path) -> None:
    report = MaintenanceReport(
        started_at="x",
        tables=[
            TableReport("db.t", files_before=40, files_after=2, rows_purged=7, checkpoint_version=12, duration_s=1.5),
            TableReport("db.u", skipped="no table yet"),
        ],
    )
    with job_metrics(config(tmp_path), "maintenance") as run:
        run.report, run.exit_code = report, 0
    got = samples(tmp_path / "cdc_delta_maintenance.prom")
    assert got[("cdc_delta_maintenance_exit_code", ())] == 0
    assert got[("cdc_delta_maintenance_last_success_timestamp_seconds", ())] == pytest.approx(
        got[("cdc_delta_maintenance_last_run_timestamp_seconds", ())]
    )
    table = (("table", "db.t"),)
    assert got[("cdc_delta_maintenance_table_files_before", table)] == 40
    assert got[("cdc_delta_maintenance_table_files_after", table)] == 2
    assert got[("cdc_delta_maintenance_table_rows_purged", table)] == 7
    assert got[("cdc_delta_maintenance_table_checkpoint_version", table)] == 12
    assert ("cdc_delta_maintenance_table_checkpoint_version", (("table", "db.u"),)) not in got  # None: left out
    assert list(tmp_path.iterdir()) == [tmp_path / "cdc_delta_maintenance.prom"]  # no temporary file left


def test_a_failed_run_says_so_and_keeps_the_last_success(tmp_path: Path) -> None:
    with job_metrics(config(tmp_path), "snapshot") as run:
        run.exit_code = 0
    first = samples(tmp_path / "cdc_delta_snapshot.prom")
    with pytest.raises(RuntimeError), job_metrics(config(tmp_path), "snapshot"):
        raise RuntimeError("the run failed")
    failed = samples(tmp_path / "cdc_delta_snapshot.prom")
    assert failed[("cdc_delta_snapshot_exit_code", ())] == 1
    key = ("cdc_delta_snapshot_last_success_timestamp_seconds", ())
    assert failed[key] == first[key]
    assert failed[("cdc_delta_snapshot_last_run_timestamp_seconds", ())] >= failed[key]
    # A service out of reach: the code the command exits with (69, retry later).
    with pytest.raises(MetastoreUnavailable), job_metrics(config(tmp_path), "snapshot"):
        raise MetastoreUnavailable("cannot reach the Hive metastore")
    assert samples(tmp_path / "cdc_delta_snapshot.prom")[("cdc_delta_snapshot_exit_code", ())] == 69


def test_no_folder_no_file(tmp_path: Path) -> None:
    with job_metrics(config(None), "snapshot") as run:
        run.exit_code = 0
    assert not list(tmp_path.iterdir())
