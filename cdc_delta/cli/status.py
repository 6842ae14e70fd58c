"""``cdc-delta status``: where the stream is (lag per partition, the newest landing), where each table
is (merged, pending, merge lag, rows, stopped, silent or jumped against its history), the consistent
point of source transactions (:mod:`cdc_delta.consistency`), and the dead letters; as text or JSON, and
an exit code a supervisor or a probe can act on."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import time
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cdc_delta.cli.common import add_config_argument, dash
from cdc_delta.config import AppConfig, load_config
from cdc_delta.exceptions import EXIT_ATTENTION, EXIT_UNAVAILABLE, one_line

if TYPE_CHECKING:
    from cdc_delta.activity.judge import Verdict
    from cdc_delta.consistency.point import Consistency
    from cdc_delta.delta.status import TableStatus
    from cdc_delta.kafka.gaps import Gap
    from cdc_delta.kafka.offsets import PartitionLag
    from cdc_delta.lease import Holder


@dataclass(frozen=True)
class Status:
    lags: list[PartitionLag]
    landed: dict[tuple[str, int], int]
    newest_landing: int | None
    tables: list[TableStatus]
    dead_letters: int
    gaps: list[Gap] = dataclasses.field(default_factory=list)
    """Records Kafka deleted before the stream read them (where its consumer group stands)."""
    resnapshot_needed: dict[str, dt.datetime] = dataclasses.field(default_factory=dict)
    """Tables a gap accepted touched, with no re-snapshot since: when their last gap was accepted."""
    resnapshot_started: set[str] = dataclasses.field(default_factory=set)
    """Of those, the tables accept-gap had Debezium read again, for ``resnapshot`` to finish."""
    holders: dict[str, Holder | None] = dataclasses.field(default_factory=dict)
    """Who holds the lease of the stream and of the merger (:mod:`cdc_delta.lease`), alive or not."""
    kafka_unreachable: str | None = None
    """Why the brokers could not be asked (the lake's side is shown all the same); None when they were."""
    activity: dict[str, Verdict] = dataclasses.field(default_factory=dict)
    """Per table, its recent changes against its history (:mod:`cdc_delta.activity`; empty where off)."""
    activity_unreadable: str | None = None
    consistency: Consistency | None = None
    """The consistent point (:mod:`cdc_delta.consistency`); None where it could not be read."""
    consistency_unreadable: str | None = None

    @property
    def total_lag(self) -> int:
        return sum(lag.lag or 0 for lag in self.lags)

    def problems(self, max_lag: int | None, max_merge_lag_s: float | None) -> list[str]:
        """What needs attention, one line each."""
        out = []
        if self.kafka_unreachable is not None:
            out.append(f"kafka: {self.kafka_unreachable} (lag and gaps unknown; the lake's side is shown)")
        for gap in self.gaps:
            out.append(
                f"gap: {gap.range()} ({gap.records} records) deleted by Kafka before the stream read them: the "
                "stream stops there; with it stopped, cdc-delta accept-gap moves past it"
            )
        for table, since in sorted(self.resnapshot_needed.items()):
            started = " (accept-gap had it read again: this follows it until merged)"
            out.append(
                f"re-snapshot needed: {table}: changes of it were lost in a gap accepted {since:%Y-%m-%d %H:%M} UTC "
                f"(cdc-delta resnapshot --table {table} --delete-missing"
                f"{started if table in self.resnapshot_started else ''})"
            )
        for table, verdict in sorted(self.activity.items()):
            if verdict.flagged:
                out.append(f"{verdict.state}: {table}: {verdict.reason}")
        if max_lag is not None and self.total_lag > max_lag:
            out.append(f"lag {self.total_lag} events is over --max-lag {max_lag}")
        for st in self.tables:
            if st.stopped_reason is not None:
                out.append(f"stopped: {st.table}: {st.stopped_reason}")
            if st.unreadable is not None:
                out.append(f"unreadable: {st.table}: {st.unreadable}")
            behind = st.oldest_pending_s
            if max_merge_lag_s is not None and behind is not None and behind > max_merge_lag_s:
                out.append(f"merge lag: {st.table}: {behind:.0f}s is over --max-merge-lag {max_merge_lag_s:g}")
        return out


def read_status(config: AppConfig) -> Status:
    from cdc_delta.activity.read import verdicts
    from cdc_delta.changelog.status import landed_offsets, with_pending
    from cdc_delta.changelog.table_index import indexed_without_spark
    from cdc_delta.consistency.read import consistent_point
    from cdc_delta.delta import repair_log
    from cdc_delta.delta.status import dead_letter_count, table_status
    from cdc_delta.exceptions import KafkaUnavailable
    from cdc_delta.kafka.client import brokers
    from cdc_delta.kafka.gaps import gaps_at
    from cdc_delta.kafka.offsets import partition_lag
    from cdc_delta.lease import holder_of
    from cdc_delta.repair.started import unfinished

    kafka, unreachable = config.kafka, None
    try:
        lags = partition_lag(brokers(kafka), config.app_id, kafka.topics, kafka.topic_pattern)
    except KafkaUnavailable as exc:
        lags, unreachable = [], str(exc)
    newest, landed = landed_offsets(config)  # delta-rs reads the Delta logs: no Spark session to start
    tables = with_pending(config, table_status(config, indexed_without_spark(config).tables()))
    log = repair_log.entries(config)
    needed = repair_log.resnapshot_needed(log)
    started = set(unfinished(log)) & set(needed)
    holders: dict[str, Holder | None] = {role: holder_of(config, role) for role in ("stream", "merge")}
    activity, activity_unreadable = {}, None
    if config.activity.enabled:
        try:
            activity = verdicts(config, [t.table for t in tables])
        except Exception as exc:  # noqa: BLE001 (status shows the rest: the counts are a judgement, not the data)
            activity_unreadable = one_line(exc)
    consistency, consistency_unreadable = None, None
    try:
        consistency = consistent_point(config)
    except Exception as exc:  # noqa: BLE001 (status shows the rest)
        consistency_unreadable = one_line(exc)
    return Status(
        lags,
        landed,
        newest,
        tables,
        dead_letter_count(config),
        gaps_at(lags),
        needed,
        started,
        holders,
        unreachable,
        activity,
        activity_unreadable,
        consistency,
        consistency_unreadable,
    )


def lease_line(config: AppConfig, role: str, holder: Holder | None) -> str:
    """Whether the stream or the merger runs, and where: from its lease."""
    if holder is None:
        return f"{role}: not running (no lease held)"
    if holder.alive(config.storage.lease_timeout_seconds):
        return f"{role}: running: {holder.describe()}"
    return f"{role}: not running: the lease of {holder.describe()} was not released (taken over at the next start)"


def cmd_status(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    status = read_status(config)
    problems = status.problems(args.max_lag, args.max_merge_lag)
    if args.json:
        print(json.dumps(as_json(config, status, problems), indent=2, default=str))
    else:
        print_text(config, status, problems)
    if status.kafka_unreachable is not None:
        return EXIT_UNAVAILABLE
    return EXIT_ATTENTION if problems else 0


def as_json(config: AppConfig, status: Status, problems: list[str]) -> dict[str, Any]:
    return {
        "app_id": config.app_id,
        "kafka": {"reachable": status.kafka_unreachable is None, "error": status.kafka_unreachable},
        "partitions": [
            {
                "topic": lag.topic,
                "partition": lag.partition,
                "end": lag.end,
                "landed": status.landed.get((lag.topic, lag.partition)),
                "committed": lag.committed,
                "earliest": lag.earliest,
                "lag": lag.lag,
                "lost": lag.lost,
            }
            for lag in status.lags
        ],
        "total_lag": status.total_lag,
        "newest_landing": status.newest_landing,
        "tables": [dataclasses.asdict(st) for st in status.tables],
        "dead_letters": status.dead_letters,
        "resnapshot_needed": sorted(status.resnapshot_needed),
        "activity": {table: dataclasses.asdict(verdict) for table, verdict in sorted(status.activity.items())},
        "activity_unreadable": status.activity_unreadable,
        "consistent_point": _consistency_json(status),
        "leases": {
            role: None
            if holder is None
            else {**dataclasses.asdict(holder), "alive": holder.alive(config.storage.lease_timeout_seconds)}
            for role, holder in status.holders.items()
        },
        "problems": problems,
    }


def _consistency_json(status: Status) -> dict[str, Any]:
    found = status.consistency
    if found is None:
        return {"point": None, "unreadable": status.consistency_unreadable}
    return {
        "point": None if found.point is None else found.point.to_dict(),
        "trails_s": found.trails_s(),
        "transactions_after": found.ends_after,
        "waiting": None if found.waiting is None else found.waiting.line(),
        "unavailable": found.unavailable,
    }


def print_text(config: AppConfig, status: Status, problems: list[str]) -> None:
    print(f"{'topic':<40} {'part':>4} {'end':>10} {'landed':>10} {'group':>10} {'lag':>8}")
    for lag in status.lags:
        at = status.landed.get((lag.topic, lag.partition))
        print(
            f"{lag.topic:<40} {lag.partition:>4} {lag.end:>10} {dash(at):>10} {dash(lag.committed):>10} "
            f"{dash(lag.lag):>8}"
        )
    print(
        f"total lag: {status.total_lag} events over {len(status.lags)} partitions (consumer group "
        f"{config.app_id}; 'landed' is the next offset after the last one the changelog's recent landings "
        f"hold); newest landing: {dash(status.newest_landing)}\n"
    )
    now = time.time()
    print(
        f"{'table':<28} {'version':>7} {'last commit (UTC)':<20} {'freshness':>10} {'merged':>7} {'pending':>8} "
        f"{'merge lag':>9} {'rows':>10} {'deleted':>8}"
    )
    for st in status.tables:
        fresh = None if st.max_source_ts_ms is None else f"{now - st.max_source_ts_ms / 1000:.0f}s"
        when = None if st.last_commit is None else st.last_commit.strftime("%Y-%m-%d %H:%M:%S")
        behind = None if st.oldest_pending_s is None else f"{st.oldest_pending_s:.0f}s"
        print(
            f"{st.table:<28} {dash(st.version):>7} {dash(when):<20} {dash(fresh):>10} {dash(st.merged_seq):>7} "
            f"{st.pending:>8} {dash(behind):>9} {dash(st.rows):>10} {dash(st.deleted):>8}"
        )
    pending = [st for st in status.tables if st.pending]
    if pending:
        waiting = sum(st.pending for st in pending)
        oldest = max(st.oldest_pending_s or 0.0 for st in pending)
        print(
            f"merges: {waiting} changes pending in {len(pending)} tables, the oldest landed {oldest:.0f}s ago "
            f"(merge.max_delay_seconds {config.merge.max_delay_seconds:g}; the live views in `cdc-delta sql` "
            "include them)"
        )
    if status.activity:
        states = Counter(v.state for v in status.activity.values())
        print(
            "activity (each table's changes against the same hours of earlier days): "
            + ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
        )
    if status.activity_unreadable is not None:
        print(f"activity: not judged ({status.activity_unreadable})")
    if status.consistency is not None:
        print(status.consistency.line())
    elif status.consistency_unreadable is not None:
        print(f"consistent point: not read ({status.consistency_unreadable})")
    for role, holder in status.holders.items():
        if role == "stream" or holder is not None or not config.merge.in_stream:
            print(lease_line(config, role, holder))
    for line in problems:
        print(line)
    dead = status.dead_letters
    print(
        f"dead letters: {dead} records in {config.storage.dead_letters} not replayed (cdc-delta replay-dead-letters)"
        if dead
        else "dead letters: none to replay"
    )


def add_commands(sub: Any) -> None:
    """Register ``status`` on the top-level subparsers."""
    status = sub.add_parser(
        "status",
        help="lag per partition; per table merged, pending, merge lag, rows, stopped, silent; the consistent "
        "point; dead letters",
        description=(
            "Reads the broker (end and committed offsets) and the Delta logs (no Spark session). Exit codes: 0 "
            f"all well; {EXIT_ATTENTION} a table is stopped or unreadable, a gap in Kafka, a table needing a "
            "re-snapshot, a table silent or its change rate jumped against its own history (activity), or "
            "--max-lag / --max-merge-lag is passed "
            "(each reason printed); 2 the config is invalid; 69 the broker cannot be reached."
        ),
    )
    add_config_argument(status)
    status.add_argument("--json", action="store_true", help="print one JSON document instead of the tables")
    status.add_argument(
        "--max-lag", type=int, metavar="EVENTS", help=f"exit {EXIT_ATTENTION} when the total lag is over"
    )
    status.add_argument(
        "--max-merge-lag",
        type=float,
        metavar="SECONDS",
        help=f"exit {EXIT_ATTENTION} when a table's oldest pending change landed longer ago than this",
    )
    status.set_defaults(func=cmd_status)
