"""Demo tools: apply generated events in-process, or write them to a Kafka broker."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from cdc_delta.metastore import register_delta_tables


def cmd_demo(args: argparse.Namespace) -> int:
    from cdc_delta.config import SparkConfig
    from cdc_delta.demo.batches import demo_config, run_demo
    from cdc_delta.spark_session import build_session

    root = Path(args.dir or tempfile.mkdtemp(prefix="cdc-delta-demo-"))
    spark = build_session(SparkConfig())
    results = run_demo(spark, root, args.events, args.batches)
    totals = {k: sum(getattr(r, k) for r in results) for k in ("rows_in", "landed", "dead_lettered", "skipped")}
    print(
        f"demo: {len(results)} batches, {totals['rows_in']} records in, {totals['landed']} landed, "
        f"{totals['dead_lettered']} dead-lettered, {totals['skipped']} skipped; tables under {root}"
    )
    config = demo_config(root)
    register_delta_tables(spark, config)
    query = (
        "SELECT _cdc_source_db AS shard, count(*) AS rows, sum(CASE WHEN _cdc_deleted THEN 1 ELSE 0 END) "
        "AS soft_deleted, sum(amount) AS amount FROM shop.orders GROUP BY 1 ORDER BY 1"
    )
    print(f"\n{query}")
    spark.sql(query).show(truncate=False)
    query = "SELECT id, customer, amount, status, _cdc_op, _cdc_deleted FROM inventory.orders ORDER BY id LIMIT 10"
    print(query)
    spark.sql(query).show(truncate=False)
    dead = spark.read.format("delta").load(config.storage.dead_letters)
    print("dead letters:")
    dead.select("topic", "partition", "offset", "reason").show(truncate=False)
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from cdc_delta.demo.batches import DEMO_TABLES
    from cdc_delta.demo.generator import Change, ChangeGenerator, topic_of
    from cdc_delta.demo.producer import ensure_topics, produce
    from cdc_delta.kafka.offsets import check_reachable

    # One line where no broker answers, not librdkafka's line every 50 ms then an exception.
    check_reachable(args.bootstrap, "cdc-delta-generate", 10, setting="--bootstrap")
    generator = ChangeGenerator(DEMO_TABLES, seed=args.seed, tombstones=True, live=True)
    ensure_topics(args.bootstrap, [topic_of(t) for t in DEMO_TABLES], args.partitions)
    sent = produce(args.bootstrap, generator.changes(args.events), rate=args.rate)
    bad_topic = topic_of(DEMO_TABLES[0])
    bad = [Change(bad_topic, b'{"id": -1}', b"{not a Debezium envelope") for _ in range(args.bad)]
    sent += produce(args.bootstrap, bad)
    print(
        f"generate: {sent} records ({args.events} changes, their tombstones, {args.bad} undecodable) "
        f"to {args.bootstrap}"
    )
    return 0


def add_commands(sub: Any) -> None:
    """Register this module's commands on the top-level subparsers."""
    demo = sub.add_parser("demo", help="apply generated Debezium events to local Delta tables and query them")
    demo.add_argument("--dir", help="where the demo tables go (default: a new temporary folder)")
    demo.add_argument("--events", type=int, default=2000, help="generated changes (default 2000)")
    demo.add_argument("--batches", type=int, default=4, help="micro-batches to split them into (default 4)")
    demo.set_defaults(func=cmd_demo)

    gen = sub.add_parser("generate", help="write generated Debezium change events (demo tables) to Kafka")
    gen.add_argument("--bootstrap", default="127.0.0.1:9092", help="Kafka bootstrap servers")
    gen.add_argument("--events", type=int, default=5000, help="changes to generate (default 5000)")
    gen.add_argument("--rate", type=float, help="events per second (default: as fast as possible)")
    gen.add_argument("--partitions", type=int, default=3, help="partitions of topics it creates (default 3)")
    gen.add_argument("--seed", type=int, default=42, help="random seed: the same seed, the same changes")
    gen.add_argument("--bad", type=int, default=0, help="undecodable records to add (they go to the dead letters)")
    gen.set_defaults(func=cmd_generate)
