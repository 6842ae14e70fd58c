"""Metrics of the scheduled jobs (``maintain``, ``snapshot``) as a Prometheus textfile: after each
run, ``<metrics.textfile_dir>/cdc_delta_<job>.prom`` is replaced whole (written aside, then renamed),
for node_exporter's textfile collector.

Per run: when it ran, how it ended (``exit_code``: as the command exits), how long it took,
and when it last succeeded (kept from the previous file when a run fails). Per table: every number of
the job's JSON report, as ``cdc_delta_<job>_table_<field>{table="db.table"}``."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, write_to_textfile
from prometheus_client.parser import text_string_to_metric_families

from cdc_delta.config import AppConfig
from cdc_delta.exceptions import exit_code_for

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class JobRun:
    """What a job's command records: its report (a dataclass with ``tables``) and its exit code."""

    job: str
    started: float = dataclasses.field(default_factory=time.time)
    exit_code: int = 1
    report: Any = None


@contextlib.contextmanager
def job_metrics(config: AppConfig, job: str) -> Iterator[JobRun]:
    """``with job_metrics(config, "maintenance") as run: ...; run.report = r; run.exit_code = 0``.
    The file is written when the block ends, also when it raises (the exit code the command ends with)."""
    run = JobRun(job)
    try:
        yield run
    except BaseException as exc:
        run.exit_code = exit_code_for(exc)
        raise
    finally:
        folder = config.metrics.textfile_dir
        if folder:
            try:
                write_job_metrics(Path(folder), run)
            except OSError as exc:  # metrics must not fail the job they describe
                logger.warning("could not write the %s metrics file in %s: %s", job, folder, exc)


def write_job_metrics(folder: Path, run: JobRun) -> Path:
    out = folder / f"cdc_delta_{run.job}.prom"
    now = time.time()
    last_success = now if run.exit_code == 0 else _previous(out, f"cdc_delta_{run.job}_last_success_timestamp_seconds")
    registry = CollectorRegistry()
    prefix = f"cdc_delta_{run.job}"

    def gauge(name: str, doc: str, value: float) -> None:
        Gauge(f"{prefix}_{name}", doc, registry=registry).set(value)

    gauge("last_run_timestamp_seconds", f"When the last {run.job} run ended (Unix time)", now)
    codes = "0 done, 1 attention, 2 refused, 69 unavailable, 75 not ready"
    gauge("exit_code", f"Exit code of the last {run.job} run ({codes})", run.exit_code)
    gauge("duration_seconds", f"Wall time of the last {run.job} run", now - run.started)
    if last_success is not None:
        gauge("last_success_timestamp_seconds", f"When a {run.job} run last succeeded (Unix time)", last_success)
    for field, rows in _table_numbers(run.report).items():
        metric = Gauge(
            f"{prefix}_table_{field}",
            f"{field} of each table in the last {run.job} report",
            ["table"],
            registry=registry,
        )
        for table, value in rows:
            metric.labels(table).set(value)
    folder.mkdir(parents=True, exist_ok=True)
    write_to_textfile(str(out), registry)  # writes aside, then renames: never half a file
    os.chmod(out, 0o644)
    return out


def _table_numbers(report: Any) -> dict[str, list[tuple[str, float]]]:
    """Every int/float field of the report's table entries (booleans and None left out)."""
    numbers: dict[str, list[tuple[str, float]]] = {}
    for table in getattr(report, "tables", None) or []:
        for f in dataclasses.fields(table):
            value = getattr(table, f.name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                numbers.setdefault(f.name, []).append((table.table, float(value)))
    return numbers


def _previous(path: Path, name: str) -> float | None:
    """A gauge's value in the job's previous file, if there is one."""
    try:
        text = path.read_text()
    except OSError:
        return None
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return float(sample.value)
    return None
