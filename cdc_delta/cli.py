"""The ``cdc-delta`` command line."""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cdc_delta import __version__
from cdc_delta.config import AppConfig, load_config
from cdc_delta.exceptions import CdcDeltaError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger("cdc_delta.cli")

EPILOG = """\
examples:
  cdc-delta demo                               apply generated Debezium events to local Delta tables
  cdc-delta check-config --config cdc.yaml     validate a config file and print what it resolves to
  cdc-delta sql --config cdc.yaml "SELECT count(*) FROM inventory.orders WHERE NOT _cdc_deleted"

Config: one YAML file (see streaming/example-config.yaml); any field can be overridden with an
environment variable CDC_DELTA__SECTION__FIELD, e.g. CDC_DELTA__KAFKA__BOOTSTRAP_SERVERS=host:9092.
"""


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("py4j", "pyspark"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _spark(config: AppConfig) -> SparkSession:
    from cdc_delta.spark_session import build_session

    return build_session(config.spark)


def register_tables(spark: SparkSession, config: AppConfig) -> list[str]:
    """Make every existing table queryable as ``db.table`` in this session; returns their names."""
    from delta.tables import DeltaTable

    from cdc_delta.columns import quote

    names = []
    for table in config.tables:
        path = config.storage.table_path(table)
        if not DeltaTable.isDeltaTable(spark, path):
            continue
        db, _, _ = table.name.rpartition(".")
        if db:
            spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote(db)}")
        if not spark.catalog.tableExists(table.name):
            spark.catalog.createTable(table.name, path=path, source="delta")
        names.append(table.name)
    return names


def cmd_demo(args: argparse.Namespace) -> int:
    from cdc_delta.config import SparkConfig
    from cdc_delta.demo import demo_config, run_demo
    from cdc_delta.spark_session import build_session

    root = Path(args.dir or tempfile.mkdtemp(prefix="cdc-delta-demo-"))
    spark = build_session(SparkConfig())
    results = run_demo(spark, root, args.events, args.batches)
    totals = {k: sum(getattr(r, k) for r in results) for k in ("rows_in", "applied", "dead_lettered", "skipped")}
    print(
        f"demo: {len(results)} batches, {totals['rows_in']} records in, {totals['applied']} applied, "
        f"{totals['dead_lettered']} dead-lettered, {totals['skipped']} skipped; tables under {root}"
    )
    config = demo_config(root)
    register_tables(spark, config)
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


def cmd_check_config(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    for table in config.tables:
        print(f"{table.name}: key {table.key} -> {config.storage.table_path(table)}")
    print(f"dead letters -> {config.storage.dead_letters}")
    print(f"config {args.config} is valid")
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    spark = _spark(config)
    names = register_tables(spark, config)
    logger.info("tables: %s", ", ".join(names) or "(none created yet)")
    spark.sql(args.query).show(args.limit, truncate=False)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cdc-delta",
        description="Replicate MySQL/MariaDB tables into Delta Lake from Debezium change events.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"cdc-delta {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging, with tracebacks")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser("demo", help="apply generated Debezium events to local Delta tables and query them")
    demo.add_argument("--dir", help="where the demo tables go (default: a new temporary folder)")
    demo.add_argument("--events", type=int, default=2000, help="generated changes (default 2000)")
    demo.add_argument("--batches", type=int, default=4, help="micro-batches to split them into (default 4)")
    demo.set_defaults(func=cmd_demo)

    check = sub.add_parser("check-config", help="validate a config file")
    check.add_argument("--config", required=True, help="path to the YAML config")
    check.set_defaults(func=cmd_check_config)

    sql = sub.add_parser("sql", help="run a SQL query over the replicated tables (named db.table)")
    sql.add_argument("--config", required=True, help="path to the YAML config")
    sql.add_argument("--limit", type=int, default=50, help="rows to print (default 50)")
    sql.add_argument("query", help="the SQL query")
    sql.set_defaults(func=cmd_sql)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _setup_logging(args.verbose)
    try:
        return int(args.func(args))
    except CdcDeltaError as exc:
        logger.debug("failed", exc_info=True)
        print(f"cdc-delta: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
