"""``cdc-delta resnapshot``: have Debezium read tables from the source again, beside the binlog, and follow
it until the rows it read are merged.

Debezium's reads of an incremental or blocking snapshot are ordered at the binlog position where they
were read (:func:`cdc_delta.events.ordering.placed_read`): each replaces every older change of its key
and never a newer one, so a row that drifted in the lake takes the source's values again, a row
soft-deleted by mistake comes back, and a row the lake lost is there again, while the stream goes on.
What the source no longer has is named after (:mod:`.missing`), and soft-deleted with ``--delete-missing``.

Bad input is refused before anything is sent: an unknown table, a connector without a signal channel or
without watermarks for an incremental snapshot, a ``--where`` the source (or, for the missing keys,
Spark) cannot read, a source table without a primary key (incremental snapshots need one).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from cdc_delta import source_db
from cdc_delta.catalog import TableCatalog
from cdc_delta.changelog.status import wait_merged
from cdc_delta.changelog.table_index import Made, discovered_without_spark, knowing
from cdc_delta.config import AppConfig, KeyNotKnown, TableConfig
from cdc_delta.connect.client import ConnectClient
from cdc_delta.connect.http import ConnectHttp
from cdc_delta.delta import repair_log
from cdc_delta.events.ordering import Seq
from cdc_delta.exceptions import RepairError
from cdc_delta.kafka.applied import Partition, end_offsets, wait_applied
from cdc_delta.repair import missing, signals
from cdc_delta.repair.connector import SignalRoute, connector_for
from cdc_delta.repair.notifications import BLOCKING, ENDS, INCREMENTAL, Notification, Notifications
from cdc_delta.repair.placed import reads_placed
from cdc_delta.repair.started import StartedRead, unfinished

logger = logging.getLogger(__name__)

READ = ("SUCCEEDED", "EMPTY")
"""A table scan's statuses after which the table's rows were read (an empty table too)."""
SHOWN_KEYS = 20
"""Missing keys a table's result names (all are counted)."""
PROGRESS_EVERY_S = 10.0


@dataclass(frozen=True)
class Target:
    """One table to read again, where it comes from, and through which connector."""

    table: TableConfig
    source: str
    """The source table, ``db.table``."""
    topics: list[str]
    route: SignalRoute


@dataclass
class Reread:
    """What a re-snapshot did to one table."""

    table: str
    source: str
    rows_read: int | None = None
    status: str = ""
    """Debezium's status of the table's scan (SUCCEEDED, EMPTY, NO_PRIMARY_KEY, ...)."""
    signal_id: str = ""
    missing: int = 0
    missing_keys: list[tuple[object, ...]] = field(default_factory=list)
    deleted: int = 0
    problem: str | None = None

    def line(self) -> str:
        if self.problem:
            return f"FAILED   {self.table}: {self.problem}"
        read = f"{self.rows_read} rows read from {self.source}" if self.rows_read is not None else f"{self.source}"
        if not self.missing:
            return f"repaired {self.table}: {read} and merged; no row the source lacks"
        keys = ", ".join(str(list(k)) for k in self.missing_keys[:SHOWN_KEYS])
        more = f" and {self.missing - SHOWN_KEYS} more" if self.missing > SHOWN_KEYS else ""
        if self.deleted:
            return (
                f"repaired {self.table}: {read} and merged; soft-deleted {self.deleted} row(s) the source lacks: "
                f"{keys}{more}"
            )
        return (
            f"repaired {self.table}: {read} and merged; {self.missing} row(s) live in the lake that the source lacks "
            f"(keys {keys}{more}): run again with --delete-missing to soft-delete them"
        )

    @property
    def needs_attention(self) -> bool:
        return self.problem is not None or self.missing > self.deleted


