"""The sql command: one Spark SQL query over the replicated tables, as merged and live."""

from __future__ import annotations

import argparse
from typing import Any

from cdc_delta.cli.common import add_config_argument, logger, spark_for
from cdc_delta.config import load_config
from cdc_delta.metastore import register_delta_tables

LIVE_DATABASE = "live"
"""Where ``cdc-delta sql`` makes the live views (Spark's global temporary database)."""


def cmd_sql(args: argparse.Namespace) -> int:
    from pyspark.errors import AnalysisException

    from cdc_delta.changelog.table_index import indexed
    from cdc_delta.exceptions import QueryError
    from cdc_delta.views.live import named_in, register_live_views

    config = load_config(args.config)
    spark = spark_for(config, {"spark.sql.globalTempDatabase": LIVE_DATABASE})
    names = register_delta_tables(spark, config)
    logger.info("merged tables: %s", ", ".join(names) or "(none created yet)")
    tables = indexed(spark, config).tables()
    views = register_live_views(spark, config, named_in(args.query, LIVE_DATABASE, tables))
    if views:
        logger.info("live views, as of now: %s", ", ".join(views))
    try:
        result = spark.sql(args.query)
    except AnalysisException as exc:  # ParseException included
        reason = str(exc).strip().splitlines()[0].split("; line ")[0] if str(exc).strip() else type(exc).__name__
        raise QueryError(
            f"the query cannot be run: {reason} (tables: db.table as merged, {LIVE_DATABASE}.db_table and "
            f"{LIVE_DATABASE}.db_table_all fresh; see cdc-delta sql --help)"
        ) from exc
    result.show(args.limit, truncate=False)
    return 0


def add_commands(sub: Any) -> None:
    """Register this module's commands on the top-level subparsers."""
    sql = sub.add_parser(
        "sql",
        help="run a SQL query over the replicated tables: db.table as merged, live.db_table fresh",
        description=(
            "Runs one Spark SQL query. Each replicated table is there twice: db.table, the Delta table as of "
            "its last merge (soft-deleted rows included, _cdc_deleted true), and the live views "
            f"{LIVE_DATABASE}.db_table (its rows now: the merged table overridden by the changes still pending "
            f"in the changelog, soft-deleted rows out) and {LIVE_DATABASE}.db_table_all (soft-deleted rows "
            "kept). A live view is made for each table the query names that way."
        ),
        epilog=('example: cdc-delta sql --config cdc.yaml "SELECT count(*) FROM live.inventory_orders"'),
    )
    add_config_argument(sql)
    sql.add_argument("--limit", type=int, default=50, help="rows to print (default 50)")
    sql.add_argument("query", help="the SQL query")
    sql.set_defaults(func=cmd_sql)
