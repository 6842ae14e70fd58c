"""The hourly maintenance of the replicated tables (OPTIMIZE, tombstone purge, VACUUM, checkpoint) and of
the changelog (:mod:`.changelog`: retention, compaction, VACUUM, checkpoint).

Safe beside the running stream: every command is retried when it loses a write race, and the busy
ones hold the stream's writes briefly once they have lost a few (:mod:`.commands`); a lock keeps two
runs apart. Which tombstones may go is :mod:`.purge`'s decision.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import asdict, dataclass, field, replace

from delta.tables import DeltaTable
from pyspark.sql import Row, SparkSession

from cdc_delta.activity.counts import activity_path, activity_txn_id, refresh
from cdc_delta.activity.judge import FLAGGED
from cdc_delta.activity.read import verdicts
from cdc_delta.changelog.table import landings
from cdc_delta.changelog.table_index import indexed
from cdc_delta.config import AppConfig, TableConfig
from cdc_delta.delta.commits import merged_through, txn_version
from cdc_delta.delta.snapshot_log import published_all
from cdc_delta.delta.workers import each_table
from cdc_delta.exceptions import one_line
from cdc_delta.history.append import history_path
from cdc_delta.lock import exclusive_lock, lock_path
from cdc_delta.maintenance import commands
from cdc_delta.maintenance.changelog import ChangelogReport, maintain_changelog
from cdc_delta.maintenance.purge import landing_watermarks, purge_decision, snapshot_condition
from cdc_delta.reports import write_report

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableReport:
    """What one maintenance run did to one table."""

    table: str
    files_before: int = 0
    bytes_before: int = 0
    files_after: int = 0
    """After the run's OPTIMIZE and purge (as before them where neither rewrote a file: the stream's own
    commits meanwhile are not counted)."""
    bytes_after: int = 0
    files_compacted: int = 0
    rows_purged: int = 0
    purge_cutoff: str | None = None
    purge_waits_for: str | None = None
    """Why no tombstone may go yet where ``purge_cutoff`` is None (no stream position, no published snapshot)."""
    files_vacuumed: int = 0
    vacuumed: bool = True
    """False: VACUUM was not due (its last run is younger than ``maintenance.vacuum_interval_hours``)."""
    checkpoint_version: int | None = None
    """The table version the run's own Delta checkpoint (written after VACUUM) holds; None: none written,
    since the run rewrote no file (nothing compacted or purged)."""
    merged_seq: int = -1
    """The newest changelog landing the table holds (-1: none)."""
    duration_s: float = 0.0
    skipped: str | None = None
    activity: str = ""
    """How its recent changes compare with its history (:mod:`cdc_delta.activity.judge`): ok, silent,
    jump, learning, quiet; empty where ``activity.enabled`` is off."""
    activity_reason: str = ""
    silent_seconds: float = 0.0
    """How long the table has had no change, where it is silent (0 otherwise: the alert's series)."""
    change_jump_ratio: float = 0.0
    """Its last hour's changes over the most in that hour on an earlier day, where it jumped (0 otherwise)."""
    history_files_compacted: int = 0
    """Of its history (a table with ``history``), the files OPTIMIZE replaced; nothing is purged from it."""
    history_files_vacuumed: int = 0

    def summary(self) -> str:
        """What the run did to the table, in one line (the log's and ``cdc-delta maintain``'s)."""
        if self.skipped:
            return f"skipped ({self.skipped})"
        purge = f"before {self.purge_cutoff}" if self.purge_cutoff else f"none may go: {self.purge_waits_for}"
        vacuum = (
            f"{self.files_vacuumed} files vacuumed"
            if self.vacuumed
            else "VACUUM not due (maintenance.vacuum_interval_hours)"
        )
        checkpoint = (
            "no checkpoint (no file rewritten)"
            if self.checkpoint_version is None
            else f"checkpoint at version {self.checkpoint_version}"
        )
        flagged = f", {self.activity}: {self.activity_reason}" if self.activity in FLAGGED else ""
        history = (
            f", history: {self.history_files_compacted} files compacted, {self.history_files_vacuumed} vacuumed"
            if self.history_files_compacted or self.history_files_vacuumed
            else ""
        )
        return (
            f"files {self.files_before} -> {self.files_after}, bytes {self.bytes_before} -> {self.bytes_after}, "
            f"{self.rows_purged} tombstones purged ({purge}), {vacuum}, {checkpoint}{history}, "
            f"{self.duration_s:.1f}s{flagged}"
        )


@dataclass(frozen=True)
class MaintenanceReport:
    """One run over every table."""

    started_at: str
    tables: list[TableReport] = field(default_factory=list)
    changelog: ChangelogReport | None = None
    duration_s: float = 0.0


def maintain_table(
    spark: SparkSession,
    config: AppConfig,
    table: TableConfig,
    now: dt.datetime,
    history: list[Row],
    watermarks: dict[int, int],
) -> TableReport:
    """OPTIMIZE, purge old tombstones, VACUUM, checkpoint one table (``history``: its snapshots;
    ``watermarks``: :func:`~.purge.landing_watermarks` of the recent landings)."""
    path = config.storage.table_path(table)
    if not DeltaTable.isDeltaTable(spark, path):
        return TableReport(table.name, skipped="no table yet")
    started = time.monotonic()
    files_before, bytes_before = commands.table_size(spark, path)
    compacted = commands.optimize(spark, config, table, path, files_before)
    required, absorbed = snapshot_condition(config, table, history)
    merged = merged_through(spark, path, config.app_id, table.name)
    watermark = watermarks.get(merged)
    purge = purge_decision(now, config.maintenance.tombstone_retention_hours, watermark, required, absorbed)
    purged = commands.purge(spark, config, table, path, purge.cutoff) if purge.cutoff is not None else 0
    vacuum = commands.vacuum_due(spark, config, path, now)
    vacuumed = commands.vacuum(spark, config, table.name, path) if vacuum else 0
    rewrote = bool(compacted or purged)
    # A checkpoint only after rewriting files: otherwise the commits since the last are the merges'
    # (Delta checkpoints every 10 of them itself) and VACUUM's two, cheap to replay (1.5 s a table saved).
    checkpoint = commands.checkpoint(spark, path) if rewrote else None
    # VACUUM changes no file of the table's state: with nothing rewritten, the run left it as it found it
    # (the size of the state after VACUUM's commits costs a state reconstruction, 0.6 s a table).
    files_after, bytes_after = commands.table_size(spark, path) if rewrote else (files_before, bytes_before)
    history_compacted, history_vacuumed = _maintain_history(spark, config, table, vacuum)
    report = TableReport(
        table=table.name,
        files_before=files_before,
        bytes_before=bytes_before,
        files_after=files_after,
        bytes_after=bytes_after,
        files_compacted=compacted,
        rows_purged=purged,
        purge_cutoff=purge.cutoff.isoformat() if purge.cutoff else None,
        purge_waits_for=purge.waits_for,
        files_vacuumed=vacuumed,
        vacuumed=vacuum,
        checkpoint_version=checkpoint,
        merged_seq=merged,
        duration_s=round(time.monotonic() - started, 2),
        history_files_compacted=history_compacted,
        history_files_vacuumed=history_vacuumed,
    )
    logger.info("maintained %s: %s", table.name, report.summary())
    return report


def _maintain_history(spark: SparkSession, config: AppConfig, table: TableConfig, vacuum: bool) -> tuple[int, int]:
    """OPTIMIZE the table's history (a table with ``history``: :mod:`cdc_delta.history`), and VACUUM it when the
    table's VACUUM is due; returns (files compacted, files vacuumed). Its changes are all kept."""
    path = history_path(config, table.name)
    if table.history is None or not DeltaTable.isDeltaTable(spark, path):
        return 0, 0
    files, _ = commands.table_size(spark, path)
    compacted = commands.optimize(spark, config, table, path, files, history=True)
    vacuumed = commands.vacuum(spark, config, f"{table.name} history", path) if vacuum else 0
    return compacted, vacuumed


def _with_activity(
    spark: SparkSession, config: AppConfig, tables: list[TableReport], now: dt.datetime
) -> tuple[list[TableReport], int]:
    """``tables`` judged against their history, after counting the landings since the last run; and the
    newest landing counted. A failure to count or judge is logged, not raised: the maintenance goes on,
    and the changelog keeps what was not counted."""
    now_ms = int(now.timestamp() * 1000)
    try:
        counted, _ = refresh(spark, config, now_ms)
        judged = verdicts(config, [t.table for t in tables], now_ms)
    except Exception as exc:  # noqa: BLE001 (the counts are a judgement: they must not stop the maintenance)
        logger.warning("activity: could not count or judge the tables' changes: %s", one_line(exc))
        try:
            return tables, txn_version(spark, activity_path(config), activity_txn_id(config))
        except Exception:  # noqa: BLE001 (not even the counts' position: the changelog keeps everything)
            return tables, -1
    out = []
    for t in tables:
        v = judged[t.table]
        if v.flagged:
            logger.warning("%s: %s: %s", t.table, v.state, v.reason)
        out.append(
            replace(
                t,
                activity=v.state,
                activity_reason=v.reason,
                silent_seconds=round(v.silent_s, 1),
                change_jump_ratio=round(v.jump_ratio, 2),
            )
        )
    return out, counted


def run_maintenance(
    spark: SparkSession, config: AppConfig, now: dt.datetime | None = None, wait_s: float = 0.0
) -> MaintenanceReport:
    """Maintain every table under the maintenance lock, and write the JSON report."""
    now = now or dt.datetime.now(dt.timezone.utc)
    m = config.maintenance
    if m.vacuum_retention_hours < 168:
        logger.warning(
            "VACUUM keeps only %.1f h of history (below Delta's 168 h check, allowed by config): "
            "time travel and slow readers cannot go further back",
            m.vacuum_retention_hours,
        )
    started = time.monotonic()
    with exclusive_lock(lock_path(config, "maintenance"), wait_s):
        commands.configure_session(spark, m)
        history = published_all(spark, config)  # once for every table
        watermarks = landing_watermarks(landings(spark, config))  # likewise
        tables = each_table(
            spark,
            m.concurrency,
            lambda session, table: maintain_table(session, config, table, now, history.get(table.name, []), watermarks),
            indexed(spark, config).tables(),
            setup=lambda session: commands.configure_session(session, m),
        )
        # Only what every table has merged may go: a table not created yet holds nothing. With activity
        # on, only what has been counted too (counted first; where counting failed, what it counted before).
        merged = {t.table: t.merged_seq for t in tables}
        if config.activity.enabled:
            tables, counted = _with_activity(spark, config, tables, now)
            merged = {name: min(seq, counted) for name, seq in merged.items()}
        changelog = maintain_changelog(spark, config, merged, now)
    report = MaintenanceReport(
        now.isoformat(timespec="seconds"), tables, changelog, round(time.monotonic() - started, 2)
    )
    folder = config.under_root(m.report_dir, "_cdc_maintenance_reports")
    write_report(folder, f"maintenance-{now.strftime('%Y%m%dT%H%M%SZ')}", asdict(report))
    return report
