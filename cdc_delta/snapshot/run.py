"""The nightly snapshot: yesterday's snapshot (or the stock export) + the Delta table at the cut-off,
published as partition ``dt=<day>`` of a Hive table.

1. Readiness (:mod:`.readiness`, :mod:`.positions`): the stream must have passed the end of the day on
   every partition; else wait up to ``snapshot.wait_minutes`` and raise :class:`NotReady`, touching nothing.
2. Per table: the base (:mod:`.base`) is the latest published snapshot before the day (or the stock
   export the first time, or when asked); the change side is the table as of the landing that passed
   the cut-off: its merged rows at the version that holds no later landing (time travel), overridden by
   its changes up to that landing still pending then (:mod:`cdc_delta.views.live`). Per key the change
   side wins; keys whose final state is deleted are dropped (:mod:`.union`).
3. The rows go to a new folder, are checked (row count, key uniqueness, the source's count when one is
   given: :mod:`.checks`), and one metastore call makes the folder the partition (:mod:`.hive_publish`).
4. The run is recorded in the snapshot log (:mod:`cdc_delta.delta.snapshot_log`), which the next
   night's base and the tombstone purge read, in one commit for all its published tables once they are
   done (also when a table failed), and only then are the day's older run folders removed. A view
   ``<table>_current`` (:mod:`cdc_delta.snapshot.current_view`) unions the latest snapshot with the Delta
   rows for near-real-time queries.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.changelog.table import landings
from cdc_delta.changelog.table_index import indexed
from cdc_delta.config import AppConfig, TableConfig
from cdc_delta.consistency.cut import consistent_cut
from cdc_delta.delta.snapshot_log import ensure_log, published_all, record
from cdc_delta.delta.workers import each_table
from cdc_delta.exceptions import ConfigError, NotReady, SnapshotError
from cdc_delta.hadoop_fs import delete, list_dirs, qualified, same_location
from cdc_delta.lock import exclusive_lock, lock_path
from cdc_delta.metastore import hive_schema
from cdc_delta.reports import write_report
from cdc_delta.rows.as_of import Cut, live_rows, merged_at
from cdc_delta.snapshot import hive_publish as hive
from cdc_delta.snapshot.base import Base, choose_base
from cdc_delta.snapshot.boundary import Boundary, boundary_at
from cdc_delta.snapshot.checks import key_counts, source_count
from cdc_delta.snapshot.current_view import create_current_view
from cdc_delta.snapshot.positions import KafkaPositions
from cdc_delta.snapshot.readiness import Readiness, batch_positions, check_readiness, cutoff_for
from cdc_delta.snapshot.report import SnapshotReport, TableSnapshot, log_published
from cdc_delta.snapshot.union import Union, union_rows

logger = logging.getLogger(__name__)


def wait_until_ready(
    spark: SparkSession,
    config: AppConfig,
    cutoff: dt.datetime,
    kafka_positions: KafkaPositions,
    wait_s: float,
    clock: Callable[[], dt.datetime],
    at_transaction: bool = True,
) -> tuple[Readiness, Boundary]:
    """Check readiness (and, ``at_transaction``, that the source's transactions before the cut-off landed
    whole) until it holds or ``wait_s`` is spent; raises NotReady."""
    snap = config.snapshot
    deadline = time.monotonic() + wait_s
    while True:
        batches = batch_positions(landings(spark, config))
        ready = check_readiness(
            batches, cutoff, kafka_positions(), clock(), dt.timedelta(minutes=snap.idle_grace_minutes)
        )
        why = ready.describe()
        if ready.ready:
            boundary = Boundary(None)
            if at_transaction and ready.land_seq is not None:
                boundary = boundary_at(config, cutoff, ready.land_seq)
            if boundary.waiting is None:
                logger.info("readiness: %s; %s", why, boundary.describe())
                return ready, boundary
            why = f"{why}, but {boundary.describe()}"
        if time.monotonic() + snap.poll_seconds > deadline:
            fix = "run again later or pass --wait"
            if ready.ready:  # a change that will not come by this landing: a dead letter (a replay lands it later)
                fix = (
                    "if its change is a dead letter, replay it (`cdc-delta replay-dead-letters`) and publish with "
                    "--at-landing, which cuts the tables at the landing, not at a transaction"
                )
            raise NotReady(f"not publishing: {why}. Nothing was touched; {fix}")
        logger.info("readiness: %s; checking again in %.0fs", why, snap.poll_seconds)
        time.sleep(snap.poll_seconds)


@dataclass(frozen=True)
class _Written:
    """A snapshot's files in their new folder, not yet the partition."""

    folder: str
    rows: DataFrame
    count: int
    base_rows: int


