"""Benchmark: how much of the changelog a merger reads for one table's pending changes (issue 26: "choose
partitioning, sort order and file size so that reading one table's pending changes reads little of the
others', and measure it").

One Spark session (local[2], the project's settings, its UI on for the stage metrics). ``--landings``
landings of ``--events`` generated changes each over ``--tables`` tables of distinct shapes go through
the stream's batch function (without Kafka) into a changelog; nothing is merged. Then the pending
changes of every landing are read as the merger reads them (:func:`cdc_delta.changelog.pending.changes`)
for one table, for ten, and for every table: Spark's own stage metrics say what a scan with the
merger's filter took from the changelog's files (records and bytes read, after Parquet's row-group
skipping), and the merger's read is timed. The same
again after the hourly maintenance compacted the changelog (:func:`~cdc_delta.maintenance.changelog.
maintain_changelog`, which bin-packs the landings' files). pyarrow reads the files' footers to say why:
the row groups, their rows, and how many of them a one-table read cannot skip (the table's name within
the group's min/max statistics).

The figure: ``one_table_records_fraction`` = records read for one table / records read for every table;
the table's own share is 1 / ``--tables``. Results go to bench/results/pending_read.json. Not a test:
nothing fails on a figure.

    python bench/pending_read.py                          # 100 tables, 20 landings of 10,000 changes
    python bench/pending_read.py --tables 1000 --events 20000
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import requests

RESULTS = Path(__file__).parent / "results" / "pending_read.json"
sys.path.insert(0, str(Path(__file__).parent))


def stage_input(spark: Any, group: str) -> tuple[int, int]:
    """(records, bytes) the stages of the jobs of job group ``group`` read from files, from Spark's
    status REST API (its listener is asynchronous: read until two readings agree)."""
    sc = spark.sparkContext
    base = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"
    previous = None
    for _ in range(30):
        jobs = [j for j in requests.get(f"{base}/jobs", timeout=10).json() if j.get("jobGroup") == group]
        records = bytes_read = 0
        for job in jobs:
            for stage in job["stageIds"]:
                for attempt in requests.get(f"{base}/stages/{stage}", timeout=10).json():
                    records += attempt["inputRecords"]
                    bytes_read += attempt["inputBytes"]
        if jobs and (records, bytes_read) == previous:
            return records, bytes_read
        previous = (records, bytes_read)
        time.sleep(1)
    raise AssertionError(f"Spark's status store did not settle for job group {group}")


def timed_read(spark: Any, config: Any, names: list[str], through: int, label: str) -> dict[str, Any]:
    """Read ``names``' pending changes (every landing): the changelog's rows a scan with the merger's
    filter (its tables, its landings) takes from the files after Parquet's skipping, counted by Spark
    (a scan alone, written nowhere, so that its stage is the only input), and the seconds of the
    merger's own read of them (:func:`~cdc_delta.changelog.pending.changes`: the scan, the schemas, the
    canonical images)."""
    from pyspark.sql import functions as F

    from cdc_delta.changelog.pending import changes
    from cdc_delta.changelog.table import LAND_SEQ, TABLE, changelog_path

    group = f"pending-read-{label}"
    spark.sparkContext.setJobGroup(group, group)
    scan = spark.read.format("delta").load(changelog_path(config))
    scan.where((F.col(LAND_SEQ) <= through) & F.col(TABLE).isin(names)).write.format("noop").mode("overwrite").save()
    spark.sparkContext.setJobGroup("bench", "bench")
    records, bytes_read = stage_input(spark, group)
    t0 = time.monotonic()
    held = changes(spark, config, {name: (-1, through) for name in names})
    rows = held.frame.count()
    seconds = time.monotonic() - t0
    held.release()
    return {
        "tables": len(names),
        "changes": rows,
        "records_read": records,
        "bytes_read": bytes_read,
        "merger_read_seconds": round(seconds, 2),
    }


def row_groups(path: str, table: str) -> dict[str, Any]:
    """The changelog's row groups (current version) and those whose ``table`` statistics hold ``table``."""
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    groups = rows = wanted_groups = wanted_rows = 0
    files = DeltaTable(path).file_uris()
    for uri in files:
        meta = pq.ParquetFile(uri.removeprefix("file://")).metadata
        column = meta.schema.names.index("table")
        for i in range(meta.num_row_groups):
            group = meta.row_group(i)
            stats = group.column(column).statistics
            groups += 1
            rows += group.num_rows
            if stats is None or not stats.has_min_max or stats.min <= table <= stats.max:
                wanted_groups += 1
                wanted_rows += group.num_rows
    return {
        "files": len(files),
        "row_groups": groups,
        "rows": rows,
        "row_groups_holding_the_table": wanted_groups,
        "rows_in_them": wanted_rows,
    }


