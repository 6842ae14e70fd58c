"""Benchmark: a command's cold start with the JVM class archive (:mod:`cdc_delta.jvm_archive`) against
without it, in the same run.

The command is ``cdc-delta sql`` over a lake with one small Delta table (a process of its own: Python,
the JVM, the Spark session, Delta's first read of the table, one query, the exit), run ``--runs`` times
with the archive and as often without it (``-Xshare:auto`` in the config's Java options, which leaves
the project's archive out), taking turns so that the machine's drift falls on
both alike; with the JVM options of the tests' processes (C1 only) and with the defaults. Per setting
the median wall seconds of a run, and the ratio with / without. Needs the archive (``make setup``
makes it). Results go to bench/results/cold_start.json. Not a test: nothing fails on a time.

    python bench/cold_start.py            # 4 runs of each
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results" / "cold_start.json"
sys.path.insert(0, str(Path(__file__).parent))

QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
"""The JVM options of the tests' processes (tests/conftest.py)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=4, help="runs of each setting")
    args = parser.parse_args()

    from results_file import write_results

    from cdc_delta import jvm_archive
    from cdc_delta.config import SparkConfig
    from cdc_delta.spark_session import session_archive

    archive = session_archive(SparkConfig())
    if archive is None or not jvm_archive.complete(archive):
        raise SystemExit(f"no JVM class archive {archive}: run `make setup` (or cdc-delta jvm-archive) first")
    lake = Path(tempfile.mkdtemp(prefix="bench-cold-start-"))
    configs = {}
    for mapped, spark in ((True, ""), (False, "spark: {conf: {spark.driver.extraJavaOptions: '-Xshare:auto'}}\n")):
        # -Xshare:auto (the JVM's default) chooses the archives itself: the project's is left out.
        configs[mapped] = lake / f"cdc-{mapped}.yaml"
        configs[mapped].write_text(
            f"app_id: cold\nkafka: {{bootstrap_servers: '127.0.0.1:1'}}\nstorage: {{root: '{lake}'}}\n"
            f"tables: [{{name: db.t, topics: [s.db.t], key: [id]}}]\n{spark}"
        )
    table = lake / "db" / "t"
    create = f"CREATE TABLE delta.`{table}` USING delta AS SELECT id, id * 2 AS v FROM range(100)"
    run_sql(configs[True], create, None)
    query = f"SELECT count(*), sum(v) FROM delta.`{table}`"
    seconds: dict[str, list[float]] = {}
    for _ in range(args.runs):
        for jvm in ("tests", "defaults"):
            for mapped in (True, False):
                took = run_sql(configs[mapped], query, QUICK_JVM if jvm == "tests" else None)
                seconds.setdefault(f"{jvm}_{'archive' if mapped else 'none'}", []).append(round(took, 2))
    results: dict[str, object] = {"runs": args.runs, "seconds": seconds}
    for jvm in ("tests", "defaults"):
        with_it, without = (statistics.median(seconds[f"{jvm}_{m}"]) for m in ("archive", "none"))
        results[f"{jvm}_jvm"] = {"archive_s": round(with_it, 2), "none_s": round(without, 2)}
        results[f"{jvm}_jvm_ratio"] = round(with_it / without, 2)
        print(f"{jvm} JVM options: {with_it:.2f} s with the archive, {without:.2f} s without: {with_it / without:.2f}x")
    write_results(RESULTS, "cold_start", results, archive_mib=round(archive.stat().st_size / 2**20))


def run_sql(config: Path, query: str, jvm_options: str | None) -> float:
    """One ``cdc-delta sql`` process; its wall seconds."""
    env = {k: v for k, v in os.environ.items() if k != "SPARK_SUBMIT_OPTS"}
    if jvm_options:
        env["SPARK_SUBMIT_OPTS"] = jvm_options
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "cdc_delta.cli", "sql", "--config", str(config), query],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    took = time.monotonic() - t0
    if done.returncode != 0:
        raise SystemExit(f"cdc-delta sql failed ({done.returncode}): {done.stderr[-2000:]}")
    return took


if __name__ == "__main__":
    main()