def targets(config: AppConfig, names: list[str], connector: str | None) -> list[Target]:
    """The tables as the connectors on the worker capture them, or :class:`RepairError` naming the fix."""
    made = discovered_without_spark(config)
    catalog = knowing(config, made)
    client = ConnectClient(ConnectHttp(config.connect))
    configs = {name: client.config(name) or {} for name in ([connector] if connector else client.connectors())}
    if connector and not configs[connector]:
        raise RepairError(f"no connector {connector!r} on {config.connect.url}")
    out = []
    for name in names:
        try:
            table = catalog.table(name)
        except KeyNotKnown:  # a table the stream has not landed yet (added to the capture later): read it whole
            table = config.entry(name).made(name)
        source, topics = _source(catalog, table, made)
        chosen = connector or connector_for(configs, source, topics, config.connect.url)
        out.append(Target(table, source, topics, SignalRoute.of(chosen, configs[chosen])))
    return out


def _source(catalog: TableCatalog, table: TableConfig, made: dict[str, Made]) -> tuple[str, list[str]]:
    if table.key_includes_source:
        raise RepairError(
            f"table {table.name} is folded from several source tables (key_includes_source): re-reading it is not "
            "supported yet; give each source table a table of its own, or rebuild the table from the changelog"
        )
    found = made.get(table.name) if table.name not in {t.name for t in catalog.config.listed_tables} else None
    if found is not None and found.source_db and found.source_table:
        return f"{found.source_db}.{found.source_table}", [found.topic]
    source = table.check_source or table.name
    if source.count(".") != 1:
        raise RepairError(f"table {table.name}: name its source table with check_source: db.table")
    return source, list(table.topics)


def check_request(config: AppConfig, chosen: list[Target], where: str | None, blocking: bool) -> None:
    """Refuse, before anything is sent, what the connector or the source would refuse later."""
    for target in chosen:
        refusal = target.route.refusal(blocking)
        if refusal:
            raise RepairError(refusal)
    if where is not None and (not where.strip() or re.search(r";|--|/\*|#", where)):
        raise RepairError(f"--where {where!r} must be one SQL condition, without ';' or comments")
    if "source" not in config.model_fields_set:
        by_table = [t.route.connector for t in chosen if t.route.kafka_topic is None]
        if by_table:
            raise RepairError(
                f"connector {by_table[0]} takes signals from its signal table only, which cdc-delta writes through "
                "the source: section (a user with INSERT on it); add it, or enable the connector's Kafka channel"
            )
        return  # what only the source can say (a primary key, a condition it reads) Debezium reports
    conn = source_db.connect(config.source)
    try:
        for target in chosen:
            key = source_db.primary_key(conn, target.source)
            if key is None:
                raise RepairError(f"the source database has no table {target.source} (table {target.table.name})")
            if not key and not blocking:
                raise RepairError(
                    f"{target.source} has no primary key, which an incremental snapshot reads by: re-read it "
                    "with --blocking"
                )
            problem = source_db.filter_problem(conn, target.source, where) if where else None
            if problem:
                raise RepairError(f"--where {where!r} does not work on {target.source}: {problem}")
    finally:
        conn.close()


def resnapshot(
    spark: Callable[[], SparkSession],
    config: AppConfig,
    chosen: list[Target],
    where: str | None,
    blocking: bool,
    delete_missing: bool,
) -> list[Reread]:
    """Read ``chosen`` again from the source, wait until merged, name (and with ``delete_missing``
    soft-delete) the rows the source lacks. One signal per connector. ``spark`` gives the session, asked
    for only where it is needed (a --where, and once the reads are merged): the signal goes out first."""
    if where:
        for target in chosen:
            problem = missing.check_where(spark(), config, target.table, where)
            if problem:
                raise RepairError(f"--where {where!r} cannot be read over table {target.table.name}: {problem}")
    # A re-snapshot accept-gap started is followed, not read again (the whole table, incremental: as it was).
    started = unfinished(repair_log.entries(config)) if where is None and not blocking else {}
    deadline = time.monotonic() + config.repair.wait_seconds  # one wait for the read and the merge together
    reread = [t for t in chosen if t.table.name not in started]
    results, held, before = _read(config, reread, where, blocking, deadline)
    for target in chosen:
        if target.table.name in started:
            entry, read = started[target.table.name]
            logger.info(
                "resnapshot: %s was read again at %s UTC (accept-gap, signal %s): following it, not reading again",
                target.table.name,
                f"{entry.at:%Y-%m-%d %H:%M:%S}",
                read.signal_id,
            )
            results[target.table.name] = Reread(target.table.name, target.source, read.rows_read, read.status)
            held[target.table.name], before[target.table.name] = read.held, read.before
    for target in chosen:
        result = results[target.table.name]
        if result.problem is None:
            _merged(config, target, result, deadline)
        if result.problem is None:
            _missing(
                spark, config, target, held[target.table.name], before[target.table.name], where, delete_missing, result
            )
    now = dt.datetime.now(dt.timezone.utc)
    done = [t.table.name for t in chosen if not results[t.table.name].needs_attention and where is None]
    if done:
        repair_log.record(spark(), config, [repair_log.Entry(repair_log.RESNAPSHOT, now, name) for name in done])
    return [results[t.table.name] for t in chosen]


