"""The stream command: Kafka -> the changelog -> the Delta tables, until stopped or caught up."""

from __future__ import annotations

import argparse
import re
import sys
from typing import TYPE_CHECKING, Any, TextIO

from cdc_delta.cli.common import add_config_argument, logger, run_leased, spark_for
from cdc_delta.config import AppConfig, load_config
from cdc_delta.config.kafka import require_subscription
from cdc_delta.exceptions import EXIT_CONFIG
from cdc_delta.kafka.gaps import CONFIG_PLACEHOLDER, KafkaGap

if TYPE_CHECKING:
    from cdc_delta.lease import Role


def cmd_stream(args: argparse.Namespace) -> int:
    from cdc_delta.stream.query import GracefulStop

    config = load_config(args.config)
    require_subscription(config.kafka)
    stop = GracefulStop()
    stop.install()  # before the leases are taken: a stop meanwhile ends the command before the stream starts
    roles: list[Role] = ["stream", "merge"] if config.merge.in_stream else ["stream"]
    return run_leased(config, roles, "stream", stop.requested, lambda: _stream(args, config, stop))


def _stream(args: argparse.Namespace, config: AppConfig, stop: Any) -> int:
    from pyspark.errors import StreamingQueryException

    from cdc_delta.merger import merging_for
    from cdc_delta.stream.query import run_until_stopped, start_stream

    metrics, server = None, None
    if config.metrics.port is not None:
        from cdc_delta.metrics.server import MetricsServer
        from cdc_delta.metrics.stream import StreamMetrics

        metrics = StreamMetrics(config)
        server = MetricsServer(config, metrics.registry)  # takes the port now: in use fails before Spark starts
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
        if any(t.mask for t in config.tables):
            from cdc_delta.stream.masking_check import check_masking

            check_masking(config, args.config)
    elif any(t.mask for t in config.tables):
        logger.warning("kafka.raw_security: masked columns are checked in each batch, not at start")
    spark = spark_for(config)
    if stop.requested.is_set():
        print("cdc-delta: stopped on request before the stream started")
        return 0
    if metrics is not None:
        from cdc_delta.changelog.table_index import discovered

        metrics.tables_known(discovered(spark, config))
    merging = merging_for(spark, config, metrics)
    try:
        try:
            stream = start_stream(
                spark,
                config,
                listener=merging,
                available_now=args.until_caught_up,
                stop_requested=stop.requested,
                metrics=metrics,
            )
        except KafkaGap as refused:  # found at start, before Spark reads: named with this config
            raise KafkaGap(str(refused).replace(CONFIG_PLACEHOLDER, args.config)) from None
        if merging is not None:
            merging.start()
        if server is not None and metrics is not None:
            from cdc_delta.metrics.server import query_health

            query = stream.query
            server.start(lambda: query_health(config, metrics, query), lag_of=metrics)
        run_until_stopped(stream, stop, watch=watch)
        caught_up = args.until_caught_up and not stop.requested.is_set()
        if merging is not None:
            for result in merging.finish(merge_pending=caught_up):
                if metrics is not None:
                    metrics.round_done(result)
        if caught_up:
            return caught_up_exit(merging.stopped_tables() if merging is not None else {})
    except StreamingQueryException as exc:
        logger.debug("stream failed", exc_info=True)
        if DATA_LOSS in str(exc):  # a gap: never restarted blindly
            found = None if config.kafka.raw_security else kafka_gap(config, args.config)
            cause = f"Kafka no longer holds records the stream must read ({root_cause(str(exc))}); nothing was skipped"
            print(f"cdc-delta: error: {found or cause}", file=sys.stderr)
            return EXIT_CONFIG
        cause = root_cause(str(exc))
        print(
            f"cdc-delta: the stream failed: {cause}\n"
            "It resumes from its checkpoint when started again; run with -v for the full trace.",
            file=sys.stderr,
        )
        return exit_code_of_cause(cause)
    finally:
        if merging is not None:
            merging.close()
        if server is not None:
            server.close()
    return 0


DATA_LOSS = "KAFKA_DATA_LOSS"
"""The error class of Spark's Kafka source where offsets it must read are gone."""


def kafka_gap(config: AppConfig, config_path: str) -> str | None:
    """The gap the stream stopped at, described in one line (None: none found where the consumer group
    stands, the stream's position after its last batch)."""
    from cdc_delta.changelog.table_index import discovered_without_spark, tables_of_topics
    from cdc_delta.kafka.client import brokers
    from cdc_delta.kafka.gaps import describe, gaps_at
    from cdc_delta.kafka.offsets import partition_lag

    kafka = config.kafka
    gaps = gaps_at(partition_lag(brokers(kafka), config.app_id, list(kafka.topics), kafka.topic_pattern))
    if not gaps:
        return None
    tables = tables_of_topics(config, discovered_without_spark(config), sorted({g.topic for g in gaps}))
    return describe(gaps, tables, config_path)


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


def add_commands(sub: Any) -> None:
    """Register this module's commands on the top-level subparsers."""
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
