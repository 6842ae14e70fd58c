"""Benchmark: the changelog's files after an hour of a running stream over 100 tables, before and after
the hourly maintenance (issue 26: "changelog files after 1 hour at 100 tables, before / after
maintenance").

One native Kafka broker and one stream process (`cdc-delta stream`, local[2], 10 s trigger, merges on
their defaults beside the ingest), as a user runs them. ``--tables`` tables, each its own topic of one
partition (as Debezium creates them) and its own shape, take generated changes at ``--rate`` events/s
for ``--seconds``. Every ``--sample-every`` seconds, read by delta-rs from the committed Delta logs
(Spark is not touched): the changelog's files (those of its current version, and the Parquet files on
disk, which include the ones a compaction replaced until VACUUM deletes them), its bytes and commits,
and the files of the replicated tables. Once the stream has read everything, `cdc-delta maintain` runs
beside it (as the crontab in maintenance/ runs it every hour) and the same is read again. Results go to
bench/results/changelog_files.json. Not a test: nothing fails on a count.

    python bench/changelog_files.py                    # an hour at 500 events/s: about 70 minutes
    python bench/changelog_files.py --seconds 300      # a quick look
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from broker import native_broker
from results_file import write_results
from throughput import bench_config, source_tables, stream, wait_caught_up, write_yaml

RESULTS = Path(__file__).parent / "results" / "changelog_files.json"
SERVER = "cf"


def delta_files(path: Path) -> dict[str, int]:
    """A Delta table's files in its current version, their bytes, the Parquet files on disk, and its
    commits; zeros where there is no table yet."""
    from deltalake import DeltaTable

    if not (path / "_delta_log").is_dir():
        return {"files": 0, "bytes": 0, "files_on_disk": 0, "commits": 0}
    table = DeltaTable(str(path))
    sizes = table.get_add_actions(flatten=True).column("size_bytes").to_pylist()
    return {
        "files": len(sizes),
        "bytes": int(sum(sizes)),
        "files_on_disk": sum(1 for f in path.rglob("*.parquet") if "_delta_log" not in f.parts),
        "commits": table.version() + 1,
    }


def sample(changelog: Path, tables: list[Path], started: float) -> dict[str, Any]:
    """What the changelog and the replicated tables hold now."""
    replicated = [delta_files(t) for t in tables]
    return {
        "at_s": round(time.monotonic() - started),
        "changelog": delta_files(changelog),
        "tables_files": sum(t["files"] for t in replicated),
        "tables_files_on_disk": sum(t["files_on_disk"] for t in replicated),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--rate", type=float, default=500, help="events/s over all tables")
    parser.add_argument("--seconds", type=int, default=3600, help="how long changes are produced")
    parser.add_argument("--sample-every", type=int, default=300, help="seconds between two readings")
    parser.add_argument("--port", type=int, default=19494)
    args = parser.parse_args()

    from cdc_delta.changelog.table import changelog_path
    from cdc_delta.config import parse_config
    from cdc_delta.demo.generator import ChangeGenerator, topic_of
    from cdc_delta.demo.producer import ensure_topics
    from cdc_delta.demo.producer import produce as send

    with native_broker(args.port, "cdc-changelog-files-") as (folder, bootstrap):
        sources = source_tables(args.tables, SERVER)
        ensure_topics(bootstrap, [topic_of(t, SERVER) for t in sources], 1)
        data = {**bench_config(folder, bootstrap, SERVER, sources), "trigger_interval": "10 seconds"}
        config = parse_config(data)
        changelog = Path(changelog_path(config))
        tables = [Path(config.storage.table_path(t)) for t in config.tables]
        path = write_yaml(folder, SERVER, data)
        log = folder / f"{SERVER}.log"
        proc = stream(path, log, background=True)
        deadline = time.monotonic() + 180
        while "started" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(1)
        events = int(args.rate * args.seconds)
        changes = ChangeGenerator(sources, seed=7, live=True, server=SERVER).changes(events)
        producer = threading.Thread(target=send, args=(bootstrap, changes), kwargs={"rate": args.rate}, daemon=True)
        started = time.monotonic()
        producer.start()
        samples = []
        while producer.is_alive():
            producer.join(timeout=args.sample_every)
            samples.append(sample(changelog, tables, started))
            print(json.dumps(samples[-1]), flush=True)
        produced_s = time.monotonic() - started
        caught_up = wait_caught_up(bootstrap, config.app_id, config.kafka.topic_pattern, 900) is not None
        before = sample(changelog, tables, started)
        maintenance_log = folder / "maintain.log"
        t0 = time.monotonic()
        with maintenance_log.open("wb") as out:
            maintained = subprocess.run(
                [sys.executable, "-m", "cdc_delta.cli", "maintain", "--config", str(path)],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        maintenance_s = time.monotonic() - t0
        after = sample(changelog, tables, started)
        proc.terminate()
        proc.wait(timeout=600)
        said = [line for line in maintenance_log.read_text().splitlines() if "maintained the changelog" in line]
        batches = sum(1 for line in log.read_text().splitlines() if " landed (landing " in line)
        results = {
            "tables": args.tables,
            "partitions_per_table": 1,
            "rate_events_per_s": args.rate,
            "produced_s": round(produced_s),
            "events": events,
            "caught_up": caught_up,
            "landings": batches,
            "samples": samples,
            "before_maintenance": before,
            "after_maintenance": after,
            "maintenance_exit_code": maintained.returncode,
            "maintenance_s": round(maintenance_s, 1),
            "maintenance_changelog_line": said[-1].split(": ", 1)[-1] if said else None,
            "changelog_files_before_maintenance": before["changelog"]["files"],
            "changelog_files_after_maintenance": after["changelog"]["files"],
        }
        print(json.dumps(results, indent=2), flush=True)
        write_results(RESULTS, "changelog_files", results)


if __name__ == "__main__":
    main()