def start(spark: Callable[[], SparkSession], config: AppConfig, chosen: list[Target]) -> list[Reread]:
    """Have Debezium read ``chosen`` again (whole, incremental) and record each table read in the repair
    log, for ``resnapshot`` to finish once the stream runs (:mod:`.started`): what ``accept-gap`` does
    with the tables a gap fed, the stream being stopped."""
    results, held, before = _read(config, chosen, None, False, time.monotonic() + config.repair.wait_seconds)
    now = dt.datetime.now(dt.timezone.utc)
    entries = [
        repair_log.Entry(
            repair_log.STARTED,
            now,
            t.table.name,
            note=StartedRead(r.signal_id, held[t.table.name], before[t.table.name], r.rows_read, r.status).note(),
        )
        for t in chosen
        if (r := results[t.table.name]).problem is None
    ]
    if entries:
        repair_log.record(spark(), config, entries)
    return [results[t.table.name] for t in chosen]


def _read(
    config: AppConfig, chosen: list[Target], where: str | None, blocking: bool, deadline: float
) -> tuple[dict[str, Reread], dict[str, Seq | None], dict[str, dict[Partition, int]]]:
    """Signal the snapshot of ``chosen`` (one signal per connector) and follow it until Debezium has read
    them, by ``deadline``: each table's result, and the newest ordering key it held and its topics' ends
    before the signal."""
    held = {t.table.name: missing.newest_held(config, t.table) if t.table.key else None for t in chosen}
    before = {t.table.name: end_offsets(config, t.table) for t in chosen}
    results = {t.table.name: Reread(t.table.name, t.source) for t in chosen}
    by_connector: dict[str, list[Target]] = {}
    for target in chosen:
        by_connector.setdefault(target.route.connector, []).append(target)
    for group in by_connector.values():
        _snapshot(config, group, where, blocking, results, deadline)
    return results, held, before


def _snapshot(
    config: AppConfig,
    group: list[Target],
    where: str | None,
    blocking: bool,
    results: dict[str, Reread],
    deadline: float,
) -> None:
    """Send one signal for the group's tables and follow the snapshot to its end."""
    route = group[0].route
    assert route.notification_topic is not None  # check_request refused a connector without
    by_source = {t.source.lower(): results[t.table.name] for t in group}
    signal_id = signals.new_signal_id()
    for result in by_source.values():
        result.signal_id = signal_id
    signal = signals.snapshot_signal(signal_id, [t.source for t in group], blocking, where)
    with Notifications(config, route.notification_topic) as notifications:
        sent_to = signals.send(config, route, signal)
        kind = "blocking" if blocking else "incremental"
        logger.info(
            "resnapshot: %s snapshot of %s asked of %s on its %s (signal %s)",
            kind,
            ", ".join(by_source),
            route.connector,
            sent_to,
            signal_id,
        )
        ended, shown = None, 0.0
        while ended is None and time.monotonic() < deadline:
            for note in notifications.poll(2.0):
                if not _ours(note, signal_id, blocking):
                    continue
                if note.type == "TABLE_SCAN_COMPLETED":
                    _scanned(note, by_source)
                if note.type in ENDS:
                    ended = note
                elif note.type != "IN_PROGRESS" or time.monotonic() - shown >= PROGRESS_EVERY_S:
                    shown = time.monotonic()
                    logger.info("resnapshot: %s", note.progress())
    for result in by_source.values():
        if ended is None:
            result.problem = (
                f"the connector did not finish the snapshot within {config.repair.wait_seconds:g}s "
                f"(repair.wait_seconds): it goes on; see `cdc-delta connectors status` and the worker's log"
            )
        elif ended.type != "COMPLETED":
            result.problem = f"the connector reported the snapshot {ended.type.lower()}: see the worker's log"
        elif result.status and result.status not in READ:
            result.problem = f"Debezium did not read it: {result.status}" + (
                " (no primary key: re-read it with --blocking)" if result.status == "NO_PRIMARY_KEY" else ""
            )


