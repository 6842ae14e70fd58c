"""Benchmark: merges on a fragmented table before and after OPTIMIZE; batch durations beside maintenance.

One table, one run (local[2]):
1. Fragment: a target of --rows rows (50k-row files, as merge_vs_append.py writes them) takes
   --small-merges small batches of --batch-rows new keys through the batch function, as a stream
   with a short trigger writes new orders: each adds a small file or two, and the table fragments.
   OPTIMIZE's target size is scaled to the table (2 MB: the 50k-row base files count as full, as
   128 MB files do on a table of ~30M rows).
2. Stream without maintenance: --stream-batches more batches, timed one by one, each of --batch-rows
   new keys and --updates updates of keys drawn at random from those the fragmenting merges inserted
   (recent orders change status), so the merge's key range spans the small files. These are also the
   merges *before* OPTIMIZE. (A copy-on-write MERGE rewrites every file it updates into one or two, so
   a batch with many updates would itself undo the fragmentation being measured.) A full-table
   aggregate, what a SQL user runs, is timed too.
3. Stream beside maintenance: `nice -n 10 cdc-delta maintain` starts in a separate process, as the
   crontab in maintenance/ runs it beside the stream, and the batches go on until it exits. A batch
   counts as "during maintenance" when it overlaps the time its lock file exists (OPTIMIZE, purge,
   VACUUM and checkpoint; not its JVM start). Ratio = p99 batch seconds during / p99 without
   (target <= 1.5).
4. After OPTIMIZE: maintenance again in this process, the stream stopped (so the table is compacted
   whatever step 3 managed), then --stream-batches batches and the aggregate again. Ratios = median
   seconds before / after, for the merge (target >= 2) and for the aggregate (no target).
5. Where the merge's seconds go: from Spark's event log, per timed batch, the seconds of the one
   MERGE step that reads every candidate file ("scanning files for matches"), before and after
   OPTIMIZE, beside the whole batch.
Results go to bench/results/maintenance.json. Not a test: nothing here fails on a time.

    python bench/maintenance.py                       # ~10 min on 2 cores
    python bench/maintenance.py --small-merges 20 --stream-batches 5    # a quick look
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml
from merge_vs_append import COLUMNS, TOPIC, kafka_records, write_target
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from results_file import write_results
from spark_jobs import Job, event_log_conf, read_jobs, seconds_in

from cdc_delta import columns as C
from cdc_delta.config import AppConfig, load_config
from cdc_delta.lock import lock_path
from cdc_delta.maintenance.run import run_maintenance
from cdc_delta.merger import Merger
from cdc_delta.merger.with_stream import MergeAfterLandings
from cdc_delta.spark_session import build_session
from cdc_delta.stream.batch import BatchProcessor

ROOT = Path(__file__).parents[1]
RESULTS = Path(__file__).parent / "results" / "maintenance.json"
ROWS_PER_FILE = 50_000
SCAN_STEP = "MERGE operation - scanning files for matches"


def write_config(root: Path) -> AppConfig:
    """The YAML config both this process and the `maintain` process read (default maintenance)."""
    path = root / "cdc.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "app_id": "bench",
                "storage": {"root": str(root / "lake")},
                "merge": {"max_delay_seconds": 0},
                "spark": {
                    "master": "local[2]",
                    "shuffle_partitions": 4,
                    "conf": {"spark.driver.memory": "4g", "spark.ui.enabled": "false"},
                },
                "maintenance": {"target_file_size_mb": 2},
                "tables": [
                    {"name": "shop.orders", "topics": [TOPIC], "key": ["id"], "columns": {"id": "bigint", **COLUMNS}}
                ],
            }
        )
    )
    return load_config(path, env={})


class Stream:
    """Batches of new and updated keys through the batch function, timed."""

    def __init__(self, spark: SparkSession, config: AppConfig, rows: int, batch_rows: int) -> None:
        self.spark, self.batch_rows = spark, batch_rows
        self.processor = BatchProcessor(config, listener=MergeAfterLandings(Merger(spark, config)))
        self.first_id = self.next_id = rows
        self.updated_span = 0  # keys [first_id, first_id + updated_span) get the updates
        self.batch_id = 0

    def batch(self, updates: int) -> DataFrame:
        new = self.spark.range(self.next_id, self.next_id + self.batch_rows, numPartitions=2)
        pos_base = 10**9 * (self.batch_id + 1)  # newer than every earlier batch: the updates win
        self.next_id += self.batch_rows
        batch = kafka_records(new, "c", pos_base)
        if not updates:
            return batch
        known = self.spark.range(updates, numPartitions=1).select(
            (F.lit(self.first_id) + F.rand(self.batch_id) * self.updated_span).cast("bigint").alias("id")
        )
        return batch.unionByName(kafka_records(known, "u", pos_base))

    def fragmented(self) -> None:
        """From now on, updates hit the keys inserted so far."""
        self.updated_span = self.next_id - self.first_id

    def merge(self, updates: int = 0) -> tuple[float, float]:
        """Merge one batch; returns (start, end) in time.monotonic()."""
        batch = self.batch(updates)  # made (and checkpointed) before the clock starts
        started = time.monotonic()
        self.processor.process(batch, self.batch_id)
        self.batch_id += 1
        return started, time.monotonic()


def p99(values: list[float]) -> float:
    """Nearest-rank 99th percentile (the maximum below 100 values)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