def measure(spark: Any, config: Any, names: list[str], through: int, label: str) -> dict[str, Any]:
    from cdc_delta.changelog.table import changelog_path

    one, ten = names[len(names) // 2], names[:: max(1, len(names) // 10)][:10]
    timed_read(spark, config, names, through, f"{label}-warm-up")  # the changelog's snapshot, once
    reads = {
        "one_table": timed_read(spark, config, [one], through, f"{label}-one"),
        "ten_tables": timed_read(spark, config, ten, through, f"{label}-ten"),
        "every_table": timed_read(spark, config, names, through, f"{label}-all"),
    }
    every = reads["every_table"]
    figures = {
        **reads,
        "footers": row_groups(changelog_path(config), one),
        "one_table_records_fraction": round(reads["one_table"]["records_read"] / every["records_read"], 4),
        "one_table_bytes_fraction": round(reads["one_table"]["bytes_read"] / max(1, every["bytes_read"]), 4),
        "one_table_seconds_ratio": round(reads["one_table"]["merger_read_seconds"] / every["merger_read_seconds"], 3),
    }
    print(label, figures, flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--landings", type=int, default=20)
    parser.add_argument("--events", type=int, default=10_000, help="changes a landing, over all tables")
    parser.add_argument(
        "--row-group-mb",
        default="0.25,2,0.0625",
        help="changelog.row_group_mb settings to compare, comma-separated (each its own changelog, same changes)",
    )
    args = parser.parse_args()

    from throughput import SPARK_CONF, source_tables, table_configs

    from cdc_delta.config import parse_config
    from cdc_delta.demo.batches import generated_records, kafka_frame
    from cdc_delta.demo.generator import ChangeGenerator
    from cdc_delta.maintenance.changelog import maintain_changelog
    from cdc_delta.spark_session import build_session
    from cdc_delta.stream.batch import BatchProcessor

    folder = Path(tempfile.mkdtemp(prefix="bench-pending-read-"))
    sources = source_tables(args.tables, "pr")
    names = [f"{t.db}.{t.table}" for t in sources]
    generator = ChangeGenerator(sources, seed=5, server="pr")
    offsets: dict[str, int] = {}
    batches = [generated_records(generator, args.events, offsets) for _ in range(args.landings)]
    spark = None
    figures: dict[str, Any] = {"table_share": round(1 / args.tables, 4)}
    # A first pass lands into a changelog that is not measured: the JVM's code is warm for every setting
    # (the first setting's landings took 64 s of a cold JVM, the next 39-43 s).
    for size in ["warm-up", *args.row_group_mb.split(",")]:
        warm_up = size == "warm-up"
        config = parse_config(
            {
                "app_id": f"bench-pending-read-{size}",
                "kafka": {"bootstrap_servers": "unused:9092", "topic_pattern": r"^pr\..*"},
                "spark": {
                    "master": "local[2]",
                    "shuffle_partitions": 2,
                    "conf": {**SPARK_CONF, "spark.ui.enabled": "true", "spark.ui.port": "4077"},
                },
                "storage": {"root": str(folder / size)},
                "tables": table_configs(sources, "pr"),
                "merge": {"in_stream": False},
                "changelog": {"row_group_mb": 2.0 if warm_up else float(size)},
            }
        )
        spark = spark or build_session(config.spark)
        processor = BatchProcessor(config)  # lands only
        t0 = time.monotonic()
        for number, records in enumerate(batches):
            result = processor.process(kafka_frame(spark, records), number)
        landing_s = time.monotonic() - t0
        if warm_up:
            continue
        assert result.land_seq is not None
        through = result.land_seq
        print(f"row groups of {size} MB: {args.landings} landings in {landing_s:.0f} s", flush=True)
        setting: dict[str, Any] = {"landing_seconds": round(landing_s, 1)}
        setting["landed"] = measure(spark, config, names, through, f"{size}-landed")
        now = dt.datetime.now(dt.timezone.utc)
        setting["maintenance"] = maintain_changelog(spark, config, {name: -1 for name in names}, now).summary()
        setting["compacted"] = measure(spark, config, names, through, f"{size}-compacted")
        figures[f"row_group_mb_{size}"] = setting
    assert spark is not None
    spark.stop()
    from results_file import write_results

    write_results(
        RESULTS, "pending_read", figures, tables=args.tables, landings=args.landings, events_per_landing=args.events
    )


if __name__ == "__main__":
    main()
