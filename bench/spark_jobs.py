"""Where a benchmark's seconds go inside Spark: the jobs of a time span, read from Spark's event log.

A benchmark that times a whole step (a batch) also wants to know which of the Spark jobs in it
changed, e.g. Delta MERGE's "scanning files for matches" job, which reads every candidate file.
Build the session with :func:`event_log_conf`, stop it, then read the jobs with :func:`read_jobs`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

# time.monotonic() + EPOCH_OFFSET = time.time(): the event log records wall-clock epoch times.
EPOCH_OFFSET = time.time() - time.monotonic()


def event_log_conf(folder: Path) -> dict[str, str]:
    """Spark settings that write a plain (uncompressed, unrolled) event log into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    return {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": str(folder),
        "spark.eventLog.compress": "false",
        "spark.eventLog.rolling.enabled": "false",
    }


@dataclass(frozen=True)
class Job:
    """One Spark job: its description (Delta names its jobs) and when it ran, in time.monotonic()."""

    description: str
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


def read_jobs(folder: Path) -> list[Job]:
    """Every finished job in the event logs under ``folder`` (call after the session has stopped)."""
    started: dict[int, tuple[float, str]] = {}
    jobs = []
    for log in sorted(p for p in folder.iterdir() if p.is_file()):
        with log.open() as lines:
            for line in lines:
                event = json.loads(line)
                kind = event["Event"]
                if kind == "SparkListenerJobStart":
                    props = event.get("Properties") or {}
                    what = props.get("spark.job.description") or props.get("callSite.short") or ""
                    started[event["Job ID"]] = (event["Submission Time"] / 1000 - EPOCH_OFFSET, what)
                elif kind == "SparkListenerJobEnd" and event["Job ID"] in started:
                    start, what = started.pop(event["Job ID"])
                    jobs.append(Job(what, start, event["Completion Time"] / 1000 - EPOCH_OFFSET))
    return jobs


def seconds_in(jobs: list[Job], span: tuple[float, float], prefix: str) -> float:
    """Seconds of the jobs whose description starts with ``prefix`` and that ran inside ``span``."""
    lo, hi = span
    return sum(j.seconds for j in jobs if j.description.startswith(prefix) and j.start >= lo and j.end <= hi)
