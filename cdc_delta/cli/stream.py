"""Commands of the stream and its tables: stream, replay-dead-letters, check-config, sql, resume, rebuild, merge."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import sys
from typing import TYPE_CHECKING, Any, TextIO

from cdc_delta.cli.common import add_config_argument, logger, spark_for
from cdc_delta.config import AppConfig, TableConfig, load_config
from cdc_delta.config.kafka import require_subscription
from cdc_delta.exceptions import ConfigError
from cdc_delta.metastore import register_delta_tables

if TYPE_CHECKING:
    from cdc_delta.merger.run import Merger
    from cdc_delta.metrics.merge import MergeMetrics
    from cdc_delta.stream.query import GracefulStop


def cmd_stream(args: argparse.Namespace) -> int:
    from pyspark.errors import StreamingQueryException

    from cdc_delta.stream.query import GracefulStop, run_until_stopped, start_stream

    config = load_config(args.config)
    require_subscription(config.kafka)
    metrics, server = None, None
    if config.metrics.port is not None:
        from cdc_delta.metrics.server import MetricsServer
        from cdc_delta.metrics.stream import StreamMetrics

        metrics = StreamMetrics(config)
        server = MetricsServer(config, metrics.registry)  # takes the port now: in use fails before Spark starts
    stop = GracefulStop()
    stop.install()
    kafka, watch = config.kafka, None
    if not kafka.raw_security:
        from cdc_delta.kafka.client import brokers
        from cdc_delta.kafka.offsets import check_reachable
        from cdc_delta.stream.broker_watch import BrokerWatch

        # Before Spark starts: its Kafka client would retry an unreachable broker for minutes, in traces.
        if not check_reachable(brokers(kafka), config.app_id, kafka.startup_timeout_seconds, stop.requested):
            print("cdc-delta: stopped on request before the stream started")
            return 0
        watch = BrokerWatch(brokers(kafka), config.app_id, kafka.unreachable_timeout_seconds, stop=stop.requested)
    spark = spark_for(config)
    if stop.requested.is_set():
        print("cdc-delta: stopped on request before the stream started")
        return 0
    if metrics is not None:
        from cdc_delta.changelog.table_index import discovered

        metrics.tables_known(discovered(spark, config))
    stream = start_stream(
        spark, config, available_now=args.until_caught_up, stop_requested=stop.requested, metrics=metrics
    )
    if server is not None and metrics is not None:
        from cdc_delta.metrics.server import query_health

        query = stream.query
        server.start(lambda: query_health(config, metrics, query), lag_of=metrics)
    try:
        run_until_stopped(stream, stop, watch=watch)
        caught_up = args.until_caught_up and not stop.requested.is_set()
        stream.finish(merge_pending=caught_up)
        if caught_up:
            return caught_up_exit(stream.stopped_tables())
    except StreamingQueryException as exc:
        logger.debug("stream failed", exc_info=True)
        cause = root_cause(str(exc))
        print(
            f"cdc-delta: the stream failed: {cause}\n"
            "It resumes from its checkpoint when started again; run with -v for the full trace.",
            file=sys.stderr,
        )
        return exit_code_of_cause(cause)
    finally:
        stream.close()
        if server is not None:
            server.close()
    return 0


def caught_up_exit(stopped: dict[str, str]) -> int:
    """The exit code of a run ``--until-caught-up``: 0 with every table merged, else
    :data:`~cdc_delta.exceptions.EXIT_ATTENTION`, each stopped table named with why (a job run on a
    schedule must not report success while a table's changes stay pending)."""
    from cdc_delta.exceptions import EXIT_ATTENTION

    if not stopped:
        return 0
    print_stopped(stopped, sys.stderr)
    print(
        f"cdc-delta: caught up but for {len(stopped)} stopped table(s), whose changes stay pending in the changelog: "
        "fix each cause, then `cdc-delta resume-table --table <name>` and run again",
        file=sys.stderr,
    )
    return EXIT_ATTENTION


def print_stopped(stopped: dict[str, str], out: TextIO) -> None:
    """One ``stopped: <table>: <why>`` line per stopped table, in name order."""
    for name, why in sorted(stopped.items()):
        print(f"stopped: {name}: {why}", file=out)


def root_cause(text: str) -> str:
    """The last ``SomeException: message`` line of a Spark error (or one of cdc-delta's exceptions),
    without the query plan dump."""
    head = text.split("=== Streaming Query ===")[0]
    pattern = r"\s*([\w.]+(Exception|Error)|cdc_delta\.exceptions\.\w+): "
    causes = [line.strip() for line in head.splitlines() if re.match(pattern, line)]
    return causes[-1] if causes else head.strip().splitlines()[0]


def exit_code_of_cause(cause: str) -> int:
    """A failed stream's exit code: :data:`EXIT_UNAVAILABLE` when its cause is a service out of reach
    (restart later), else :data:`EXIT_ATTENTION`."""
    from cdc_delta import exceptions

    named = re.match(r"cdc_delta\.exceptions\.(\w+): ", cause)
    kind = getattr(exceptions, named.group(1), None) if named else None
    if isinstance(kind, type) and issubclass(kind, exceptions.Unavailable):
        return exceptions.EXIT_UNAVAILABLE
    return exceptions.EXIT_ATTENTION


def utc_time(text: str) -> dt.datetime:
    """A time given on the command line, in UTC: naive means UTC, an offset is honoured."""
    try:
        when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace(" ", "T", 1))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time: write YYYY-MM-DD, YYYY-MM-DDTHH:MM (UTC) or YYYY-MM-DDTHH:MM+08:00"
        ) from None
    if when.tzinfo is None:
        return when.replace(tzinfo=dt.timezone.utc)
    return when.astimezone(dt.timezone.utc)


