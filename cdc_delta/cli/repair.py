"""The resnapshot command: read tables from the source again through Debezium, ordered right against the
binlog, and wait until the rows read are merged."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from cdc_delta.cli.common import add_config_argument, leases, logger, session_meanwhile, spark_for
from cdc_delta.config import AppConfig, load_config
from cdc_delta.exceptions import EXIT_ATTENTION, RepairError

if TYPE_CHECKING:
    from cdc_delta.repair.run import Reread


def cmd_resnapshot(args: argparse.Namespace) -> int:
    from cdc_delta.repair.run import check_request, resnapshot, targets

    config = load_config(args.config)
    chosen = targets(config, args.table, args.connector)
    check_request(config, chosen, args.where, args.blocking)
    with session_meanwhile(config) as spark:  # the signal goes out while Spark starts
        results = resnapshot(spark, config, chosen, args.where, args.blocking, args.delete_missing)
    for result in results:
        print(result.line())
    return EXIT_ATTENTION if any(r.needs_attention for r in results) else 0


def cmd_accept_gap(args: argparse.Namespace) -> int:
    from cdc_delta.stream.accept_gap import accept_gap

    config = load_config(args.config)
    with leases(config, ["stream"], "accept-gap"):  # the stream holds the checkpoint this moves aside
        accepted = accept_gap(spark_for(config), config)
    if accepted is None:
        print("no gap: the stream reads nothing Kafka has deleted; nothing to accept")
        return 0
    for gap in accepted.gaps:
        print(f"accepted: {gap.range()}: {gap.records} records lost (recorded in the lake's repair log)")
    moved = f"checkpoint moved to {accepted.checkpoint_moved_to}; " if accepted.checkpoint_moved_to else ""
    print(f"{moved}consumer group {config.app_id} set past the gap: the stream starts there, under a new epoch")
    if not accepted.tables:
        return 0
    tables = " ".join(f"--table {t}" for t in accepted.tables)
    follow = f"cdc-delta resnapshot --config {args.config} {tables} --delete-missing"
    print(f"re-snapshot needed: {', '.join(accepted.tables)} (status says so until it is done); the stream may start")
    started = _start_resnapshot(config, accepted.tables)
    if started is None:
        print(f"start the stream, then {follow}")
        return 0
    for result in started:
        print(
            result.line() if result.problem else f"read again: {result.table}: {result.rows_read} rows read by Debezium"
        )
    print(f"start the stream (if it is not), then {follow}: it follows this re-snapshot until merged (no second read)")
    return EXIT_ATTENTION if any(r.problem for r in started) else 0


def _start_resnapshot(config: AppConfig, tables: list[str]) -> list[Reread] | None:
    """Have Debezium read the tables a gap fed again, where their connector takes signals; None (with the
    reason logged) where it cannot: then ``resnapshot`` does it all."""
    from cdc_delta.repair.run import check_request, start, targets

    try:
        chosen = targets(config, tables, None)
        check_request(config, chosen, None, blocking=False)
    except RepairError as exc:
        logger.warning("the re-snapshot is not started here: %s", exc)
        return None
    logger.info("accept-gap: having Debezium read %s again (the stream may run meanwhile)", ", ".join(tables))
    return start(lambda: spark_for(config), config, chosen)


def add_commands(sub: Any) -> None:
    """Register this module's commands on the top-level subparsers."""
    gap = sub.add_parser(
        "accept-gap",
        help="move the stream past records Kafka deleted before it read them (recorded; tables to re-snapshot)",
        description=(
            "When Kafka's retention deleted records the stream had not read, the stream stops at them (exit 2, "
            "naming the ranges and tables) and nothing is skipped. This command, run with the stream stopped, "
            "records the ranges in the lake's repair log, sets the stream's consumer group past them (and where "
            "the stream stood on every other partition), and moves the checkpoint aside: the next start goes on "
            "from there under a new epoch. The tables the lost records fed need a re-snapshot, which status names "
            "until it is done: where their connector takes signals, this command then has Debezium read them again "
            "(the stream may be started meanwhile), and cdc-delta resnapshot --table T --delete-missing follows that "
            "read until merged and names the rows the source lacks; elsewhere cdc-delta resnapshot does it all. "
            "Exit codes: 0 done or no gap, 1 moved past the gap but the re-snapshot failed (named), 2 refused, "
            "69 Kafka cannot be reached."
        ),
    )
    add_config_argument(gap)
    gap.set_defaults(func=cmd_accept_gap)

    parser = sub.add_parser(
        "resnapshot",
        help="read tables from the source again through Debezium (repair a table that drifted), wait until merged",
        description=(
            "Send Debezium's execute-snapshot signal for the tables (through the connector's Kafka signal topic, "
            "else its signal table), follow the snapshot on the connector's notification topic, and wait until the "
            "stream has landed and merged the rows it read. The rows read replace every older change of their "
            "keys and never a newer one, so the stream keeps running: values that drifted take the source's again, "
            "rows deleted or soft-deleted in the lake come back. Then the rows the lake holds live that the source "
            "no longer has are named, and soft-deleted with --delete-missing. The connector needs a signal channel "
            "and a notification topic (cdc-delta connectors apply adds them) and, for an incremental snapshot "
            "(the default), its signal table. Exit codes: 0 repaired, 1 a table not repaired or rows the source "
            "lacks left live (each named), 2 refused before anything was sent, 69 Kafka Connect or the source "
            "cannot be reached."
        ),
        epilog=(
            "examples:\n"
            "  cdc-delta resnapshot --config cdc.yaml --table inventory.orders\n"
            '  cdc-delta resnapshot --config cdc.yaml --table inventory.orders --where "id BETWEEN 1000 AND 2000"\n'
            "  cdc-delta resnapshot --config cdc.yaml --table inventory.customers --blocking --delete-missing"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_config_argument(parser)
    parser.add_argument("--table", action="append", required=True, help="a logical table (db.table); repeatable")
    parser.add_argument(
        "--where",
        help='read only the rows this SQL condition on the source table takes (MySQL syntax, e.g. "id > 1000")',
    )
    parser.add_argument(
        "--blocking",
        action="store_true",
        help="a blocking snapshot: the connector pauses the binlog while it reads (no signal table needed; "
        "changes wait meanwhile)",
    )
    parser.add_argument(
        "--delete-missing",
        action="store_true",
        help="soft-delete the rows the lake holds live that the snapshot shows the source no longer has",
    )
    parser.add_argument("--connector", help="the connector to signal, where several capture the table")
    parser.set_defaults(func=cmd_resnapshot)