def summary(spans: list[tuple[float, float]]) -> dict:
    seconds = [end - start for start, end in spans]
    return {
        "batches": len(seconds),
        "p50_s": round(statistics.median(seconds), 2),
        "p99_s": round(p99(seconds), 2),
        "max_s": round(max(seconds), 2),
    }


def scan_seconds(spark: SparkSession, path: str, runs: int = 5) -> float:
    """Median seconds of a full-table aggregate over the live rows (every file is read)."""
    seconds = []
    for _ in range(runs):
        started = time.monotonic()
        spark.read.format("delta").load(path).where(~F.col(C.DELETED)).agg(
            F.count(F.lit(1)), F.sum("amount"), F.countDistinct("status")
        ).collect()
        seconds.append(time.monotonic() - started)
    return round(statistics.median(seconds), 2)


def watch_lock(lock: Path, stop: threading.Event, window: list[float]) -> None:
    """Record when ``lock`` first appears and when it is gone again (maintenance holds it)."""
    while not stop.is_set():
        if len(window) == (0 if lock.exists() else 1):  # appeared, or gone again
            window.append(time.monotonic())
        time.sleep(0.05)


def beside_maintenance(stream: Stream, updates: int, root: Path, lock: Path) -> tuple[list[tuple[float, float]], dict]:
    """Merge batches while `cdc-delta maintain` runs in its own process; the batches that overlap its
    lock, and what the process said."""
    log = root / "maintain.log"
    window: list[float] = []
    stop = threading.Event()
    watcher = threading.Thread(target=watch_lock, args=(lock, stop, window), daemon=True)
    watcher.start()
    with log.open("w") as out:
        maintain = subprocess.Popen(
            ["nice", "-n", "10", sys.executable, "-m", "cdc_delta.cli", "maintain", "--config", str(root / "cdc.yaml")],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
        spans = []
        while maintain.poll() is None:
            spans.append(stream.merge(updates))
        time.sleep(0.2)
        stop.set()
        watcher.join()
    text = log.read_text()
    if maintain.returncode != 0 or len(window) != 2:
        kept = Path(tempfile.gettempdir()) / "cdc-bench-maintain.log"
        shutil.copyfile(log, kept)  # the bench's directory is removed on exit
        errors = "\n".join(line for line in text.splitlines() if "ERROR" in line or "rror:" in line)
        raise SystemExit(f"maintain exited {maintain.returncode} (lock window {window}); its log is {kept}:\n{errors}")
    during = [(s, e) for s, e in spans if e > window[0] and s < window[1]]
    report = json.loads(sorted((root / "lake" / "_cdc_maintenance_reports").glob("*.json"))[-1].read_text())
    return during, {
        "maintenance_s": round(window[1] - window[0], 1),
        "maintain_report": report["tables"][0],
        "maintenance_races_lost": text.count("lost a concurrent-write race"),
        "stream_holds": text.count("the stream pauses its writes"),
    }


def scan_step(jobs: list[Job], spans: list[tuple[float, float]]) -> dict:
    """Median seconds per batch of the MERGE step that reads the candidate files, and of the rest."""
    scans = [seconds_in(jobs, span, SCAN_STEP) for span in spans]
    rest = [end - start - scan for (start, end), scan in zip(spans, scans, strict=True)]
    return {"scan_p50_s": round(statistics.median(scans), 3), "rest_p50_s": round(statistics.median(rest), 2)}


def run(spark: SparkSession, root: Path, args: argparse.Namespace) -> tuple[dict, dict[str, list[tuple[float, float]]]]:
    config = write_config(root)
    path = config.storage.table_path(config.tables[0])
    write_target(spark, path, args.rows, max(1, args.rows // ROWS_PER_FILE))
    stream = Stream(spark, config, args.rows, args.batch_rows)
    started = time.monotonic()
    for _ in range(args.small_merges):
        stream.merge()
    fragmented_files = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["numFiles"]
    fragment_s = time.monotonic() - started
    print(f"{args.small_merges} small merges in {fragment_s:.0f}s: {fragmented_files} files", flush=True)
    stream.fragmented()

    before = [stream.merge(args.updates) for _ in range(args.stream_batches)]
    files_before = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["numFiles"]
    scan_before = scan_seconds(spark, path)
    print("without maintenance:", summary(before), f"aggregate {scan_before}s", flush=True)
    during, maintain = beside_maintenance(stream, args.updates, root, Path(lock_path(config, "maintenance")))
    print("beside maintenance:", summary(during), maintain, flush=True)
    report = run_maintenance(spark, config).tables[0]
    after = [stream.merge(args.updates) for _ in range(args.stream_batches)]
    scan_after = scan_seconds(spark, path)
    print("after OPTIMIZE:", summary(after), f"aggregate {scan_after}s", flush=True)

    median = {name: summary(spans)["p50_s"] for name, spans in (("before", before), ("after", after))}
    result = {
        "target_rows": args.rows,
        "batch_rows": args.batch_rows,
        "small_merges": args.small_merges,
        "small_merges_s": round(fragment_s, 1),
        "updates_per_batch": args.updates,
        "files_fragmented": fragmented_files,
        "files_after_timed_batches": files_before,
        "files_after_optimize": report.files_after,
        "before_optimize": summary(before),
        "after_optimize": summary(after),
        "ratio_merge_before_to_after": round(median["before"] / median["after"], 2),
        "target_merge_speedup": 2.0,
        "aggregate_before_s": scan_before,
        "aggregate_after_s": scan_after,
        "ratio_aggregate_before_to_after": round(scan_before / scan_after, 2),
        "beside_maintenance": {**summary(during), **maintain},
        "ratio_p99_during_to_without": round(summary(during)["p99_s"] / summary(before)["p99_s"], 2),
        "target_p99_ratio": 1.5,
    }
    return result, {"before": before, "after": after}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=500_000, help="target rows before the small merges")
    parser.add_argument("--small-merges", type=int, default=200)
    parser.add_argument("--batch-rows", type=int, default=100, help="new keys per batch")
    parser.add_argument("--updates", type=int, default=10, help="updates per timed batch")
    parser.add_argument("--stream-batches", type=int, default=20, help="timed batches without and after OPTIMIZE")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="cdc-bench-maint-"))
    try:
        config = write_config(root)
        spark = build_session(config.spark, event_log_conf(root / "eventlog"))
        version = spark.version
        result, spans = run(spark, root, args)
        spark.stop()  # flushes the event log
        jobs = read_jobs(root / "eventlog")
        steps = {name: scan_step(jobs, batches) for name, batches in spans.items()}
        result["merge_steps"] = {
            **steps,
            "ratio_scan_before_to_after": round(
                steps["before"]["scan_p50_s"] / max(steps["after"]["scan_p50_s"], 1e-3), 1
            ),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(result), flush=True)
    write_results(args.out, "maintenance", result, spark=version)


if __name__ == "__main__":
    main()