def cmd_replay(args: argparse.Namespace) -> int:
    from cdc_delta.stream.replay import replay_dead_letters

    config = load_config(args.config)
    result = replay_dead_letters(spark_for(config), config, args.table, args.since)
    failed = [t for t in (result.merge.tables if result.merge is not None else ()) if t.error]
    print(
        f"replay: {result.rows_in} dead letters, {result.landed - sum(t.events for t in failed)} applied, "
        f"{result.dead_lettered} dead-lettered again, {result.skipped} skipped"
    )
    for t in failed:
        print(f"not applied: {t.table}: {t.error}")
    return 0 if result.dead_lettered == 0 and not failed else 1


def cmd_resume_table(args: argparse.Namespace) -> int:
    from cdc_delta.merger.resume import resume_table

    config = load_config(args.config)
    done = resume_table(spark_for(config), config, args.table)
    for line in done:
        print(line)
    if not done:
        print(f"table {args.table} is not stopped: nothing to do")
        return 0
    print(
        "next: restart the stream (it reads a table's state once; or `cdc-delta merge` where the merger runs apart): "
        "it merges the changes that stayed pending in the changelog while the table was stopped"
    )
    return 0


def cmd_rebuild(args: argparse.Namespace) -> int:
    from cdc_delta.merger.rebuild import rebuild_table

    config = load_config(args.config)
    print(rebuild_table(spark_for(config), config, args.table).summary())
    print("next: restart the stream if it is running (it keeps what it read of the table it replaced)")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from cdc_delta.merger.run import Merger
    from cdc_delta.stream.query import GracefulStop

    config = load_config(args.config)
    hazard = config.second_writer_hazard()
    if hazard:
        logger.warning("merge: %s", hazard)
    metrics, server = None, None
    if config.metrics.port is not None:
        from prometheus_client import CollectorRegistry

        from cdc_delta.metrics.merge import MergeMetrics
        from cdc_delta.metrics.server import MetricsServer

        metrics = MergeMetrics(CollectorRegistry())
        metrics.tables_known([t.name for t in config.listed_tables])
        server = MetricsServer(config, metrics.registry)  # takes the port now: in use fails before Spark starts
    try:
        stop = GracefulStop("merge round", hand_back=True)
        stop.install()
        merger = Merger(spark_for(config), config)
        try:
            if server is not None and metrics is not None:
                from cdc_delta.metrics.server import merger_health

                watched = metrics
                server.start(lambda: merger_health(config, watched))
            caught_up = _merge_until_stopped(config, merger, stop, metrics, args.until_caught_up)
        finally:
            merger.close()
    finally:
        if server is not None:
            server.close()
    if caught_up:
        return caught_up_exit(merger.applier.stopped_tables())
    print_stopped(merger.applier.stopped_tables(), sys.stdout)
    return 0


