"""Benchmark: merge rounds over many tables of distinct shapes, two settings against each other in the
same run: ``--compare codegen`` (the default), the merger's sessions interpreting expressions (the
project's setting, :data:`cdc_delta.merger.run.INTERPRETED`) against generating code (Spark's default);
``--compare history``, every table with ``history: true`` (each merge also appends to the table's
history, :mod:`cdc_delta.history`) against none.

One Spark session (local[2], the project's settings) and two lakes, one per setting, each with its own
:class:`~cdc_delta.merger.run.Merger` (the baseline's config sets Spark's defaults in ``spark.conf``,
which the merger leaves as they are). Round after round, the same generated changes (``--tables`` tables,
each of its own shape, ``--events`` changes a round) are landed in both lakes (the stream's batch
function, without Kafka) and every table is merged, the settings taking turns in going first so that
the machine's drift falls on both alike. The first round creates the tables and is left out. Per
setting: the median seconds and JVM CPU seconds (user + system, from /proc) of a round; the ratio
first setting / second. Results go to bench/results/merge_rounds.json (codegen) or
merge_rounds_history.json. Not a test: nothing fails on a time.

    python bench/merge_rounds.py                       # 50 tables, 20,000 changes a round, 4 rounds
    python bench/merge_rounds.py --tables 100 --rounds 6
    python bench/merge_rounds.py --compare history --tables 100 --rounds 6
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results" / "merge_rounds.json"
sys.path.insert(0, str(Path(__file__).parent))

GENERATED = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}
"""Spark's defaults, set in the baseline's ``spark.conf`` (a setting there wins over the merger's)."""
COMPARISONS: dict[str, dict[str, tuple[dict[str, str], dict[str, Any]]]] = {
    "codegen": {"interpreted": ({}, {}), "generated": (GENERATED, {})},
    "history": {"history": ({}, {"history": True}), "plain": ({}, {})},
}
"""Per comparison, its two settings: (Spark conf, settings of every table), the measured one first."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=50)
    parser.add_argument("--events", type=int, default=20_000, help="changes a round, over all tables")
    parser.add_argument("--rounds", type=int, default=4, help="rounds per setting, the first left out")
    parser.add_argument("--compare", choices=sorted(COMPARISONS), default="codegen")
    args = parser.parse_args()

    from throughput import SPARK_CONF, process_cpu_s, source_tables, table_configs

    from cdc_delta.config import parse_config
    from cdc_delta.demo.batches import generated_records, kafka_frame
    from cdc_delta.demo.generator import ChangeGenerator
    from cdc_delta.merger.run import INTERPRETED, Merger
    from cdc_delta.spark_session import build_session
    from cdc_delta.stream.batch import BatchProcessor

    folder = Path(tempfile.mkdtemp(prefix="bench-merge-rounds-"))
    sources = source_tables(args.tables, "mr")
    names = [f"{t.db}.{t.table}" for t in sources]
    settings = COMPARISONS[args.compare]
    lakes = {}
    spark = None
    for label, (conf, per_table) in settings.items():
        config = parse_config(
            {
                "app_id": f"bench-{label}",
                "kafka": {"bootstrap_servers": "unused:9092", "topic_pattern": r"^mr\..*"},
                "spark": {"master": "local[2]", "shuffle_partitions": 2, "conf": {**SPARK_CONF, **conf}},
                "storage": {"root": str(folder / label)},
                "tables": [{**t, **per_table} for t in table_configs(sources, "mr")],
                "merge": {"max_delay_seconds": 3600},
            }
        )
        spark = spark or build_session(config.spark)
        merger = Merger(spark, config)
        lakes[label] = (merger, BatchProcessor(config, listener=merger))
    assert spark is not None
    pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())  # the driver runs the tasks
    generator = ChangeGenerator(sources, seed=3, server="mr")
    offsets: dict[str, int] = {}
    seconds: dict[str, list[float]] = {label: [] for label in settings}
    cpu: dict[str, list[float]] = {label: [] for label in settings}
    for number in range(args.rounds):
        records = generated_records(generator, args.events, offsets)
        order = list(settings) if number % 2 == 0 else list(reversed(settings))
        for label in order:
            merger, processor = lakes[label]
            processor.process(kafka_frame(spark, records), number)
            cpu0, t0 = process_cpu_s(pid), time.monotonic()
            result = merger.merge_tables(names)
            took, used = time.monotonic() - t0, process_cpu_s(pid) - cpu0
            assert result is not None and not any(t.error for t in result.tables), f"{label}: a table stopped"
            print(f"round {number} {label}: {took:.1f} s, JVM CPU {used:.1f} s", flush=True)
            if number > 0:
                seconds[label].append(took)
                cpu[label].append(used)
    for merger, _ in lakes.values():
        merger.close()
    spark.stop()
    figures: dict[str, Any] = {
        label: {
            "round_seconds": [round(s, 1) for s in seconds[label]],
            "median_round_s": round(statistics.median(seconds[label]), 1),
            "median_jvm_cpu_s": round(statistics.median(cpu[label]), 1),
        }
        for label in settings
    }
    measured, baseline = settings
    figures[f"{measured}_to_{baseline}_round_ratio"] = round(
        figures[measured]["median_round_s"] / figures[baseline]["median_round_s"], 2
    )
    figures[f"{measured}_to_{baseline}_cpu_ratio"] = round(
        figures[measured]["median_jvm_cpu_s"] / figures[baseline]["median_jvm_cpu_s"], 2
    )
    print(figures)
    from results_file import write_results

    name = "merge_rounds" if args.compare == "codegen" else f"merge_rounds_{args.compare}"
    write_results(
        RESULTS.with_name(f"{name}.json"),
        name,
        figures,
        tables=args.tables,
        events_per_round=args.events,
        rounds=args.rounds,
        interpreted=INTERPRETED,
    )


if __name__ == "__main__":
    main()