class _Published:
    """The log entries of a run's published tables and the day's older run folders they replace,
    collected from the workers: one commit to the snapshot log for the run, not one per table (the
    commits of concurrent tables queue on the one log), then the old folders go."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[tuple[object, ...]] = []
        self._stale: list[str] = []

    def add(self, entry: tuple[object, ...], stale: list[str]) -> None:
        with self._lock:
            self._entries.append(entry)
            self._stale.extend(stale)

    def record(self, spark: SparkSession, config: AppConfig) -> None:
        """Append the entries to the log, then remove the folders they replaced: until the log says
        otherwise, an older run's entry may still be the base of the next night."""
        with self._lock:
            entries, stale = list(self._entries), list(self._stale)
            self._entries.clear()
            self._stale.clear()
        if entries:
            record(spark, config, entries)
        for folder in stale:
            delete(spark, folder)


@dataclass
class _Run:
    spark: SparkSession
    config: AppConfig
    day: str
    run_id: str
    readiness: Readiness
    from_stock: bool
    published: dict[str, list[Row]]
    """The snapshot log, read once for the run: per table, its published days."""
    cut: Cut | None = None
    """At a source transaction (:mod:`.boundary`); None: as of the readiness landing."""
    done: _Published = field(default_factory=lambda: _Published())
    """Shared by the run's workers: what they published, for :meth:`_Published.record`."""

    def publish(self, table: TableConfig) -> TableSnapshot | None:
        """Build, write, check and publish one table's partition; None when there is nothing yet."""
        started = time.monotonic()
        version, delta = self._delta_side(table)
        history = self.published.get(table.name, [])
        earlier = [r for r in history if r["dt"] < self.day]
        base = choose_base(self.spark, self.config, table, earlier, self.day, self.run_id, self.from_stock)
        if base.rows is None and delta is None:
            logger.info("snapshot %s: nothing to publish yet (no stock export, no Delta table)", table.name)
            return None
        changed = self._check_delta_keys(table, delta, version)
        source = source_count(self.spark, table, self.day)
        union = union_rows(base.rows, delta, table.key)
        written = self._write(table, union, base, has_delta=delta is not None)
        self._check_written(table, base, written)
        name = hive.hive_table(self.config, table)
        ddl, previous = self._switch(table, name, written, version, base)
        latest = max([self.day, *(r["dt"] for r in history)])
        create_current_view(self.spark, self.config, table, name, written.rows.columns, latest)
        base.release()
        result = TableSnapshot(
            table=table.name,
            hive_table=name,
            location=qualified(self.spark, written.folder),
            base=base.kind,
            delta_version=version,
            rows=written.count,
            base_rows=written.base_rows,
            changed_keys=changed,
            deletes_applied=union.count("deletes_applied"),
            duplicate_keys=0,
            stock_rejects=base.rejects,
            source_count=source,
            count_difference=None if source is None else written.count - source,
            ddl=ddl,
            duration_s=round(time.monotonic() - started, 2),
        )
        log_published(result, self.day, previous is not None)
        return result

    def _delta_side(self, table: TableConfig) -> tuple[int | None, DataFrame | None]:
        """The Delta table's version read and the table's business columns and ``_cdc_deleted`` as of the
        landing that passed the cut-off (None: nothing had landed for it by then)."""
        through = self.readiness.land_seq
        if through is None:
            return None, None
        cut = self.cut
        try:
            if cut is None:
                rows = live_rows(self.spark, self.config, [table], through).get(table.name)
            else:
                rows = live_rows(self.spark, self.config, [table], cut=cut).get(table.name)
                through = cut.held_at(table.name)
            version = merged_at(self.spark, self.config, table, through).version
        except Exception as exc:  # the JVM's error for files VACUUM removed carries no Python type
            if isinstance(exc, SnapshotError):
                raise
            raise SnapshotError(
                f"cannot read {table.name} as of landing {through}: {str(exc).splitlines()[0]}. If VACUUM "
                "removed its files or the changelog's retention its changes, the snapshot ran later than "
                "maintenance.vacuum_retention_hours and changelog.retention_hours allow; keep them longer "
                "than the snapshot's delay"
            ) from None
        if rows is None:
            return version, None
        business = [C.quote(c) for c in rows.columns if not c.startswith(C.PREFIX)]
        return version, rows.select(*business, C.DELETED)

    def _check_delta_keys(self, table: TableConfig, delta: DataFrame | None, version: int | None) -> int:
        """Keys the Delta side holds; raises when one repeats. Keys are unique in the result when they
        are on both sides: the base by construction (stock rows are deduplicated; a previous snapshot
        was checked and must still hold its rows), the Delta side is checked here (small next to the
        base on most nights)."""
        changed, duplicates = key_counts(delta, table.key)
        if duplicates:
            raise SnapshotError(
                f"{table.name} holds {duplicates} duplicate key(s) at version {version}: nothing published. "
                "Check the table's key in the config against the source's primary key"
            )
        return changed

    def _write(self, table: TableConfig, union: Union, base: Base, has_delta: bool) -> _Written:
        """The union's rows in Hive's types, written to a new run folder of the day; counted as written."""
        rows = union.rows.select(
            *[F.col(C.quote(f.name)).cast(f.dataType) for f in hive_schema(union.rows.schema).fields]
        )
        root = hive.table_location(self.config, table)
        folder = f"{root}/{hive.PARTITION_COLUMN}={self.day}/run-{self.run_id}"
        hive.write_files(rows, folder)
        count = union.count("rows")
        base_rows = 0
        if base.rows is not None:
            base_rows = union.count("base_rows") if has_delta else count
        return _Written(folder, rows, count, base_rows)

    def _check_written(self, table: TableConfig, base: Base, written: _Written) -> None:
        """The base still reads the rows it was published with (and, with ``full_check``, no key of the
        written files repeats); else the folder is removed and nothing is published."""
        problem = None
        if base.expected_rows is not None and written.base_rows != base.expected_rows:
            problem = (
                f"the base ({base.kind}) now reads {written.base_rows} rows, it was published with "
                f"{base.expected_rows}: its files were changed; re-run with --from-stock or re-publish that day first"
            )
        elif self.config.snapshot.full_check:
            files = self.spark.read.parquet(written.folder)
            duplicates = written.count - files.select(*table.key).distinct().count()
            if duplicates:
                problem = f"the written snapshot holds {duplicates} duplicate key(s)"
        if problem:
            delete(self.spark, written.folder)
            raise SnapshotError(f"snapshot of {table.name} dt={self.day} not published: {problem}")

    def _switch(
        self, table: TableConfig, name: str, written: _Written, version: int | None, base: Base
    ) -> tuple[str, str | None]:
        """Make the folder the partition, check it reads back, record it, remove older run folders of
        the day. Returns the table's DDL and the partition's previous location."""
        spark = self.spark
        root = hive.table_location(self.config, table)
        ddl = hive.ensure_table(spark, name, written.rows.schema, qualified(spark, root))
        previous = hive.switch_partition(spark, name, self.day, written.folder)
        published_count = spark.table(name).where(F.col(hive.PARTITION_COLUMN) == self.day).count()
        if published_count != written.count:
            raise SnapshotError(
                f"{name} dt={self.day} reads {published_count} rows after publishing, wrote {written.count}"
            )
        stale = [
            old
            for old in list_dirs(spark, f"{root}/{hive.PARTITION_COLUMN}={self.day}")
            if not same_location(old, qualified(spark, written.folder))
        ]
        self.done.add(self._log_entry(table, name, written, base.kind, version), stale)
        return ddl, previous

    def _log_entry(
        self, table: TableConfig, name: str, written: _Written, base: str, version: int | None
    ) -> tuple[object, ...]:
        return (
            table.name,
            self.day,
            self.run_id,
            name,
            qualified(self.spark, written.folder),
            base,
            version,
            self.readiness.land_seq,
            self.readiness.cutoff,
            json.dumps(self.readiness.positions, sort_keys=True),
            written.count,
            dt.datetime.now(dt.timezone.utc),
            self._absorbed_before(table),
        )

    def _absorbed_before(self, table: TableConfig) -> dt.datetime:
        """Before when every change of ``table`` is in the snapshot (the tombstone purge waits for it)."""
        cutoff = self.readiness.cutoff
        oldest = None if self.cut is None else self.cut.oldest_left_out_ms.get(table.name)
        if oldest is None:
            return cutoff
        return min(cutoff, dt.datetime.fromtimestamp(oldest / 1000, dt.timezone.utc))


