"""Benchmark: what operating the stream costs (issue 15's figures), measured in this run on this machine.

- status: `cdc-delta status` as a process over --tables tables that the stream created (Delta log read
  with delta-rs, no Spark), against the same figures read the way it did before (a Spark session:
  each table's last commit and counts). Target: under 3 s for 100 tables.
- manifest: one micro-batch of --tables tables x --events-per-table events through the batch function,
  with live_tables.enabled (Delta rewrites each table's symlink manifest after its commit) against
  the same batch without; tables created by a warm-up batch first.
Writes bench/results/operations.json. Not a test: nothing fails on a time.

    python bench/operations.py
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from broker import native_broker
from results_file import write_results
from throughput import (
    ROOT,
    SPARK_CONF,
    bench_config,
    end_offsets,
    kafka_batch,
    produce,
    records_from,
    source_tables,
    stream,
    timed,
    write_yaml,
)

sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results" / "operations.json"


def status_seconds(config: Path) -> float:
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "cdc_delta.cli", "status", "--config", str(config)], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"status failed: {done.stderr[-2000:]}")
    return time.monotonic() - t0


SPARK_STATUS = """
import sys, time, yaml
t0 = time.monotonic()
from cdc_delta.config import load_config
from cdc_delta.spark_session import build_session
from delta.tables import DeltaTable
config = load_config(sys.argv[1], env={})
spark = build_session(config.spark)
for table in config.tables:
    path = config.storage.table_path(table)
    last = DeltaTable.forPath(spark, path).history(1).select("version", "timestamp", "userMetadata").first()
    df = spark.read.format("delta").load(path)
    df.count(); df.where("_cdc_deleted").count()
print(time.monotonic() - t0)
"""


def part_status(bootstrap: str, folder: Path, tables: int) -> dict[str, Any]:
    sources = source_tables(tables, "st")
    produce(bootstrap, "st", sources, tables * 20, 1, seed=5)
    config = write_yaml(folder, "st", bench_config(folder, bootstrap, "st", sources))
    stream(config, folder / "st.log", "--until-caught-up")
    with_delta_rs = min(status_seconds(config) for _ in range(3))
    spark = subprocess.run([sys.executable, "-c", SPARK_STATUS, str(config)], capture_output=True, text=True)
    if spark.returncode != 0:
        raise SystemExit(spark.stderr[-2000:])
    with_spark = float(spark.stdout.strip().splitlines()[-1])
    return {
        "tables": tables,
        "status_s": round(with_delta_rs, 2),
        "spark_status_s": round(with_spark, 2),
        "status_speedup": round(with_spark / with_delta_rs, 1),
    }


def manifest_batch(
    spark: Any, bootstrap: str, folder: Path, server: str, tables: int, events: int, live: bool
) -> float:
    from cdc_delta.config import parse_config
    from cdc_delta.merger import Merger
    from cdc_delta.merger.with_stream import MergeAfterLandings
    from cdc_delta.stream.batch import BatchProcessor

    sources = source_tables(tables, server)
    config = {**bench_config(folder, bootstrap, server, sources), "live_tables": {"enabled": live}}
    parsed = parse_config(config)
    processor = BatchProcessor(parsed, listener=MergeAfterLandings(Merger(spark, parsed)))
    produce(bootstrap, server, sources, tables * 20, 1, seed=2)
    processor.process(kafka_batch(spark, bootstrap, server), 0)  # creates the tables
    warm = end_offsets(bootstrap, server)
    produce(bootstrap, server, sources, events, 1, seed=3)
    return timed(lambda: processor.process(records_from(spark, bootstrap, server, warm), 1))


def part_manifest(spark: Any, bootstrap: str, folder: Path, tables: int, per_table: int) -> dict[str, Any]:
    events = tables * per_table
    without = manifest_batch(spark, bootstrap, folder, "mf0", tables, events, live=False)
    with_manifest = manifest_batch(spark, bootstrap, folder, "mf1", tables, events, live=True)
    return {
        "tables": tables,
        "events": events,
        "batch_s": round(without, 2),
        "batch_with_manifests_s": round(with_manifest, 2),
        "manifest_batch_ratio": round(with_manifest / without, 2),
        "manifest_s_per_table": round((with_manifest - without) / tables, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--events-per-table", type=int, default=100)
    parser.add_argument("--port", type=int, default=19392)
    args = parser.parse_args()
    with native_broker(args.port, "cdc-operations-") as (folder, bootstrap):
        status = part_status(bootstrap, folder, args.tables)
        print(json.dumps(status), flush=True)
        from cdc_delta.config import SparkConfig
        from cdc_delta.spark_session import build_session

        spark = build_session(SparkConfig(master="local[2]", shuffle_partitions=2, conf=SPARK_CONF))
        manifest = part_manifest(spark, bootstrap, folder, args.tables, args.events_per_table)
        print(json.dumps(manifest), flush=True)
        spark.stop()
    write_results(RESULTS, "operations", {"status": status, "manifest": manifest})


if __name__ == "__main__":
    main()
