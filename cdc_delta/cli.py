"""The ``cdc-delta`` command line."""

from __future__ import annotations

import argparse
import logging
import re
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
  cdc-delta snapshot --config cdc.yaml        publish yesterday's Hive partition (nightly)
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


def cmd_stream(args: argparse.Namespace) -> int:
    from pyspark.errors import StreamingQueryException

    from cdc_delta.stream import GracefulStop, run_until_stopped, start_stream

    config = load_config(args.config)
    stop = GracefulStop()
    stop.install()
    spark = _spark(config)
    query = start_stream(spark, config, available_now=args.until_caught_up, stop_requested=stop.requested)
    try:
        run_until_stopped(query, stop)
    except StreamingQueryException as exc:
        logger.debug("stream failed", exc_info=True)
        print(
            f"cdc-delta: the stream failed: {root_cause(str(exc))}\n"
            "It resumes from its checkpoint when started again; run with -v for the full trace.",
            file=sys.stderr,
        )
        return 1
    return 0


def root_cause(text: str) -> str:
    """The last ``SomeException: message`` line of a Spark error, without the query plan dump."""
    head = text.split("=== Streaming Query ===")[0]
    causes = [line.strip() for line in head.splitlines() if re.match(r"\s*[\w.]+(Exception|Error): ", line)]
    return causes[-1] if causes else head.strip().splitlines()[0]


def _dash(value: object) -> str:
    return "-" if value is None else str(value)


def cmd_status(args: argparse.Namespace) -> int:
    import time

    from cdc_delta.kafka_offsets import partition_lag
    from cdc_delta.table_status import dead_letter_count, delta_positions, table_status

    config = load_config(args.config)
    kafka = config.kafka
    lags = partition_lag(kafka.bootstrap_servers, config.app_id, kafka.topics, kafka.topic_pattern)
    spark = _spark(config)
    tables = table_status(spark, config)
    in_delta = delta_positions(tables)
    print(f"{'topic':<40} {'part':>4} {'end':>10} {'in Delta':>10} {'group':>10} {'lag':>8}")
    for lag in lags:
        delta = in_delta.get((lag.topic, lag.partition))
        print(
            f"{lag.topic:<40} {lag.partition:>4} {lag.end:>10} {_dash(delta):>10} {_dash(lag.committed):>10} "
            f"{_dash(lag.lag):>8}"
        )
    total = sum(lag.lag or 0 for lag in lags)
    print(
        f"total lag: {total} events over {len(lags)} partitions (consumer group {config.app_id}; "
        "'in Delta' is the next offset after the last one a table commit recorded)\n"
    )
    now = time.time()
    print(f"{'table':<28} {'version':>7} {'last commit (UTC)':<20} {'freshness':>10} {'rows':>10} {'deleted':>8}")
    for st in tables:
        fresh = None if st.max_source_ts_ms is None else f"{now - st.max_source_ts_ms / 1000:.0f}s"
        when = None if st.last_commit is None else st.last_commit.strftime("%Y-%m-%d %H:%M:%S")
        print(
            f"{st.table:<28} {_dash(st.version):>7} {_dash(when):<20} {_dash(fresh):>10} "
            f"{_dash(st.rows):>10} {_dash(st.deleted):>8}"
        )
    dead = dead_letter_count(spark, config)
    print(f"dead letters: {dead} records in {config.storage.dead_letters}" if dead else "dead letters: none")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from cdc_delta.demo import DEMO_TABLES
    from cdc_delta.generator import Change, ChangeGenerator, topic_of
    from cdc_delta.producer import ensure_topics, produce

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


def cmd_replay(args: argparse.Namespace) -> int:
    import datetime as dt

    from cdc_delta.replay import replay_dead_letters

    config = load_config(args.config)
    since = dt.datetime.fromisoformat(args.since).replace(tzinfo=dt.timezone.utc) if args.since else None
    result = replay_dead_letters(_spark(config), config, args.table, since)
    print(
        f"replay: {result.rows_in} dead letters, {result.applied} applied, "
        f"{result.dead_lettered} dead-lettered again, {result.skipped} skipped"
    )
    return 0 if result.dead_lettered == 0 else 1


def cmd_maintain(args: argparse.Namespace) -> int:
    from cdc_delta.lock import LockHeld
    from cdc_delta.maintenance import run_maintenance

    config = load_config(args.config)
    try:
        report = run_maintenance(_spark(config), config, wait_s=args.wait)
    except LockHeld as exc:  # an overlapping scheduled run is not a failure: the running one does the work
        print(f"cdc-delta maintain: {exc}")
        return 0
    for t in report.tables:
        if t.skipped:
            print(f"{t.table}: skipped ({t.skipped})")
        else:
            print(
                f"{t.table}: files {t.files_before} -> {t.files_after}, bytes {t.bytes_before} -> {t.bytes_after}, "
                f"{t.rows_purged} tombstones purged, {t.files_vacuumed} files vacuumed, "
                f"checkpoint at version {t.checkpoint_version}, {t.duration_s}s"
            )
    print(f"maintenance done in {report.duration_s}s")
    return 0


EXIT_NOT_READY = 75
"""EX_TEMPFAIL: the snapshot's input is not complete yet (or another run holds the lock); retry later."""


