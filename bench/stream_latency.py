"""Benchmark: end-to-end latency of the stream at a steady rate, and its maximum sustained rate.

1. Maximum: produce a backlog, run the stream until caught up, and divide events by the time the
   batches took (from the per-batch log lines).
2. Latency: with a trigger of --trigger seconds, produce at half that maximum for --seconds; per
   row, latency = the commit time of the batch that applied it minus the source timestamp (the
   generator stamps events with the wall clock when it produces them).
Writes p50/p99 and the maximum to bench/results/stream_latency.json. Not a test: nothing fails on
a time. Needs the native broker (scripts/kafka.sh) and the Spark jars.

    python bench/stream_latency.py --trigger 10 --seconds 120
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml
from broker import native_broker

ROOT = Path(__file__).parents[1]
RESULTS = ROOT / "bench" / "results" / "stream_latency.json"
BATCH_LINE = re.compile(r"batch \d+: (\d+) in, .* in ([\d.]+)s")


def cli(*args: str, log: Path | None = None, background: bool = False) -> subprocess.Popen[bytes]:
    out = log.open("ab") if log else subprocess.DEVNULL
    proc = subprocess.Popen([sys.executable, "-m", "cdc_delta.cli", *args], stdout=out, stderr=subprocess.STDOUT)
    if not background and proc.wait() != 0:
        raise SystemExit(f"cdc-delta {' '.join(args)} failed; see {log}")
    return proc


def write_config(folder: Path, bootstrap: str, server: str, trigger_s: int, max_per_batch: int | None = None) -> Path:
    from cdc_delta.demo.batches import demo_tables

    path = folder / f"{server}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "app_id": f"bench-{server}",
                "kafka": {
                    "bootstrap_servers": bootstrap,
                    "topic_pattern": "^" + server + r"\..*",
                    "max_offsets_per_trigger": max_per_batch,
                },
                "spark": {"master": "local[2]", "shuffle_partitions": 2, "conf": {"spark.ui.enabled": "false"}},
                "storage": {"root": str(folder / server)},
                "trigger_interval": f"{trigger_s} seconds",
                "tables": demo_tables(server),
            }
        )
    )
    return path


def generate(bootstrap: str, server: str, events: int, rate: float | None, log: Path, background: bool = False):  # type: ignore[no-untyped-def]
    from cdc_delta.demo.batches import DEMO_TABLES
    from cdc_delta.demo.generator import topic_of
    from cdc_delta.demo.producer import ensure_topics

    ensure_topics(bootstrap, [topic_of(t, server) for t in DEMO_TABLES], 3)
    code = (
        "import sys; from cdc_delta.demo.batches import DEMO_TABLES;"
        "from cdc_delta.demo.generator import ChangeGenerator;"
        "from cdc_delta.demo.producer import produce;"
        f"g = ChangeGenerator(DEMO_TABLES, seed=5, live=True, server={server!r});"
        f"produce({bootstrap!r}, g.changes({events}), rate={rate!r})"
    )
    out = log.open("ab")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=out, stderr=subprocess.STDOUT)
    if not background and proc.wait() != 0:
        raise SystemExit(f"producing failed; see {log}")
    return proc


def max_sustained(bootstrap: str, folder: Path, events: int) -> float:
    log = folder / "max.log"
    generate(bootstrap, "maxrate", events, None, log)
    config = write_config(folder, bootstrap, "maxrate", 1, max_per_batch=max(1000, events // 5))
    cli("stream", "--config", str(config), "--until-caught-up", log=log)
    batches = [BATCH_LINE.search(line) for line in log.read_text().splitlines()]
    rows = [(int(m.group(1)), float(m.group(2))) for m in batches if m]
    steady = rows[1:] or rows  # the first batch pays table creation and JIT warm-up
    return sum(n for n, _ in steady) / sum(s for _, s in steady)


def latencies(bootstrap: str, folder: Path, rate: float, seconds: int, trigger_s: int) -> list[float]:
    from cdc_delta.config import load_config
    from cdc_delta.spark_session import build_session

    log = folder / "latency.log"
    config_path = write_config(folder, bootstrap, "steady", trigger_s)
    stream = cli("stream", "--config", str(config_path), log=log, background=True)
    time.sleep(25)  # let Spark start before the clock runs
    producer = generate(bootstrap, "steady", int(rate * seconds), rate, log, background=True)
    producer.wait()
    time.sleep(3 * trigger_s + 10)
    stream.terminate()
    stream.wait(timeout=300)
    config = load_config(config_path, env={})
    spark = build_session(config.spark)
    out: list[float] = []
    for table in config.tables:
        path = config.storage.table_path(table)
        commits = sorted(
            (r["timestamp"].timestamp(), r["operation"])
            for r in spark.sql(f"DESCRIBE HISTORY delta.`{path}`").select("timestamp", "operation").collect()
            if r["operation"] == "MERGE"
        )
        for row in spark.read.format("delta").load(path).select("_cdc_source_ts", "_cdc_ingested_at").collect():
            started = row["_cdc_ingested_at"].timestamp()
            committed = next((t for t, _ in commits if t >= started), None)
            if committed is not None:
                out.append(committed - row["_cdc_source_ts"].timestamp())
    return sorted(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trigger", type=int, default=10, help="trigger interval in seconds (default 10)")
    parser.add_argument("--seconds", type=int, default=120, help="how long to produce at the steady rate")
    parser.add_argument("--backlog", type=int, default=40_000, help="events for the maximum-rate run")
    parser.add_argument("--port", type=int, default=19192)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    with native_broker(args.port, "cdc-latency-") as (folder, bootstrap):
        maximum = max_sustained(bootstrap, folder, args.backlog)
        print(f"maximum sustained: {maximum:.0f} events/s", flush=True)
        samples = latencies(bootstrap, folder, maximum / 2, args.seconds, args.trigger)
    p50, p99 = samples[len(samples) // 2], samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    result = {
        "benchmark": "stream_latency",
        "measured_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "machine": platform.machine(),
        "trigger_s": args.trigger,
        "max_sustained_events_per_s": round(maximum),
        "steady_rate_events_per_s": round(maximum / 2),
        "steady_seconds": args.seconds,
        "rows_sampled": len(samples),
        "latency_p50_s": round(p50, 2),
        "latency_p99_s": round(p99, 2),
        "target_p50_s": args.trigger + 5,
        "target_p99_s": 3 * args.trigger,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
