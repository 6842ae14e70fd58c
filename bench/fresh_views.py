"""Benchmark: what a fresh view (the metastore's, :mod:`cdc_delta.views.fresh`) costs a reader, against the
Delta table itself and against ``cdc-delta sql``'s live view of the same rows, in the same session; and
what registering the views costs the hourly maintenance, at 1 and at ``--tables`` tables.

One Spark session with Hive support (local[2], the project's settings, an embedded Derby metastore in a
temporary folder). ``--rows`` generated changes of one table (60% inserts) are landed (the stream's batch function,
without Kafka) and merged; then ``--pending`` more changes (inserts, updates, deletes) are landed and not
merged, for each pending size in turn. A query (``count(*)`` and ``sum(amount)`` of the live rows) is
timed, median of ``--repeat``, on: the Delta table as merged (what it holds is older), the fresh view, and
the live view (made by ``register_live_views`` for the query, as ``cdc-delta sql`` makes it). The
figures: ``fresh_over_table`` and ``fresh_over_live`` per pending size. Results go to
bench/results/fresh_views.json. Not a test: nothing fails on a figure.

    python bench/fresh_views.py                    # 200,000 changes; 0, 10,000 and 50,000 pending; 100 tables
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results" / "fresh_views.json"
sys.path.insert(0, str(Path(__file__).parent))
QUERY = "SELECT count(*) AS n, sum(amount) AS total FROM {source}"


def median_seconds(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.monotonic()
        run()
        times.append(time.monotonic() - t0)
    return round(statistics.median(times), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000, help="changes merged into the table first")
    parser.add_argument("--pending", default="0,10000,50000", help="pending sizes, each landed on top of the last")
    parser.add_argument("--tables", type=int, default=100, help="tables of the registration figure")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from throughput import SPARK_CONF, source_tables, table_configs

    from cdc_delta.config import parse_config
    from cdc_delta.demo.batches import DEMO_TABLES, demo_tables, generated_records, kafka_frame
    from cdc_delta.demo.generator import ChangeGenerator
    from cdc_delta.merger.run import Merger
    from cdc_delta.metastore import metastore_conf
    from cdc_delta.spark_session import build_session
    from cdc_delta.stream.batch import BatchProcessor
    from cdc_delta.views import fresh
    from cdc_delta.views.live import register_live_views

    folder = Path(tempfile.mkdtemp(prefix="bench-fresh-views-"))

    def config_for(name: str, tables: list[dict[str, Any]], pattern: str) -> Any:
        return parse_config(
            {
                "app_id": f"bench-fresh-{name}",
                "kafka": {"bootstrap_servers": "unused:9092", "topic_pattern": pattern},
                "spark": {"master": "local[2]", "shuffle_partitions": 2, "conf": dict(SPARK_CONF)},
                "storage": {"root": str(folder / name)},
                "tables": tables,
                "merge": {"in_stream": False},
                "fresh_views": {"enabled": True, "database": f"fresh_{name}"},
                "snapshot": {"metastore_dir": str(folder / "metastore")},
            }
        )

    config = config_for("one", demo_tables(), r"^dbserver1\..*")
    spark = build_session(config.spark, metastore_conf(config))
    processor = BatchProcessor(config)
    generator = ChangeGenerator(DEMO_TABLES[:1], seed=3, live=True)  # a view reads young changes only
    offsets: dict[str, int] = {}
    batch = 0

    def land(count: int) -> None:
        nonlocal batch
        step = 50_000
        for start in range(0, count, step):
            records = generated_records(generator, min(step, count - start), offsets)
            processor.process(kafka_frame(spark, records), batch)
            batch += 1

    t0 = time.monotonic()
    land(args.rows)
    Merger(spark, config).merge_all()
    print(f"{args.rows} changes landed and merged in {time.monotonic() - t0:.0f} s", flush=True)
    table = config.table("inventory.orders")
    path = config.table_path("inventory.orders")
    t0 = time.monotonic()
    [view] = [v for v in fresh.register(spark, config) if v.table == table.name]
    register_one = round(time.monotonic() - t0, 2)
    figures: dict[str, Any] = {"register_1_table_seconds": register_one}
    landed = 0
    for pending in [int(p) for p in args.pending.split(",")]:
        land(pending - landed)
        landed = pending

        def on_table() -> object:
            return spark.sql(QUERY.format(source=f"delta.`{path}` WHERE NOT _cdc_deleted")).collect()

        def on_fresh() -> object:
            return spark.sql(QUERY.format(source=view.view)).collect()

        def on_live() -> object:
            [name] = [v for v in register_live_views(spark, config, [table]) if not v.endswith("_all")]
            return spark.sql(QUERY.format(source=name)).collect()

        on_fresh()  # the first read of each: the function's jar, the plan
        seconds = {
            "table": median_seconds(on_table, args.repeat),
            "fresh_view": median_seconds(on_fresh, args.repeat),
            "live_view": median_seconds(on_live, args.repeat),
        }
        fresh_rows, live_rows = on_fresh(), on_live()
        assert fresh_rows == live_rows, (fresh_rows, live_rows)  # the same rows, or the figure means nothing
        figures[f"pending_{pending}"] = {
            **seconds,
            "fresh_over_table": round(seconds["fresh_view"] / seconds["table"], 2),
            "fresh_over_live": round(seconds["fresh_view"] / seconds["live_view"], 2),
        }
        print(pending, figures[f"pending_{pending}"], flush=True)

    # Registration at many tables: what the hourly maintenance pays before its work.
    sources = source_tables(args.tables, "fv")
    many = config_for("many", table_configs(sources, "fv"), r"^fv\..*")
    many_processor = BatchProcessor(many)
    many_generator = ChangeGenerator(sources, seed=4, server="fv", live=True)
    many_offsets: dict[str, int] = {}
    many_processor.process(kafka_frame(spark, generated_records(many_generator, args.tables * 20, many_offsets)), 0)
    Merger(spark, many).merge_all()
    many_processor.process(kafka_frame(spark, generated_records(many_generator, args.tables * 5, many_offsets)), 1)
    t0 = time.monotonic()
    views = fresh.register(spark, many)
    figures[f"register_{args.tables}_tables_seconds"] = round(time.monotonic() - t0, 2)
    figures["register_refused"] = sum(1 for v in views if v.refused)
    print(figures, flush=True)
    spark.stop()
    from results_file import write_results

    write_results(RESULTS, "fresh_views", figures, rows=args.rows, tables=args.tables, repeat=args.repeat)


if __name__ == "__main__":
    main()
