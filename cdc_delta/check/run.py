"""Compare each table's source with its Delta table, allowing for the stream's lag.

A probe of one table: (1) the source's row count, key range and newest key, in one consistent
snapshot, with the server's time T; (2) after ``settle_seconds`` (Debezium's own delay), the Kafka end
offsets of the table's topics, and a wait until the stream's consumer group has passed them: every
change made before T is then in Delta; (3) Delta's rows in the source's key range that existed at T
(live, or soft-deleted by a change after T: rows inserted after T fall outside the range when keys grow),
compared with the source's count; the source's newest key present; the newest row event of each
partition applied. A table fails only when ``attempts`` probes in a row disagree, so that a change
racing the probe does not fail it. Tables whose key includes the shard are skipped."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from cdc_delta import source_db
from cdc_delta.changelog.status import wait_merged
from cdc_delta.changelog.table_index import Made, discovered_without_spark, knowing
from cdc_delta.check import delta_side, kafka_side, key_ranges
from cdc_delta.config import AppConfig, TableConfig
from cdc_delta.delta.delta_rs import open_table
from cdc_delta.kafka.applied import end_offsets, wait_applied
from cdc_delta.reports import write_report

logger = logging.getLogger(__name__)

OK, FAILED, BEHIND, SKIPPED = "ok", "failed", "behind", "skipped"


@dataclass(frozen=True)
class TableCheck:
    """What the probes of one table found (the last probe's figures)."""

    table: str
    source: str | None
    status: str
    reason: str = ""
    source_rows: int | None = None
    delta_rows: int | None = None
    difference: int | None = None
    """Delta's rows minus the source's."""
    key_low: Any = None
    key_high: Any = None
    newest_source_key: list[Any] | None = None
    newest_source_key_in_delta: bool | None = None
    kafka_newest_checked: int = 0
    kafka_newest_missing: list[str] = field(default_factory=list)
    repair_where: str | None = None
    """The key ranges whose counts differ, as ``resnapshot --where`` (None: the whole table)."""
    attempts: int = 0
    duration_s: float = 0.0

    def line(self) -> str:
        """The table's one line in the command's output."""
        if self.status == OK:
            newest = "" if self.newest_source_key is None else f", newest key {self.newest_source_key} in Delta"
            return (
                f"ok      {self.table}: {self.delta_rows} rows = source {self.source} "
                f"(keys {self.key_low}..{self.key_high}){newest}, "
                f"newest record of {self.kafka_newest_checked} partition(s) applied"
            )
        label = {FAILED: "FAILED ", BEHIND: "BEHIND ", SKIPPED: "skipped"}[self.status]
        where = f' --where "{self.repair_where}"' if self.repair_where else ""
        repair = (
            f" (repair: cdc-delta resnapshot --table {self.table}{where} --delete-missing)"
            if self.status == FAILED
            else ""
        )
        return f"{label} {self.table}: {self.reason}{repair}"


@dataclass(frozen=True)
class CheckReport:
    started_at: str
    tables: list[TableCheck]
    duration_s: float

    @property
    def failed(self) -> list[TableCheck]:
        return [t for t in self.tables if t.status in (FAILED, BEHIND)]


def run_check(config: AppConfig, names: list[str] | None = None) -> CheckReport:
    """Probe ``names`` (default: every table) and write the JSON report."""
    started, t0 = dt.datetime.now(dt.timezone.utc), time.monotonic()
    made = discovered_without_spark(config)
    catalog = knowing(config, made)
    tables = [catalog.table(n) for n in names] if names else catalog.tables()
    listed = {t.name for t in config.listed_tables}
    # A table a pattern entry made is compared with the source table it comes from, whatever its name, and
    # read in Kafka from its own topic (not every topic of its entry).
    tables = [_as_made(t, made[t.name]) if t.name in made and t.name not in listed else t for t in tables]
    conn = source_db.connect(config.source)
    try:
        results = [check_table(config, conn, table) for table in tables]
    finally:
        conn.close()
    report = CheckReport(started.isoformat(), results, round(time.monotonic() - t0, 1))
    folder = config.source.check.report_dir or config.under_root(None, "_cdc_check_reports")
    write_report(folder, f"check-{started:%Y%m%dT%H%M%SZ}", dataclasses.asdict(report))
    return report


def _as_made(table: TableConfig, made: Made) -> TableConfig:
    if not (made.source_db and made.source_table):
        return table
    return table.model_copy(update={"check_source": f"{made.source_db}.{made.source_table}", "topics": [made.topic]})


def check_table(config: AppConfig, conn: Any, table: TableConfig) -> TableCheck:
    t0 = time.monotonic()
    source = table.check_source or (table.name if "." in table.name else None)
    if table.key_includes_source:
        return TableCheck(table.name, source, SKIPPED, "its key includes the shard (several source tables)")
    if source is None:
        return TableCheck(table.name, None, SKIPPED, "set check_source: db.table (the logical name has no database)")
    settings = config.source.check
    result = TableCheck(table.name, source, FAILED)
    for attempt in range(1, settings.attempts + 1):
        result = _probe(config, conn, table, source, attempt)
        if result.status != FAILED or attempt == settings.attempts:
            break
        logger.info(
            "%s: probe %d disagrees (%s); probing again in %gs",
            table.name,
            attempt,
            result.reason,
            settings.retry_seconds,
        )
        time.sleep(settings.retry_seconds)
    return dataclasses.replace(result, duration_s=round(time.monotonic() - t0, 1))


def _probe(config: AppConfig, conn: Any, table: TableConfig, source: str, attempt: int) -> TableCheck:
    import pymysql

    settings = config.source.check
    probed = time.monotonic()
    try:
        state = source_db.probe(conn, source, list(table.key), key_ranges.width)
    except pymysql.err.ProgrammingError as exc:
        return TableCheck(
            table.name, source, FAILED, f"cannot read source table {source}: {exc.args[-1]}", attempts=attempt
        )
    time.sleep(max(0.0, settings.settle_seconds - (time.monotonic() - probed)))
    ends = end_offsets(config, table)
    waited = time.monotonic()
    short = wait_applied(config, table, ends, settings.wait_seconds)
    unmerged = 0 if short else wait_merged(config, table.name, settings.wait_seconds - (time.monotonic() - waited))
    base = TableCheck(
        table.name,
        source,
        FAILED,
        source_rows=state.rows,
        key_low=state.low,
        key_high=state.high,
        newest_source_key=list(state.newest_key) if state.newest_key else None,
        attempts=attempt,
    )
    if short:
        return dataclasses.replace(
            base,
            status=BEHIND,
            reason=f"the stream has not landed {short} record(s) of the table's topics within "
            f"{settings.wait_seconds:g}s (source.check.wait_seconds): is it running?",
        )
    if unmerged:
        return dataclasses.replace(
            base,
            status=BEHIND,
            reason=f"{unmerged} change(s) of the table landed but not merged within {settings.wait_seconds:g}s "
            "(source.check.wait_seconds): is the merger running (merge.in_stream, cdc-delta merge)?",
        )
    path = config.storage.table_path(table)
    table_rs = open_table(config, path)
    if table_rs is None:
        if state.rows == 0:
            return dataclasses.replace(base, status=OK, delta_rows=0, difference=0)
        return dataclasses.replace(base, reason=f"no Delta table at {path}, {state.rows} rows in {source}")
    delta = delta_side.read_state(
        table_rs, list(table.key), state.low, state.high, state.at_ms, state.newest_key, state.range_width
    )
    events = kafka_side.newest_events(config, table, ends)
    unapplied = [
        e
        for e in events
        if not delta_side.has_applied(table_rs, list(table.key), e.key, e.topic, e.partition, e.offset)
    ]
    missing = [f"{e.topic}[{e.partition}]@{e.offset} key {e.key}" for e in unapplied]
    problems = []
    if delta.rows != state.rows:
        problems.append(
            f"{delta.rows} rows in Delta with {table.key[0]} in {state.low}..{state.high}, {state.rows} in "
            f"{source} ({delta.rows - state.rows:+d})"
        )
    if delta.newest_key_present is False:
        problems.append(f"the source's newest key {list(state.newest_key or ())} is not in Delta")
    if missing:
        problems.append(f"newest Kafka record(s) not applied: {'; '.join(missing)}")
    return dataclasses.replace(
        base,
        status=FAILED if problems else OK,
        reason="; ".join(problems),
        delta_rows=delta.rows,
        difference=delta.rows - state.rows,
        newest_source_key_in_delta=delta.newest_key_present,
        kafka_newest_checked=len(events),
        kafka_newest_missing=missing,
        repair_where=_repair_where(table, state, delta, [e.key for e in unapplied]) if problems else None,
    )


def _repair_where(
    table: TableConfig, state: source_db.SourceState, delta: delta_side.DeltaState, unapplied: list[dict[str, Any]]
) -> str | None:
    """The key ranges where the table differs, as a ``--where`` (None: read the whole table)."""
    buckets = key_ranges.Buckets.over(state.low, state.high)
    if buckets is None or state.range_width != buckets.width:
        return None
    keys = [k[table.key[0]] for k in unapplied]
    if delta.newest_key_present is False and state.newest_key:
        keys.append(state.newest_key[0])
    if not all(isinstance(k, int) and buckets.low <= k <= buckets.high for k in keys):
        return None  # a key outside the source's range differs: the whole table
    ranges = key_ranges.differing(state.range_rows, delta.range_rows, [buckets.of(k) for k in keys])
    return key_ranges.repair_where(table.key[0], buckets, ranges)