def _ours(note: Notification, signal_id: str, blocking: bool) -> bool:
    """An incremental snapshot's notifications carry the signal's id; a blocking snapshot's, an id of its
    own, under the initial snapshot's name (the first one after the signal is ours: one runs at a time)."""
    if blocking:
        return note.aggregate_type == BLOCKING
    return note.aggregate_type == INCREMENTAL and note.id == signal_id


def _scanned(note: Notification, by_source: dict[str, Reread]) -> None:
    scanned = (note.data.get("scanned_collection") or note.data.get("data_collections") or "").lower()
    result = by_source.get(scanned)
    if result is not None:
        result.status = note.data.get("status", "")
        rows = note.data.get("total_rows_scanned", "")
        result.rows_read = int(rows) if rows.isdigit() else None


def _merged(config: AppConfig, target: Target, result: Reread, deadline: float) -> None:
    """Wait until the stream has landed what the table's topics hold now, and the table merged it."""
    time.sleep(config.repair.settle_seconds)  # the connector's producer may still hold the last reads
    ends = end_offsets(config, target.table)
    short = wait_applied(config, target.table, ends, max(0.0, deadline - time.monotonic()))
    if short:
        result.problem = (
            f"the stream has not landed {short} record(s) of the table's topics within repair.wait_seconds: "
            "is it running? The rows read are merged once it lands them"
        )
        return
    pending = wait_merged(config, target.table.name, max(0.0, deadline - time.monotonic()))
    if pending:
        result.problem = (
            f"{pending} change(s) landed but not merged within repair.wait_seconds: is the merger running "
            "(merge.in_stream, cdc-delta merge)?"
        )


def _missing(
    spark: Callable[[], SparkSession],
    config: AppConfig,
    target: Target,
    held: Seq | None,
    before: dict[Partition, int],
    where: str | None,
    delete_missing: bool,
    result: Reread,
) -> None:
    if held is None:  # the lake held nothing of the table: nothing can be missing from the source
        return
    placed = reads_placed(config, target.table, before)
    if placed is None:  # not known from Kafka: every row read is newer than the mark where they were placed
        placed = result.rows_read is not None and (
            missing.touched(spark(), config, target.table, held, where) >= result.rows_read
        )
    if not placed:
        result.problem = (
            "the rows read could not all be placed at their binlog position (a blocking snapshot where the "
            "connector had streamed no transaction with a GTID?): the table is not known to be repaired and "
            "nothing was named missing; run it again as an incremental snapshot (without --blocking)"
        )
        return
    rows = missing.missing_rows(spark(), config, target.table, held, where, target.source)
    keys = [tuple(r) for r in rows.limit(SHOWN_KEYS).collect()]
    result.missing = len(keys) if len(keys) < SHOWN_KEYS else rows.count()
    result.missing_keys = keys
    if delete_missing and result.missing:
        result.deleted = missing.soft_delete_missing(spark(), config, target.table, held, where, target.source)