def _merge_until_stopped(
    config: AppConfig, merger: Merger, stop: GracefulStop, metrics: MergeMetrics | None, until_caught_up: bool
) -> bool:
    """Merge the tables as they become due (``until_caught_up``: every table with changes pending now,
    round after round, until none is left but in stopped tables) until a stop is requested, after the
    round under way. Returns whether it caught up; the job's one line at the end says how many rounds
    merged how many changes."""
    import time

    started, rounds, changes = time.monotonic(), 0, 0
    if not until_caught_up:
        logger.info("merger %s started: every table due by merge.min_events / merge.max_delay_seconds", config.app_id)
    while not stop.requested.is_set():
        if metrics is not None:
            metrics.round_begins()  # a poll (the first reads the changelog whole) counts as the round's
        if not until_caught_up:
            merger.poll()
        result = merger.round(every=until_caught_up)
        if metrics is not None:
            metrics.round_done(result)  # a round's result holds what it left pending
            metrics.landing_known(merger.schedule.newest_seq)
            if result is None:  # no round: what is pending now (landings polled, the lag growing)
                metrics.pending_now(merger.schedule.pending())
        if result is not None:
            logger.info("%s", result.summary())
            rounds += 1
            changes += result.merged_events
            continue
        if until_caught_up:
            break
        wait = merger.schedule.next_due_in(time.time(), merger.stopped_tables())
        stop.requested.wait(timeout=5.0 if wait is None else min(5.0, max(0.5, wait)))
    caught_up = until_caught_up and not stop.requested.is_set()
    logger.info(
        "merger %s %s: %d rounds merged %d changes in %.0fs",
        config.app_id,
        "caught up" if caught_up else "stopped on request",
        rounds,
        changes,
        time.monotonic() - started,
    )
    return caught_up


def cmd_check_config(args: argparse.Namespace) -> int:
    # Every password_env must be set here (a job fails only where it needs that password, later).
    config = load_config(args.config, env=os.environ)
    for table in config.tables:
        made = f" (a table per source table of {_route(table)})" if table.is_pattern else ""
        key = table.key or "from each table's records (Debezium's record key)"
        print(f"{table.name}: key {key} -> {config.storage.table_path(table)}{made}")
    if config.patterns and config.kafka.topics:
        print(
            "note: the pattern entries see only the topics kafka.topics lists; subscribe with kafka.topic_pattern "
            "for the tables created later to be read"
        )
    try:
        require_subscription(config.kafka)
    except ConfigError as exc:
        print(f"note: {exc}: `cdc-delta stream` refuses it, the other jobs run")
    print(f"dead letters -> {config.storage.dead_letters}")
    m = config.merge
    print(f"changelog -> {config.changelog.located(config.storage.root)} (kept {config.changelog.retention_hours:g} h)")
    where = "in the stream's process" if m.in_stream else "by `cdc-delta merge` (merge.in_stream: false)"
    when = (
        "after every batch"
        if m.max_delay_seconds == 0
        else f"at {m.min_events} pending changes or after {m.max_delay_seconds:g} s"
    )
    print(f"merges: each table {when}, {m.concurrency} at a time, {where}")
    from cdc_delta.check.lake import lake_problems

    problems = lake_problems(config)
    if problems:
        header = f"invalid configuration in {args.config}, against the lake:"
        raise ConfigError("\n".join([header, *(f"  - {p}" for p in problems)]))
    print(f"config {args.config} is valid")
    return _discover(config) if args.discover else 0


def _discover(config: AppConfig) -> int:
    """Print what each topic of the subscription becomes; 1 when some would go to the dead letters."""
    from cdc_delta.changelog.table_index import discovered_without_spark
    from cdc_delta.check.topics import plan_topics, summary
    from cdc_delta.exceptions import EXIT_ATTENTION
    from cdc_delta.kafka.client import brokers
    from cdc_delta.kafka.offsets import partition_lag

    kafka = config.kafka
    topics = {lag.topic for lag in partition_lag(brokers(kafka), config.app_id, kafka.topics, kafka.topic_pattern)}
    plans = plan_topics(config, topics, discovered_without_spark(config))
    for plan in plans:
        print(f"  {plan.line()}")
    print(summary(plans))
    return EXIT_ATTENTION if any(p.refused for p in plans) else 0


