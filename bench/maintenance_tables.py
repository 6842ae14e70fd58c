"""Benchmark: the hourly maintenance of many small tables, where its time goes by step.

One process (local[2]), the stream stopped:
1. A lake of --tables tables (one partition each, a shape each), built by the batch function with
   every table merged every batch (`merge.max_delay_seconds: 0`): --batches batches of
   --events-per-table generated changes a table (inserts, updates, deletes), so each table has a few
   files and some tombstones.
2. `run_maintenance` three times, as the hourly job runs it (`maintenance.concurrency` 2), the clock an hour
   on so that the tombstones may go (retention 0 h, allowed): the first run has work (compaction,
   purge, VACUUM of what they replaced), the second finds none, as most hourly runs of quiet tables;
   a third idle run with `maintenance.vacuum_interval_hours` 24, so that no VACUUM is due.
   Each run's wall time, the median per table, and the seconds of each step summed over the tables
   (two at a time, so they add up to about twice the wall time): OPTIMIZE, purge, VACUUM, checkpoint,
   the table's size before and after, its merged position, the changelog's maintenance.
Results go to bench/results/maintenance_tables.json (with --zorder, `maintenance.zorder: true`:
maintenance_tables_zorder.json). Not a test: nothing here fails on a time.

    python bench/maintenance_tables.py                 # 40 tables, ~10 min on 2 cores
    python bench/maintenance_tables.py --zorder        # OPTIMIZE ... ZORDER BY the key, ~10 min
    python bench/maintenance_tables.py --tables 100    # ~15 min
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from results_file import write_results
from throughput import SPARK_CONF, source_tables, table_configs

from cdc_delta.config import parse_config
from cdc_delta.demo.batches import generated_records, kafka_frame
from cdc_delta.demo.generator import ChangeGenerator
from cdc_delta.maintenance import commands
from cdc_delta.maintenance import run as maintenance
from cdc_delta.merger import Merger
from cdc_delta.merger.with_stream import MergeAfterLandings
from cdc_delta.spark_session import build_session
from cdc_delta.stream.batch import BatchProcessor

RESULTS = Path(__file__).parent / "results" / "maintenance_tables.json"
RESULTS_ZORDER = Path(__file__).parent / "results" / "maintenance_tables_zorder.json"
STEPS = (
    (commands, ("table_size", "optimize", "purge", "vacuum_due", "vacuum", "checkpoint")),
    (maintenance, ("merged_through", "maintain_changelog")),
)


def timing_steps() -> dict[str, float]:
    """Wrap each step so that its seconds add up (over both of the run's threads) in the returned dict."""
    seconds: dict[str, float] = collections.defaultdict(float)
    lock = threading.Lock()

    def timed(name: str, step: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            t0 = time.monotonic()
            try:
                return step(*args, **kwargs)
            finally:
                with lock:
                    seconds[name] += time.monotonic() - t0

        return run

    for module, names in STEPS:
        for name in names:
            setattr(module, name, timed(name, getattr(module, name)))
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=40)
    parser.add_argument("--batches", type=int, default=2, help="batches that build the lake")
    parser.add_argument("--events-per-table", type=int, default=30, help="generated changes a table per batch")
    parser.add_argument("--zorder", action="store_true", help="maintenance.zorder: true (Z-order by the key)")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="cdc-maintenance-tables-"))
    sources = source_tables(args.tables, "mt")
    config = parse_config(
        {
            "app_id": "bench-mt",
            "storage": {"root": str(root)},
            "merge": {"max_delay_seconds": 0},
            "spark": {"master": "local[2]", "shuffle_partitions": 2, "conf": SPARK_CONF},
            "maintenance": {
                "tombstone_retention_hours": 0,
                "vacuum_retention_hours": 0,
                "allow_short_retention": True,
                "zorder": args.zorder,
            },
            "tables": table_configs(sources, "mt"),
        }
    )
    spark = build_session(config.spark)
    processor = BatchProcessor(config, listener=MergeAfterLandings(Merger(spark, config)))
    generator = ChangeGenerator(sources, seed=1, server="mt")
    offsets: dict[str, int] = {}
    t0 = time.monotonic()
    for batch_id in range(args.batches):
        records = generated_records(generator, args.tables * args.events_per_table, offsets)
        print(processor.process(kafka_frame(spark, records), batch_id).summary(), flush=True)
    built_s = time.monotonic() - t0
    seconds = timing_steps()
    runs = []
    # The third run as the second, with maintenance.vacuum_interval_hours 24: the VACUUM of the first is
    # recent, so none is due.
    interval = config.model_copy(
        update={"maintenance": config.maintenance.model_copy(update={"vacuum_interval_hours": 24})}
    )
    for label, run_config in (("with work", config), ("idle", config), ("idle, VACUUM not due", interval)):
        seconds.clear()
        t0 = time.monotonic()
        report = maintenance.run_maintenance(
            spark, run_config, now=dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)
        )
        wall = time.monotonic() - t0
        tables = [t for t in report.tables if not t.skipped]
        run = {
            "run": label,
            "wall_s": round(wall, 1),
            "tables": len(tables),
            "per_table_median_s": round(statistics.median(t.duration_s for t in tables), 2),
            "files_compacted": sum(t.files_compacted for t in tables),
            "rows_purged": sum(t.rows_purged for t in tables),
            "files_vacuumed": sum(t.files_vacuumed for t in tables),
            "vacuums": sum(t.vacuumed for t in tables),
            "checkpoints": sum(t.checkpoint_version is not None for t in tables),
            "step_seconds_summed": {k: round(v, 1) for k, v in sorted(seconds.items(), key=lambda kv: -kv[1])},
        }
        runs.append(run)
        print(run, flush=True)
    spark.stop()
    write_results(
        RESULTS_ZORDER if args.zorder else RESULTS,
        "maintenance_tables",
        runs,
        zorder=args.zorder,
        tables=args.tables,
        batches=args.batches,
        events_per_table=args.events_per_table,
        lake_built_s=round(built_s, 1),
    )


if __name__ == "__main__":
    main()