def run_snapshot(
    spark: SparkSession,
    config: AppConfig,
    day: dt.date,
    kafka_positions: KafkaPositions,
    *,
    from_stock: bool = False,
    at_landing: bool = False,
    wait_minutes: float | None = None,
    clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.timezone.utc),
) -> SnapshotReport:
    """Check readiness, then publish ``day`` for every snapshot table; writes the JSON report. Every table is
    cut at the source's last transaction before the cut-off where transaction metadata lands (``at_landing``:
    as of the landing that passed the cut-off instead, as without it)."""
    started = time.monotonic()
    snap = config.snapshot
    clashes = config.hive_name_clashes()
    if clashes:
        raise ConfigError(clashes)
    cutoff = cutoff_for(day, snap.time_zone)
    wait_s = 60 * (snap.wait_minutes if wait_minutes is None else wait_minutes)
    with exclusive_lock(lock_path(config, "snapshot"), what="snapshot"):
        readiness, boundary = wait_until_ready(
            spark, config, cutoff, kafka_positions, wait_s, clock, at_transaction=not at_landing
        )
        cut = None if boundary.point is None else consistent_cut(spark, config, boundary.point)
        published, left = config.apart(indexed(spark, config).snapshot_tables())
        for name, sharing in left.items():
            logger.warning(
                "%s: not published: %s.%s would also be the Hive name of %s. List the one to publish under "
                "snapshot.tables",
                name,
                snap.database,
                name.split(".")[-1],
                ", ".join(sharing),
            )
        run_id = f"{clock().strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"
        history = published_all(spark, config)
        ensure_log(spark, config)
        run = _Run(spark, config, day.isoformat(), run_id, readiness, from_stock, history, cut)
        # Each table in a session of its own (the Hive Parquet settings are session-wide), a few at once.
        try:
            done = each_table(spark, snap.concurrency, lambda s, t: replace(run, spark=s).publish(t), published)
        finally:
            run.done.record(spark, config)
        tables = [t for t in done if t is not None]
    report = SnapshotReport(
        date=day.isoformat(),
        run_id=run_id,
        cutoff=cutoff.isoformat(),
        land_seq=readiness.land_seq,
        transaction=None if boundary.point is None else boundary.point.txn_id,
        transaction_ts_ms=None if boundary.point is None else boundary.point.source_ts_ms,
        positions=readiness.positions,
        idle_partitions=readiness.idle,
        tables=tables,
        duration_s=round(time.monotonic() - started, 2),
    )
    write_report(
        config.under_root(snap.report_dir, "_cdc_snapshot_reports"), f"snapshot-{day}-{run_id}", asdict(report)
    )
    return report