def _route(table: TableConfig) -> str:
    parts = [
        ("topics", table.topic_pattern),
        ("source db", table.source_database),
        ("source table", table.source_table),
    ]
    return ", ".join(f"{what} {regex!r}" for what, regex in parts if regex)


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
    config = indexed(spark, config)
    tables = config.all_tables()
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
    check = sub.add_parser(
        "check-config",
        help="validate a config file",
        description="Validate a config file and print what it resolves to: each table's key and path, the "
        "changelog, the merge schedule. Exit 2 listing every problem.",
    )
    add_config_argument(check)
    check.add_argument(
        "--discover",
        action="store_true",
        help="also ask Kafka for the subscribed topics and print the table each feeds (listed, or made by a "
        "pattern entry, with its key) or why its records would go to the dead letters; exit 1 if any would",
    )
    check.set_defaults(func=cmd_check_config)

    stream = sub.add_parser(
        "stream",
        help="run the streaming application (Kafka -> Delta) until stopped",
        description=(
            "Run the stream until SIGTERM/SIGINT (the running batch finishes; a second signal stops at once). "
            "With metrics.port set it serves Prometheus metrics on /metrics and a probe on /healthz "
            "(503 once the query has ended or no batch finished for metrics.unhealthy_after_seconds while "
            "records wait). Exit codes: 0 stopped or caught up, 1 the stream failed (it resumes from its "
            "checkpoint), 2 bad config, refused credentials or metrics port in use (fix first), 69 the broker "
            "or the schema registry cannot be reached (restart later)."
        ),
    )
    add_config_argument(stream)
    stream.add_argument(
        "--until-caught-up",
        action="store_true",
        help="process what is in Kafka now, merge every table, then exit (Spark's availableNow trigger); exit 1 "
        "naming each table found stopped, its changes left pending",
    )
    stream.set_defaults(func=cmd_stream)

    replay = sub.add_parser(
        "replay-dead-letters",
        help="re-apply dead letters (after fixing a stopped table); exits 1 if some still fail",
    )
    add_config_argument(replay)
    replay.add_argument("--table", help="only the dead letters of this logical table (db.table)")
    replay.add_argument(
        "--since",
        type=utc_time,
        help="only those dead-lettered at or after this time: YYYY-MM-DD[THH:MM[:SS]], UTC unless it ends "
        "with an offset (+08:00) or Z",
    )
    replay.set_defaults(func=cmd_replay)

    resume = sub.add_parser(
        "resume-table",
        help="resume a stopped table once its cause is fixed (then restart the stream: it merges what is pending)",
        description=(
            "Clear a table's stopped flag (cdc_delta.stopped), and where the table was deleted or replaced under "
            "the stream, accept what is at its path now: the replacement, or none (the merger then creates the "
            "table anew from the changes the changelog still holds, changelog.retention_hours: read the table "
            "from the source again, with Debezium's execute-snapshot signal). Then restart the stream (or "
            "cdc-delta merge): the table's changes that stayed pending in the changelog are merged."
        ),
    )
    add_config_argument(resume)
    resume.add_argument("--table", required=True, help="the logical table (db.table)")
    resume.set_defaults(func=cmd_resume_table)

    rebuild = sub.add_parser(
        "rebuild",
        help="rebuild a table from the changelog, without Kafka (while the changelog holds all its changes)",
        description=(
            "Merge every change the changelog holds for the table into a new Delta table, which takes the "
            "table's place; the table it replaces is moved beside it (<path>.replaced-<time>). Refused, in one "
            "line, once the changelog's retention (changelog.retention_hours) may have deleted changes of the "
            "table: read it from the source again then. Best run with the stream stopped; a running stream "
            "stops the table as replaced under it (cdc-delta resume-table --table T accepts the rebuilt one). "
            "Exit codes: 0 rebuilt, 2 refused (nothing changed)."
        ),
    )
    add_config_argument(rebuild)
    rebuild.add_argument("--table", required=True, help="the logical table (db.table)")
    rebuild.set_defaults(func=cmd_rebuild)

    merge = sub.add_parser(
        "merge",
        help="run the merger alone: MERGE each table's pending changelog changes on its schedule",
        description=(
            "The merger, apart from the stream (merge.in_stream: false; a second job on a cluster): it learns of "
            "landings from the changelog and merges each table once merge.min_events changes are pending or "
            "the oldest is merge.max_delay_seconds old, most overdue first. SIGTERM/SIGINT stop it after the "
            "running round (a second one: at once, after the MERGEs running). With metrics.port set it serves "
            "/metrics (per table the landing it holds, pending changes, merge lag, stopped) and /healthz (503 "
            "once a round has run for metrics.unhealthy_after_seconds). Never run it beside a stream that "
            "merges too (merge.in_stream: true)."
        ),
    )
    add_config_argument(merge)
    merge.add_argument(
        "--until-caught-up",
        action="store_true",
        help="merge every change pending now, then exit; exit 1 naming each table found stopped, its changes pending",
    )
    merge.set_defaults(func=cmd_merge)

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
