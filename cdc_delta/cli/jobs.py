"""The scheduled jobs: the hourly maintenance and the nightly snapshot."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from cdc_delta.cli.common import add_config_argument, logger, session_meanwhile, spark_for
from cdc_delta.config import AppConfig, load_config
from cdc_delta.exceptions import EXIT_ATTENTION, EXIT_NOT_READY, CdcDeltaError
from cdc_delta.metrics.textfile import job_metrics

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc_delta.check.run import TableCheck
    from cdc_delta.views.fresh import FreshView
    from cdc_delta.views.live_tables import LiveTable


def cmd_maintain(args: argparse.Namespace) -> int:
    from cdc_delta.lock import LockHeld
    from cdc_delta.maintenance.run import run_maintenance
    from cdc_delta.views import fresh
    from cdc_delta.views.live_tables import register

    config = load_config(args.config)
    hazard = config.second_writer_hazard()
    if hazard:
        logger.warning("maintain: %s", hazard)
    with job_metrics(config, "maintenance") as run:
        catalog = config.live_tables.enabled or config.fresh_views.enabled
        spark = _hive_session(config) if catalog else spark_for(config)
        try:
            report = run.report = run_maintenance(spark, config, wait_s=args.wait)
        except LockHeld as exc:  # an overlapping run: the running one does the work; as the snapshot answers
            print(f"cdc-delta maintain: {exc}", file=sys.stderr)
            run.exit_code = EXIT_NOT_READY
            return EXIT_NOT_READY
        if config.live_tables.enabled:  # columns the stream added or widened since the last run
            _print_registered(register(spark, config))
        if config.fresh_views.enabled:  # past what each table merged since, with the columns it has now
            _print_fresh(fresh.register(spark, config))  # a view refused is logged and dropped: not a failure
        run.exit_code = 0
    for t in report.tables:
        print(f"{t.table}: {t.summary()}")
    if report.changelog is not None:
        print(f"changelog: {report.changelog.summary()}")
    print(f"maintenance done in {report.duration_s}s")
    return run.exit_code


def cmd_snapshot(args: argparse.Namespace) -> int:
    import datetime as dt
    import zoneinfo

    from cdc_delta.exceptions import NotReady
    from cdc_delta.lock import LockHeld
    from cdc_delta.snapshot.positions import kafka_positions_of
    from cdc_delta.snapshot.run import run_snapshot

    config = load_config(args.config)
    if args.date:
        try:
            day = dt.date.fromisoformat(args.date)
        except ValueError:
            raise CdcDeltaError(f"--date {args.date!r} is not a date: use YYYY-MM-DD, e.g. 2026-03-01") from None
    else:
        day = dt.datetime.now(zoneinfo.ZoneInfo(config.snapshot.time_zone)).date() - dt.timedelta(days=1)
    positions = (lambda: None) if args.skip_kafka_check else kafka_positions_of(config)
    spark = _hive_session(config)
    with job_metrics(config, "snapshot") as run:
        try:
            report = run.report = run_snapshot(
                spark,
                config,
                day,
                positions,
                from_stock=args.from_stock,
                at_landing=args.at_landing,
                wait_minutes=args.wait,
            )
        except (NotReady, LockHeld) as exc:
            print(f"cdc-delta snapshot: {exc}", file=sys.stderr)
            run.exit_code = EXIT_NOT_READY
            return EXIT_NOT_READY
        run.exit_code = 0
    for t in report.tables:
        source = (
            f", source count {t.source_count} (difference {t.count_difference})" if t.source_count is not None else ""
        )
        print(
            f"{t.hive_table} dt={report.date}: {t.rows} rows from {t.base} ({t.base_rows}) + Delta v{t.delta_version} "
            f"({t.changed_keys} changed keys, {t.deletes_applied} deletes applied){source}"
        )
    at = f"landing {report.land_seq}"
    if report.transaction is not None:
        at = f"source transaction {report.transaction} (landing {report.land_seq})"
    print(f"snapshot {report.date} published as of {at} in {report.duration_s}s")
    if config.scan_pii.nightly:  # what it finds is alerted on by its own metric: the snapshot is published
        from cdc_delta.changelog.table_index import indexed_without_spark
        from cdc_delta.cli.scan_pii import scan_and_report

        scan_and_report(config, [t.name for t in indexed_without_spark(config).tables()])
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from cdc_delta.check.run import FAILED, run_check

    config = load_config(args.config)
    if args.history:
        return _check_history(config, args.table)
    with job_metrics(config, "check") as run:
        report = run.report = run_check(config, args.table)
        run.exit_code = EXIT_ATTENTION if report.failed else 0
    for table in report.tables:
        print(table.line())
    print(
        f"check: {len(report.tables)} table(s), {len(report.failed)} failing, in {report.duration_s}s",
        file=sys.stderr if report.failed else sys.stdout,
    )
    differ = [t for t in report.tables if t.status == FAILED]
    if args.repair and differ:
        return _repair(config, differ, len(report.failed))
    return run.exit_code


def _check_history(config: AppConfig, names: list[str] | None) -> int:
    """``check --history``: each history's current versions against its table's live rows, one line a table."""
    from cdc_delta.changelog.table_index import indexed
    from cdc_delta.history.check import check_history

    spark = spark_for(config)
    tables = [t for t in indexed(spark, config).tables() if not names or t.name in names]
    if names and len(tables) < len(set(names)):
        unknown = sorted(set(names) - {t.name for t in tables})
        raise CdcDeltaError(f"check --history: no table named {', '.join(unknown)} (cdc-delta tables lists them)")
    checks = check_history(spark, config, tables)
    for check in checks:
        print(check.line())
    differ = [c for c in checks if not c.ok]
    print(
        f"check --history: {len(checks)} table(s) with history, {len(differ)} differing from their table",
        file=sys.stderr if differ else sys.stdout,
    )
    return EXIT_ATTENTION if differ else 0


def _repair(config: AppConfig, differ: list[TableCheck], failing: int) -> int:
    """Re-snapshot the tables that differ, each over the key ranges where it does (the whole table where
    those are not known): one request per --where."""
    from cdc_delta.repair.run import check_request, resnapshot, targets

    by_where: dict[str | None, list[str]] = {}
    for table in differ:
        by_where.setdefault(table.repair_where, []).append(table.table)
    results = []
    with session_meanwhile(config) as spark:  # the signals go out while Spark starts, as resnapshot's do
        for where, names in by_where.items():
            over = f' --where "{where}"' if where else ""
            print(f"check: repairing {', '.join(names)} (cdc-delta resnapshot{over} --delete-missing)")
            chosen = targets(config, names, None)
            check_request(config, chosen, where, blocking=False)
            results += resnapshot(spark, config, chosen, where, blocking=False, delete_missing=True)
    for result in results:
        print(result.line())
    return EXIT_ATTENTION if any(r.needs_attention for r in results) or len(differ) < failing else 0


def cmd_live_tables(args: argparse.Namespace) -> int:
    from cdc_delta.views.live_tables import live_tables, register

    config = load_config(args.config)
    if not args.register:
        if not config.live_tables.enabled:
            logger.warning(
                "live_tables.enabled is off: the stream does not keep the manifests current; the DDL is for reference"
            )
        for live in live_tables(spark_for(config), config):
            print(f"-- {live.table}\n{live.table_ddl};\n{live.view_ddl};\n")
        return 0
    if not config.live_tables.enabled:
        raise CdcDeltaError(
            "live_tables.enabled is off: set it to true and restart the stream, which then keeps each table's "
            "symlink manifest current, before registering the live tables"
        )
    _print_registered(register(_hive_session(config), config))
    return 0


def cmd_fresh_views(args: argparse.Namespace) -> int:
    from cdc_delta.views import fresh

    config = load_config(args.config)
    if not args.register:
        print(f"{fresh.function_ddl(config)};\n")
        for view in fresh.fresh_views(spark_for(config), config):
            print(f"-- {view.table}\n{view.view_all_ddl};\n{view.view_ddl};\n")
        return 0
    if not config.fresh_views.enabled:
        logger.warning(
            "fresh_views.enabled is off: the hourly maintenance does not register these views again, so they read "
            "ever more of the changelog (up to maintenance.tombstone_retention_hours of it) and do not follow "
            "schema changes; turn it on to keep them current"
        )
    return EXIT_ATTENTION if _print_fresh(fresh.register(_hive_session(config), config)) else 0


def _print_fresh(views: list[FreshView]) -> int:
    """Print what was registered, and on stderr what was not; returns how many were not."""
    for view in views:
        if view.refused:
            print(f"{view.table}: no fresh view: {view.refused}", file=sys.stderr)
        else:
            since = f"changes past landing {view.after}, {view.schemas} schemas"
            print(f"{view.table}: views {view.view}, {view.view_all} ({since})")
    return sum(1 for view in views if view.refused)


def _print_registered(tables: list[LiveTable]) -> None:
    for live in tables:
        print(f"{live.table}: Hive table {live.hive_table}, view {live.view} ({live.action})")


def _hive_session(config: AppConfig) -> SparkSession:
    """A Spark session with the snapshot's metastore (Hive support), once the metastore answers."""
    from cdc_delta.metastore import check_metastore, metastore_conf
    from cdc_delta.spark_session import build_session

    check_metastore(config)
    return build_session(config.spark, metastore_conf(config))


