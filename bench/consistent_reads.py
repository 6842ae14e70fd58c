"""Benchmark: what reads at the consistent point cost (issue 63: "a consistent read's time against a plain
live read"), and what moving the point on costs the stream.

One Spark session (local[2], the project's settings). ``--landings`` landings of ``--transactions`` source
transactions each go through the stream's batch function (without Kafka), every table merged after every
landing (``merge.max_delay_seconds: 0``: the merges go past the point, so a read at it travels back in
time). A transaction changes one to three of ``--tables`` tables (a row or two each), with Debezium's
transaction block on each change and its END on ``cr.transaction``; the last change of each landing's last
transaction lands with the next landing, so that the point always trails the newest landing by one
transaction.

Figures, each the median of ``--repeat`` runs taking turns:
- ``plain_read_s``: every table's live rows (:func:`cdc_delta.rows.as_of.live_rows`), counted;
- ``consistent_read_s``: the same at the consistent point: the point read with delta-rs
  (:func:`cdc_delta.consistency.read.consistent_point`), the cut (:func:`cdc_delta.consistency.cut.consistent_cut`)
  and the live rows through it, counted; ``point_s`` and ``cut_s`` of it alone;
- ``point_per_landing_s`` against ``landing_s``: the stream's step ``consistent_point`` against the whole
  landing (decode, count, land, the point), medians over the landings.

Results go to bench/results/consistent_reads.json. Not a test: nothing fails on a figure.

    python bench/consistent_reads.py                       # 20 tables, 20 landings of 50 transactions
    python bench/consistent_reads.py --tables 100 --landings 30
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results" / "consistent_reads.json"
sys.path.insert(0, str(Path(__file__).parent))
SERVER = "cr"
COMPACT = (",", ":")


def transactions(tables: list[Any], count: int, first: int, rng: random.Random) -> list[list[tuple[Any, int]]]:
    """``count`` transactions (GTIDs from ``first``): per transaction its changes, (table, row id)."""
    out = []
    for _ in range(count):
        touched = rng.sample(tables, rng.randint(1, 3))
        out.append([(table, rng.randint(1, 500)) for table in touched for _ in range(rng.randint(1, 2))])
    return out


def records(batch: list[list[tuple[Any, int]]], first_gtid: int, offsets: dict[str, int]) -> list[tuple]:
    """The Kafka records of ``batch``'s transactions: each change with its transaction block, then the END."""
    from cdc_delta.demo.generator import envelope, topic_of

    out = []
    for k, changes in enumerate(batch):
        gtid = f"0-1-{first_gtid + k}"
        per_table: dict[str, int] = {}
        for order, (table, row_id) in enumerate(changes, start=1):
            name = f"{table.db}.{table.table}"
            per_table[name] = per_table.get(name, 0) + 1
            topic = topic_of(table, SERVER)
            pos = 1000 * (first_gtid + k) + order
            values = {"id": row_id, "v": pos % 1000}
            value = envelope(table, "u", None, values, pos=pos, gtid=gtid, ts_ms=pos, server=SERVER)
            value["payload"]["transaction"] = {
                "id": gtid,
                "total_order": order,
                "data_collection_order": per_table[name],
            }
            offsets[topic] = offsets.get(topic, -1) + 1
            out.append((topic, 0, offsets[topic], b"k", json.dumps(value, separators=COMPACT).encode()))
        end = {
            "status": "END",
            "id": gtid,
            "ts_ms": 1000 * (first_gtid + k),
            "event_count": len(changes),
            "data_collections": [{"data_collection": c, "event_count": n} for c, n in per_table.items()],
        }
        topic = f"{SERVER}.transaction"
        offsets[topic] = offsets.get(topic, -1) + 1
        out.append((topic, 0, offsets[topic], b"k", json.dumps(end).encode()))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=20)
    parser.add_argument("--landings", type=int, default=20)
    parser.add_argument("--transactions", type=int, default=50, help="transactions a landing")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from results_file import write_results
    from throughput import SPARK_CONF

    from cdc_delta.changelog.table_index import indexed_without_spark
    from cdc_delta.config import parse_config
    from cdc_delta.consistency.cut import consistent_cut
    from cdc_delta.consistency.read import consistent_point
    from cdc_delta.demo.batches import kafka_frame
    from cdc_delta.demo.generator import Column, SourceTable, topic_of
    from cdc_delta.merger.run import Merger
    from cdc_delta.merger.with_stream import MergeAfterLandings
    from cdc_delta.rows.as_of import live_rows
    from cdc_delta.spark_session import build_session
    from cdc_delta.stream.batch import BatchProcessor

    folder = Path(tempfile.mkdtemp(prefix="bench-consistent-reads-"))
    tables = [SourceTable("cr", f"t{i:03d}", (Column("id", "int64"), Column("v", "int32"))) for i in range(args.tables)]
    config = parse_config(
        {
            "app_id": "bench-consistent-reads",
            "kafka": {"bootstrap_servers": "unused:9092", "topic_pattern": rf"^{SERVER}\..*"},
            "spark": {"master": "local[2]", "shuffle_partitions": 2, "conf": SPARK_CONF},
            "storage": {"root": str(folder)},
            "tables": [{"name": f"{t.db}.{t.table}", "topics": [topic_of(t, SERVER)], "key": ["id"]} for t in tables],
            "merge": {"max_delay_seconds": 0},
        }
    )
    spark = build_session(config.spark)
    processor = BatchProcessor(config, None, MergeAfterLandings(Merger(spark, config)))
    rng = random.Random(3)
    offsets: dict[str, int] = {}
    held: list[tuple] = []
    gtid = 1
    point_s, landing_s = [], []
    for number in range(args.landings):
        batch = records(transactions(tables, args.transactions, gtid, rng), gtid, offsets)
        gtid += args.transactions
        # The last change of the landing's last transaction comes with the next landing.
        last_change = max(i for i, r in enumerate(batch) if not r[0].endswith(".transaction"))
        frame = held + batch[:last_change] + batch[last_change + 1 :]
        held = [batch[last_change]]
        result = processor.process(kafka_frame(spark, frame), number)
        landing_s.append(result.landed_s)
        if "consistent_point" in result.steps:  # not where the stream's pace put it off
            point_s.append(result.steps["consistent_point"])
        print(f"landing {result.land_seq}: {result.landed_s:.1f} s ({result.steps})", flush=True)

    names = list(indexed_without_spark(config).tables())

    def count(cut: Any = None) -> int:
        return sum(frame.count() for frame in live_rows(spark, config, names, cut=cut).values())

    plain, consistent, point_only, cut_only = [], [], [], []
    for _ in range(args.repeat):
        t0 = time.monotonic()
        plain_rows = count()
        plain.append(time.monotonic() - t0)
        t0 = time.monotonic()
        found = consistent_point(config)
        t1 = time.monotonic()
        assert found.point is not None, found.line()
        cut = consistent_cut(spark, config, found.point)
        t2 = time.monotonic()
        consistent_rows = count(cut)
        consistent.append(time.monotonic() - t0)
        point_only.append(t1 - t0)
        cut_only.append(t2 - t1)
        print(
            f"plain {plain[-1]:.2f} s ({plain_rows} rows), at the point {consistent[-1]:.2f} s ({consistent_rows} rows)"
        )
    median = statistics.median
    results = {
        "tables": args.tables,
        "landings": args.landings,
        "transactions_per_landing": args.transactions,
        "plain_read_s": round(median(plain), 2),
        "consistent_read_s": round(median(consistent), 2),
        "consistent_to_plain": round(median(consistent) / median(plain), 2),
        "point_s": round(median(point_only), 3),
        "cut_s": round(median(cut_only), 2),
        "point_per_landing_s": round(median(point_s), 3),
        "landings_the_point_moved_on": len(point_s),
        "landing_s": round(median(landing_s), 2),
        "point_share_of_landing": round(median(point_s) / median(landing_s), 3),
    }
    print(results)
    write_results(RESULTS, "consistent_reads", results)


if __name__ == "__main__":
    main()
