"""The sql command: one Spark SQL query over the replicated tables, as merged and live."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from cdc_delta.cli.common import add_config_argument, logger, spark_for
from cdc_delta.config import AppConfig, load_config
from cdc_delta.metastore import register_delta_tables

if TYPE_CHECKING:
    from cdc_delta.consistency.point import Point

LIVE_DATABASE = "live"
"""Where ``cdc-delta sql`` makes the live views (Spark's global temporary database)."""


def cmd_sql(args: argparse.Namespace) -> int:
    from pyspark.errors import AnalysisException

    from cdc_delta.changelog.table_index import indexed
    from cdc_delta.exceptions import QueryError
    from cdc_delta.views import history
    from cdc_delta.views.live import named_in, register_live_views

    config = load_config(args.config)
    point = _consistent_point(config) if args.consistent else None  # refused before Spark starts
    spark = spark_for(config, {"spark.sql.globalTempDatabase": LIVE_DATABASE})
    names = register_delta_tables(spark, config)
    logger.info("merged tables: %s", ", ".join(names) or "(none created yet)")
    tables = indexed(spark, config).tables()
    live = named_in(args.query, LIVE_DATABASE, tables)
    if point is not None:
        from cdc_delta.consistency.cut import consistent_cut

        at, when = point
        views = register_live_views(spark, config, live, consistent_cut(spark, config, at))
    elif args.as_of is None:
        views = register_live_views(spark, config, live)
        when = "now"
    else:
        views = history.register_as_of_views(spark, config, live, args.as_of)
        when = f"source time {args.as_of}, from their history"
    if views:
        logger.info("live views, as of %s: %s", when, ", ".join(views))
    versions = history.register_history_views(spark, config, named_in(args.query, history.HISTORY_DATABASE, tables))
    if versions:
        logger.info("history views, as merged: %s", ", ".join(versions))
    try:
        result = spark.sql(args.query)
    except AnalysisException as exc:  # ParseException included
        reason = str(exc).strip().splitlines()[0].split("; line ")[0] if str(exc).strip() else type(exc).__name__
        raise QueryError(
            f"the query cannot be run: {reason} (tables: db.table as merged, {LIVE_DATABASE}.db_table and "
            f"{LIVE_DATABASE}.db_table_all fresh, hist.db_table its versions; see cdc-delta sql --help)"
        ) from exc
    result.show(args.limit, truncate=False)
    return 0


def _consistent_point(config: AppConfig) -> tuple[Point, str]:
    """The consistent point now, and how the log names it; QueryError, saying why, where there is none."""
    from cdc_delta.consistency.read import consistent_point
    from cdc_delta.exceptions import QueryError

    found = consistent_point(config)
    if found.point is None or found.unavailable is not None:
        raise QueryError(f"cannot read at a consistent point: {found.unavailable or found.line()}")
    return found.point, found.line().removeprefix("consistent point: ")


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
            "kept). A live view is made for each table the query names that way. A table with history: true "
            "also has hist.db_table, every version of every row (SCD type 2: _cdc_valid_from, _cdc_valid_to, "
            "_cdc_is_current), as merged; with --as-of, live.db_table is the table as it was at that source "
            "time, from its history. With --consistent, every live view shows its table at the consistent point "
            "(Debezium's transaction metadata on): as the source was when one transaction committed, every "
            "transaction before it whole and none after it, across tables."
        ),
        epilog=(
            "examples:\n"
            '  cdc-delta sql --config cdc.yaml "SELECT count(*) FROM live.inventory_orders"\n'
            '  cdc-delta sql --config cdc.yaml "SELECT * FROM hist.inventory_orders WHERE id = 7"\n'
            "  cdc-delta sql --config cdc.yaml --as-of '2026-12-01 10:00:00' \"SELECT * FROM live.inventory_orders\"\n"
            '  cdc-delta sql --config cdc.yaml --consistent "SELECT sum(balance) FROM live.shop_accounts"'
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_config_argument(sql)
    sql.add_argument("--limit", type=int, default=50, help="rows to print (default 50)")
    when = sql.add_mutually_exclusive_group()
    when.add_argument(
        "--as-of",
        metavar="TIME",
        help="live.db_table as the table was at this source time (UTC, '2026-12-01 10:00:00'), from its history "
        "(tables with history: true)",
    )
    when.add_argument(
        "--consistent",
        action="store_true",
        help="live.db_table at the consistent point: the newest source transaction landed whole with every one "
        "before it (needs provide.transaction.metadata; cdc-delta status shows the point)",
    )
    sql.add_argument("query", help="the SQL query")
    sql.set_defaults(func=cmd_sql)
