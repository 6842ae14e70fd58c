"""Commands that mend one table: replay its dead letters, resume it once stopped, rebuild it from the
changelog."""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from typing import Any

from cdc_delta.cli.common import add_config_argument, leases, spark_for, utc_time
from cdc_delta.config import load_config


def cmd_replay(args: argparse.Namespace) -> int:
    from cdc_delta.lease import Lease, LeaseHeld
    from cdc_delta.stream.replay import replay_dead_letters

    config = load_config(args.config)
    # The replay lands into the changelog, whose lander the stream is: a running stream is refused.
    with leases(config, ["stream"], "replay-dead-letters"), ExitStack() as merging:
        merge = True
        try:
            merging.enter_context(Lease(config, "merge", "replay-dead-letters"))
        except LeaseHeld:  # a merge job runs (merge.in_stream: false): it merges the landing
            merge = False
        result = replay_dead_letters(spark_for(config), config, args.table, args.since, merge=merge)
    landed = (
        "nothing landed" if result.land_seq is None else f"{result.landed} changes landed as landing {result.land_seq}"
    )
    print(
        f"replay: {result.rows_in} dead letters, {landed}, {result.dead_lettered} dead-lettered again, "
        f"{result.skipped} skipped"
    )
    failed = [t for t in result.merge.tables if t.error] if result.merge is not None else []
    if result.merge is not None:
        tables = len(result.merge.tables)
        print(f"merged: {tables} table(s), {result.merge.merged_events} changes pending in them (these among them)")
    elif result.land_seq is not None:
        print("not merged here: the merge job that runs merges them (cdc-delta status shows them pending until then)")
    for t in failed:
        print(f"not merged: {t.table}: {t.error}")
    return 0 if result.dead_lettered == 0 and not failed else 1


def cmd_resume_table(args: argparse.Namespace) -> int:
    from cdc_delta.merger import resume_table

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
    from cdc_delta.merger import rebuild_table

    config = load_config(args.config)
    print(rebuild_table(spark_for(config), config, args.table).summary())
    print("next: restart the stream if it is running (it keeps what it read of the table it replaced)")
    return 0


def add_commands(sub: Any) -> None:
    """Register this module's commands on the top-level subparsers."""
    replay = sub.add_parser(
        "replay-dead-letters",
        help="land the dead letters again (after fixing their cause) and merge them; with the stream stopped "
        "(it lands into the changelog, which the stream does); exits 1 if some still fail",
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
            "from the source again: cdc-delta resnapshot). Then restart the stream (or "
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