def add_commands(sub: Any) -> None:
    """Register this module's commands on the top-level subparsers."""
    maintain = sub.add_parser(
        "maintain",
        help="hourly maintenance: OPTIMIZE, purge old tombstones, VACUUM, checkpoint (safe beside the stream)",
        description=(
            "OPTIMIZE, purge tombstones past maintenance.tombstone_retention_hours, VACUUM (when due: "
            "maintenance.vacuum_interval_hours) and checkpoint (where files were rewritten) every table, and "
            "apply the changelog's retention, beside the running stream; then, with fresh_views.enabled, register "
            "the fresh views again (a view that cannot be is logged and dropped). Exits "
            f"{EXIT_NOT_READY} without doing anything when another maintenance run holds the lock (it does the "
            "work), 2 on a bad config."
        ),
    )
    add_config_argument(maintain)
    maintain.add_argument(
        "--wait", type=float, default=0, help="seconds to wait for a running maintenance to finish (default: exit)"
    )
    maintain.set_defaults(func=cmd_maintain)

    snapshot = sub.add_parser(
        "snapshot",
        help="nightly: publish the Delta tables plus the stock export as Hive partition dt=DATE",
        description=(
            "Publish partition dt=DATE of <snapshot.database>.<table> for every snapshot table: the previous "
            "snapshot (or the stock export the first time) with the Delta table's changes up to the end of DATE: "
            "with Debezium's transaction metadata, up to the source's last transaction committed before it, in "
            "every table alike. "
            f"Exits {EXIT_NOT_READY} without touching anything when the stream has not passed the end of DATE on "
            "every Kafka partition yet (or another snapshot run is going): run it again later."
        ),
    )
    add_config_argument(snapshot)
    snapshot.add_argument("--date", help="the day to publish, YYYY-MM-DD (default: yesterday in snapshot.time_zone)")
    snapshot.add_argument(
        "--wait", type=float, help="minutes to wait for the stream to pass the cut-off (default: snapshot.wait_minutes)"
    )
    snapshot.add_argument(
        "--from-stock", action="store_true", help="start from the stock export instead of the previous snapshot"
    )
    snapshot.add_argument(
        "--at-landing",
        action="store_true",
        help="cut the tables at the landing that passed the cut-off, not at the source's last transaction "
        "before it (which readiness waits to land whole where transaction metadata lands): for a transaction "
        "held by a dead letter",
    )
    snapshot.add_argument(
        "--skip-kafka-check",
        action="store_true",
        help="judge readiness from the Delta commits alone, without asking Kafka (quiet partitions never pass)",
    )
    snapshot.set_defaults(func=cmd_snapshot)

    check = sub.add_parser(
        "check",
        help="source probes: compare each table's rows in the source database with Delta (exit 1 on a mismatch)",
        description=(
            "Per table: the source's row count, key range and newest key (one consistent snapshot, over "
            "source: host/port/user, password from source.password_env or password_file); after the stream has "
            "applied every record Kafka held source.check.settle_seconds later, Delta's rows in that key range "
            "that existed at the probe (live, or deleted by a later change) must equal the source's count, the "
            "newest key must be in Delta, and the newest row event of each partition applied. A table fails "
            "when source.check.attempts probes in a row disagree. Writes a JSON report; exit 0 all equal, "
            "1 a table failed or the stream is behind (one line each), 2 a bad config, 69 the source or Kafka cannot "
            "be reached (retry later)."
        ),
    )
    add_config_argument(check)
    check.add_argument("--table", action="append", help="only this logical table (repeatable); default: all")
    check.add_argument(
        "--history",
        action="store_true",
        help="instead of the source: each table's history (history: true) against the table, its current "
        "versions against the table's live rows (Spark; no source needed); exit 1 where one differs",
    )
    check.add_argument(
        "--repair",
        action="store_true",
        help="re-read each table that differs from the source (cdc-delta resnapshot --delete-missing), over the "
        "key ranges where it differs where the first key column is an integer; exit 0 when every one was repaired",
    )
    check.set_defaults(func=cmd_check)

    live = sub.add_parser(
        "live-tables",
        help="Hive tables over the live Delta tables for Presto/Trino/Athena: print their DDL, or --register them",
        description=(
            "Per replicated table db.name: the external table <live_tables.database>.<name>_all over the Delta "
            "table's symlink manifest (every row, soft-deleted included) and the view <live_tables.database>.<name> "
            "of its live rows. Without --register, print the DDL (to run in your own metastore); with it, create "
            "them in the snapshot's metastore, re-creating those whose Delta columns changed (the hourly "
            "maintenance does the same). Needs live_tables.enabled: the stream then has Delta rewrite each "
            "table's manifest after every commit."
        ),
    )
    add_config_argument(live)
    live.add_argument("--register", action="store_true", help="create or update them in the metastore")
    live.set_defaults(func=cmd_live_tables)

    fresh = sub.add_parser(
        "fresh-views",
        help="views in the metastore that show every Spark SQL reader the changes not merged yet: DDL, or --register",
        description=(
            "Per replicated table db.name: the view <fresh_views.database>.<db>_<name> of its live rows and "
            "<db>_<name>_all (soft-deleted rows kept), over the Delta table and the changelog, so that any Spark "
            "session with the snapshot's metastore sees a change within one trigger whatever the merge delay. A "
            "view reads the changelog up to the first change its text cannot type (a truncate, a schema the "
            "table did not have when it was made): from there it shows the table as merged, until it is registered "
            "again (the hourly maintenance does, with fresh_views.enabled). Without --register, print the DDL; with "
            "it, create the views and their function (cdc-delta's jar, fresh_views.function_jar) in the metastore; "
            "exit 1 when a table's view could not be registered (the reason on stderr; its views are dropped)."
        ),
    )
    add_config_argument(fresh)
    fresh.add_argument("--register", action="store_true", help="create or replace them in the metastore")
    fresh.set_defaults(func=cmd_fresh_views)
