"""The merge command: the merger as a job of its own (``merge.in_stream: false``)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from cdc_delta.cli.common import add_config_argument, logger, run_leased, spark_for
from cdc_delta.cli.stream import caught_up_exit, print_stopped
from cdc_delta.config import AppConfig, load_config

if TYPE_CHECKING:
    from cdc_delta.merger import Merger
    from cdc_delta.merger.results import RoundResult
    from cdc_delta.metrics.merge import MergeMetrics
    from cdc_delta.stream.query import GracefulStop


class _JobMetrics:
    """The merge series of a merger apart from the stream: besides each round, the newest landing it
    learnt of, and what is pending where no round ran (landings polled, the lag growing)."""

    def __init__(self, metrics: MergeMetrics, merger: Merger) -> None:
        self.metrics = metrics
        self.merger = merger

    def round_begins(self) -> None:
        self.metrics.round_begins()  # a poll (the first reads the changelog whole) counts as the round's

    def round_done(self, result: RoundResult | None) -> None:
        self.metrics.round_done(result)  # a round's result holds what it left pending
        self.metrics.landing_known(self.merger.schedule.newest_seq)
        if result is None:
            self.metrics.pending_now(self.merger.schedule.pending())


def cmd_merge(args: argparse.Namespace) -> int:
    from cdc_delta.stream.query import GracefulStop

    config = load_config(args.config)
    stop = GracefulStop("merge round", hand_back=True)
    return run_leased(config, ["merge"], "merge", stop.requested, lambda: _merge(args, config, stop))


def _merge(args: argparse.Namespace, config: AppConfig, stop: GracefulStop) -> int:
    from cdc_delta.merger import Merger

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
        stop.install()
        merger = Merger(spark_for(config), config)
        try:
            if server is not None and metrics is not None:
                from cdc_delta.metrics.server import merger_health

                watched = metrics
                server.start(lambda: merger_health(config, watched))
            if not args.until_caught_up:
                logger.info(
                    "merger %s started: every table due by merge.min_events / merge.max_delay_seconds", config.app_id
                )
            observer = _JobMetrics(metrics, merger) if metrics is not None else None
            rounds = merger.run_until(
                stop.requested, every=args.until_caught_up, poll=not args.until_caught_up, observer=observer
            )
            logger.info(
                "merger %s %s: %d rounds merged %d changes in %.0fs",
                config.app_id,
                "caught up" if rounds.caught_up else "stopped on request",
                len(rounds.results),
                rounds.merged_events,
                rounds.seconds,
            )
        finally:
            merger.close()
    finally:
        if server is not None:
            server.close()
    if rounds.caught_up:
        return caught_up_exit(merger.applier.stopped_tables())
    print_stopped(merger.applier.stopped_tables(), sys.stdout)
    return 0


def add_commands(sub: Any) -> None:
    """Register this module's commands on the top-level subparsers."""
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