def cmd_snapshot(args: argparse.Namespace) -> int:
    import datetime as dt
    import zoneinfo

    from cdc_delta.exceptions import NotReady
    from cdc_delta.hive_publish import metastore_conf
    from cdc_delta.lock import LockHeld
    from cdc_delta.snapshot import kafka_positions_of, run_snapshot
    from cdc_delta.spark_session import build_session

    config = load_config(args.config)
    if args.date:
        try:
            day = dt.date.fromisoformat(args.date)
        except ValueError:
            raise CdcDeltaError(f"--date {args.date!r} is not a date: use YYYY-MM-DD, e.g. 2026-03-01") from None
    else:
        day = dt.datetime.now(zoneinfo.ZoneInfo(config.snapshot.time_zone)).date() - dt.timedelta(days=1)
    positions = (lambda: None) if args.skip_kafka_check else kafka_positions_of(config)
    spark = build_session(config.spark, metastore_conf(config))
    try:
        report = run_snapshot(spark, config, day, positions, from_stock=args.from_stock, wait_minutes=args.wait)
    except (NotReady, LockHeld) as exc:
        print(f"cdc-delta snapshot: {exc}", file=sys.stderr)
        return EXIT_NOT_READY
    for t in report.tables:
        source = (
            f", source count {t.source_count} (difference {t.count_difference})" if t.source_count is not None else ""
        )
        print(
            f"{t.hive_table} dt={report.date}: {t.rows} rows from {t.base} ({t.base_rows}) + Delta v{t.delta_version} "
            f"({t.changed_keys} changed keys, {t.deletes_applied} deletes applied){source}"
        )
    print(f"snapshot {report.date} published at stream batch {report.batch_id} in {report.duration_s}s")
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

    stream = sub.add_parser("stream", help="run the streaming application (Kafka -> Delta) until stopped")
    stream.add_argument("--config", required=True, help="path to the YAML config")
    stream.add_argument(
        "--until-caught-up",
        action="store_true",
        help="process what is in Kafka now, then exit (Spark's availableNow trigger)",
    )
    stream.set_defaults(func=cmd_stream)

    status = sub.add_parser("status", help="lag per partition, freshness and last commit per table, dead letters")
    status.add_argument("--config", required=True, help="path to the YAML config")
    status.set_defaults(func=cmd_status)

    gen = sub.add_parser("generate", help="write generated Debezium change events (demo tables) to Kafka")
    gen.add_argument("--bootstrap", default="127.0.0.1:9092", help="Kafka bootstrap servers")
    gen.add_argument("--events", type=int, default=5000, help="changes to generate (default 5000)")
    gen.add_argument("--rate", type=float, help="events per second (default: as fast as possible)")
    gen.add_argument("--partitions", type=int, default=3, help="partitions of topics it creates (default 3)")
    gen.add_argument("--seed", type=int, default=42, help="random seed: the same seed, the same changes")
    gen.add_argument("--bad", type=int, default=0, help="undecodable records to add (they go to the dead letters)")
    gen.set_defaults(func=cmd_generate)

    maintain = sub.add_parser(
        "maintain",
        help="hourly maintenance: OPTIMIZE, purge old tombstones, VACUUM, checkpoint (safe beside the stream)",
    )
    maintain.add_argument("--config", required=True, help="path to the YAML config")
    maintain.add_argument(
        "--wait", type=float, default=0, help="seconds to wait for a running maintenance to finish (default: exit)"
    )
    maintain.set_defaults(func=cmd_maintain)

    snapshot = sub.add_parser(
        "snapshot",
        help="nightly: publish the Delta tables plus the stock export as Hive partition dt=DATE",
        description=(
            "Publish partition dt=DATE of <snapshot.database>.<table> for every snapshot table: the previous "
            "snapshot (or the stock export the first time) with the Delta table's changes up to the end of DATE. "
            f"Exits {EXIT_NOT_READY} without touching anything when the stream has not passed the end of DATE on "
            "every Kafka partition yet (or another snapshot run is going): run it again later."
        ),
    )
    snapshot.add_argument("--config", required=True, help="path to the YAML config")
    snapshot.add_argument("--date", help="the day to publish, YYYY-MM-DD (default: yesterday in snapshot.time_zone)")
    snapshot.add_argument(
        "--wait", type=float, help="minutes to wait for the stream to pass the cut-off (default: snapshot.wait_minutes)"
    )
    snapshot.add_argument(
        "--from-stock", action="store_true", help="start from the stock export instead of the previous snapshot"
    )
    snapshot.add_argument(
        "--skip-kafka-check",
        action="store_true",
        help="judge readiness from the Delta commits alone, without asking Kafka (quiet partitions never pass)",
    )
    snapshot.set_defaults(func=cmd_snapshot)

    replay = sub.add_parser(
        "replay-dead-letters",
        help="re-apply dead letters (after fixing a stopped table); exits 1 if some still fail",
    )
    replay.add_argument("--config", required=True, help="path to the YAML config")
    replay.add_argument("--table", help="only the dead letters of this logical table (db.table)")
    replay.add_argument("--since", help="only those dead-lettered at or after this UTC time (YYYY-MM-DDTHH:MM)")
    replay.set_defaults(func=cmd_replay)

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
