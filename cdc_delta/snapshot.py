"""The nightly snapshot: yesterday's snapshot (or the stock export) + the Delta table at the cut-off,
published as partition ``dt=<day>`` of a Hive table.

1. Readiness (:mod:`cdc_delta.readiness`): the stream must have passed the end of the day on every
   partition; else wait up to ``snapshot.wait_minutes`` and raise :class:`NotReady`, touching nothing.
2. Per table: the base is the latest published snapshot before the day (or the stock export the first
   time, or when asked); the change side is the Delta table as of its last stream commit of the batch
   that passed the cut-off (time travel). Per key the Delta row wins; keys whose final state is
   deleted are dropped.
3. The rows go to a new folder, are checked (row count, key uniqueness, the source's count when one is
   given), and one metastore call makes the folder the partition (:mod:`cdc_delta.hive_publish`).
4. The run is recorded in the snapshot log (a Delta table: table, day, Delta version, batch, stream
   positions, location), which the next night's base and the tombstone purge read; a view
   ``<table>_current`` unions the latest snapshot with the Delta rows for near-real-time queries.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import secrets
import time
import zoneinfo
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field

from confluent_kafka import KafkaException
from delta.tables import DeltaTable
from pyspark.sql import DataFrame, Observation, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.storagelevel import StorageLevel

from cdc_delta import columns as C
from cdc_delta import hive_publish as hive
from cdc_delta.commit_log import AppCommit, app_commits
from cdc_delta.config import AppConfig, TableConfig, is_uri
from cdc_delta.exceptions import ConfigError, NotReady, SnapshotError
from cdc_delta.hadoop_fs import delete, list_dirs, qualified, same_location
from cdc_delta.kafka_offsets import partition_lag
from cdc_delta.lock import exclusive_lock
from cdc_delta.readiness import KafkaPosition, Partition, Readiness, batch_positions, check_readiness, table_version
from cdc_delta.reports import write_report
from cdc_delta.stock_export import read_stock

logger = logging.getLogger(__name__)

HISTORY_LIMIT = 20_000
"""Stream commits read per table to find where the stream passed the cut-off."""
LOG_SCHEMA = (
    "table string, dt string, run_id string, hive_table string, location string, base string, "
    "delta_version bigint, batch_id bigint, cutoff timestamp, positions string, rows bigint, published_at timestamp"
)
REJECTS_SCHEMA = "table string, dt string, run_id string, file string, line bigint, reason string, content string"

KafkaPositions = Callable[[], Mapping[Partition, KafkaPosition] | None]


@dataclass(frozen=True)
class TableSnapshot:
    """What the run published for one table."""

    table: str
    hive_table: str
    location: str
    base: str
    """``stock``, ``snapshot dt=<day>`` or ``none``."""
    delta_version: int | None
    rows: int
    base_rows: int
    changed_keys: int
    """Keys the Delta side holds (every key changed since capture began, deleted ones included)."""
    deletes_applied: int
    """Base rows dropped because their key's final state in Delta is deleted."""
    duplicate_keys: int
    stock_rejects: int = 0
    source_count: int | None = None
    count_difference: int | None = None
    """rows - source_count (None without a source count)."""
    ddl: str = ""
    duration_s: float = 0.0


@dataclass(frozen=True)
class SnapshotReport:
    """One run over every snapshot table."""

    date: str
    run_id: str
    cutoff: str
    batch_id: int | None
    positions: dict[str, dict[str, int]]
    idle_partitions: list[str]
    tables: list[TableSnapshot] = field(default_factory=list)
    duration_s: float = 0.0


def cutoff_for(day: dt.date, time_zone: str) -> dt.datetime:
    """The end of ``day`` (the next midnight) in ``time_zone``, in UTC."""
    midnight = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(0), zoneinfo.ZoneInfo(time_zone))
    return midnight.astimezone(dt.timezone.utc)


def lock_path(config: AppConfig) -> str:
    """The lock file keeping two snapshot runs apart (on a filesystem every runner shares)."""
    if config.snapshot.lock_path:
        return config.snapshot.lock_path
    if is_uri(config.storage.root):
        raise ConfigError(
            f"storage.root {config.storage.root!r} is not local: set snapshot.lock_path to a shared local path"
        )
    return f"{config.storage.root.rstrip('/')}/_cdc_snapshot.lock"


def log_path(config: AppConfig) -> str:
    return config.under_root(config.snapshot.log_path, "_cdc_snapshots")


def rejects_path(config: AppConfig) -> str:
    return f"{config.storage.root.rstrip('/')}/_cdc_stock_rejects"


def published(spark: SparkSession, config: AppConfig, table: str) -> list[Row]:
    """Every snapshot published for ``table``, the latest run of each day, oldest day first."""
    path = log_path(config)
    if not DeltaTable.isDeltaTable(spark, path):
        return []
    rows = spark.read.format("delta").load(path).where(F.col("table") == table).collect()
    latest: dict[str, Row] = {}
    for row in sorted(rows, key=lambda r: (r["dt"], r["published_at"], r["run_id"])):
        latest[row["dt"]] = row
    return [latest[d] for d in sorted(latest)]


def absorbed_before(spark: SparkSession, config: AppConfig, table: str) -> dt.datetime | None:
    """Changes before this instant are in a published snapshot (the latest cut-off; None: none)."""
    cutoffs = [r["cutoff"] for r in published(spark, config, table)]
    if not cutoffs:
        return None
    latest = max(cutoffs)
    return latest if latest.tzinfo else latest.replace(tzinfo=dt.timezone.utc)


def stream_commits(spark: SparkSession, config: AppConfig) -> dict[str, list[AppCommit]]:
    """Newest first, this app's stream commits of every configured table that exists."""
    out = {}
    for table in config.tables:
        path = config.storage.table_path(table)
        if DeltaTable.isDeltaTable(spark, path):
            out[table.name] = list(app_commits(DeltaTable.forPath(spark, path), config.app_id, HISTORY_LIMIT))
    return out


def kafka_positions_of(config: AppConfig) -> KafkaPositions:
    """Reads, per partition of the subscribed topics, the end offset and the stream's group offset."""

    def read() -> dict[Partition, KafkaPosition]:
        kafka = config.kafka
        try:
            lags = partition_lag(kafka.bootstrap_servers, config.app_id, kafka.topics, kafka.topic_pattern)
        except KafkaException as exc:
            raise SnapshotError(
                f"cannot reach Kafka at {kafka.bootstrap_servers} to check readiness: {exc}. "
                "Fix kafka.bootstrap_servers, or pass --skip-kafka-check to judge from the Delta commits alone "
                "(quiet partitions never pass then)"
            ) from None
        return {(p.topic, p.partition): KafkaPosition(p.end, p.committed) for p in lags}

    return read


def wait_until_ready(
    spark: SparkSession,
    config: AppConfig,
    cutoff: dt.datetime,
    kafka_positions: KafkaPositions,
    wait_s: float,
    clock: Callable[[], dt.datetime],
) -> tuple[Readiness, dict[str, list[AppCommit]]]:
    """Check readiness until it holds or ``wait_s`` is spent; raises NotReady."""
    snap = config.snapshot
    deadline = time.monotonic() + wait_s
    while True:
        commits = stream_commits(spark, config)
        batches = batch_positions(c for table in commits.values() for c in table)
        ready = check_readiness(
            batches, cutoff, kafka_positions(), clock(), dt.timedelta(minutes=snap.idle_grace_minutes)
        )
        if ready.ready:
            logger.info("readiness: %s", ready.describe())
            return ready, commits
        if time.monotonic() + snap.poll_seconds > deadline:
            raise NotReady(f"not publishing: {ready.describe()}. Nothing was touched; run again later or pass --wait")
        logger.info("readiness: %s; checking again in %.0fs", ready.describe(), snap.poll_seconds)
        time.sleep(snap.poll_seconds)


def _aligned(base: DataFrame, delta: DataFrame | None) -> DataFrame:
    """``base`` with the Delta side's columns and types (columns only the base has stay, at the end)."""
    if delta is None:
        return base
    types = {f.name.lower(): f.dataType for f in delta.schema.fields}
    have = {f.name.lower(): f.name for f in base.schema.fields}
    cols = []
    for f in delta.schema.fields:
        name = have.get(f.name.lower())
        cols.append((F.col(C.quote(name)).cast(f.dataType) if name else F.lit(None).cast(f.dataType)).alias(f.name))
    extra = [F.col(C.quote(f.name)) for f in base.schema.fields if f.name.lower() not in types]
    return base.select(*cols, *extra)


@dataclass(frozen=True)
class Union:
    """The snapshot's rows, and what the pass that writes them counts (read after the write)."""

    rows: DataFrame
    counted: Observation
    """``rows``: the snapshot's row count."""
    base_counted: Observation | None = None
    """``base_rows`` and ``deletes_applied``, where there is a base and a Delta side."""

    def count(self, name: str) -> int:
        if name == "rows":
            return int(self.counted.get["rows"])
        return int(self.base_counted.get[name]) if self.base_counted else 0


_DELTA_DELETED = "_cdc_delta_deleted"


def union_rows(base: DataFrame | None, delta: DataFrame | None, key: list[str]) -> Union:
    """Per key the Delta row wins over the base row; keys deleted in Delta are dropped.

    ``delta`` holds the business columns and ``_cdc_deleted``; the result has the business columns.
    The counts come from the same pass that writes the rows: no extra scan of the base.
    """
    counted = Observation("snapshot_rows")
    rows_count = F.count(F.lit(1)).alias("rows")
    if delta is None:
        if base is None:
            raise SnapshotError("nothing to union: no base and no Delta table")
        return Union(base.observe(counted, rows_count), counted)
    live = delta.where(~F.col(C.DELETED)).drop(C.DELETED)
    if base is None:
        return Union(live.observe(counted, rows_count), counted)
    marks = delta.select(*key, F.col(C.DELETED).alias(_DELTA_DELETED))
    in_delta = F.col(_DELTA_DELETED).isNotNull()
    base_counted = Observation("snapshot_base")
    joined = (
        _aligned(base, live)
        .join(marks, on=key, how="left")
        .observe(
            base_counted,
            F.count(F.lit(1)).alias("base_rows"),
            F.count(F.when(in_delta & F.col(_DELTA_DELETED), 1)).alias("deletes_applied"),
        )
    )
    kept = joined.where(~in_delta).drop(_DELTA_DELETED)
    union = kept.unionByName(live, allowMissingColumns=True)
    return Union(union.observe(counted, rows_count), counted, base_counted)


def _delta_side(spark: SparkSession, config: AppConfig, table: TableConfig, version: int | None) -> DataFrame | None:
    if version is None:
        return None
    path = config.storage.table_path(table)
    try:
        df = spark.read.format("delta").option("versionAsOf", version).load(path)
        business = [C.quote(f.name) for f in df.schema.fields if not f.name.startswith(C.PREFIX)]
        return df.select(*business, C.DELETED)
    except Exception as exc:  # the JVM's error for files VACUUM removed carries no Python type
        raise SnapshotError(
            f"cannot read {table.name} as of version {version} ({path}): {str(exc).splitlines()[0]}. "
            "If VACUUM removed its files, the snapshot ran later than maintenance.vacuum_retention_hours "
            "allows; keep the retention longer than the snapshot's delay"
        ) from None


def _source_count(spark: SparkSession, table: TableConfig, day: str) -> int | None:
    """The source's row count from the file the export job wrote, or over JDBC (None: not configured)."""
    if table.source_count_path:
        path = table.source_count_path.replace("{date}", day)
        try:
            return int(" ".join(r["value"] for r in spark.read.text(path).collect()).strip())
        except Exception as exc:  # a missing file or a number that is not one
            raise SnapshotError(
                f"source count file {path} of {table.name} is missing or does not hold one integer: "
                f"{str(exc).splitlines()[0] if str(exc) else exc!r}"
            ) from None
    jdbc = table.source_count_jdbc
    if jdbc is None:
        return None
    reader = spark.read.format("jdbc").option("url", jdbc.url).option("query", jdbc.query)
    reader = reader.option("driver", jdbc.driver)
    if jdbc.url.startswith(("jdbc:mariadb:", "jdbc:mysql:")):
        # Spark has no dialect for jdbc:mariadb and quotes column names with double quotes, which
        # MariaDB/MySQL read as strings unless ANSI_QUOTES is on.
        reader = reader.option("sessionInitStatement", "SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')")
    if jdbc.user:
        reader = reader.option("user", jdbc.user)
    password = jdbc.password()
    if password is not None:
        reader = reader.option("password", password)
    try:
        row = reader.load().first()
        return int(row[0]) if row is not None and row[0] is not None else 0
    except Exception as exc:  # the JVM's SQL errors carry no Python type
        first = str(exc).splitlines()[0] if str(exc) else repr(exc)
        raise SnapshotError(
            f"counting {table.name} at the source over {jdbc.url} ({jdbc.query!r}) failed: {first}. "
            "Check source_count_jdbc (URL, user, password, the query) and that the database is reachable"
        ) from None


def _key_counts(delta: DataFrame | None, key: list[str]) -> tuple[int, int]:
    """Keys the Delta side holds, and how many of them occur more than once: one aggregate."""
    if delta is None:
        return 0, 0
    per_key = delta.groupBy(*[C.quote(k) for k in key]).count()
    row = per_key.agg(F.count(F.lit(1)).alias("keys"), F.count(F.when(F.col("count") > 1, 1)).alias("repeated")).first()
    return (int(row["keys"]), int(row["repeated"])) if row is not None else (0, 0)


@dataclass(frozen=True)
class _Base:
    rows: DataFrame | None
    kind: str
    """``stock``, ``snapshot dt=<day>`` or ``none``."""
    expected_rows: int | None = None
    """The row count the base was published with (a previous snapshot)."""
    rejects: int = 0
    release: Callable[[], None] = lambda: None
    """Frees what reading the base cached (a parsed text export), once the snapshot is written."""


@dataclass
class _Run:
    spark: SparkSession
    config: AppConfig
    day: str
    run_id: str
    readiness: Readiness
    commits: dict[str, list[AppCommit]]
    from_stock: bool

    def _stock_base(self, table: TableConfig) -> _Base:
        stock = read_stock(self.spark, table)
        rejects = stock.rejects.persist(StorageLevel.MEMORY_AND_DISK)
        count = rejects.count()
        if count:
            tagged = rejects.select(
                F.lit(table.name).alias("table"), F.lit(self.day).alias("dt"), F.lit(self.run_id).alias("run_id"), "*"
            )
            tagged.write.format("delta").mode("append").save(rejects_path(self.config))
            for r in rejects.limit(5).collect():
                logger.warning("stock reject %s:%s: %s", r["file"], r["line"], r["reason"])
        rejects.unpersist()
        limit = self.config.snapshot.max_rejects
        if count > limit:
            stock.release()
            raise SnapshotError(
                f"{count} rejected line(s) in the stock export of {table.name}, "
                f"more than snapshot.max_rejects = {limit}: nothing published. The lines and reasons are in "
                f"the Delta table {rejects_path(self.config)} (run_id = '{self.run_id}'); fix the export or raise "
                "the threshold"
            )
        return _Base(stock.rows, "stock", rejects=count, release=stock.release)

    def _base(self, table: TableConfig, earlier: list[Row]) -> _Base:
        """The latest snapshot before the day, else the stock export, else nothing."""
        if earlier and not self.from_stock:
            last = earlier[-1]
            return _Base(self.spark.read.parquet(last["location"]), f"snapshot dt={last['dt']}", last["rows"])
        if table.stock is not None:
            return self._stock_base(table)
        return _Base(None, "none")

    def publish(self, table: TableConfig) -> TableSnapshot | None:
        started = time.monotonic()
        spark, config = self.spark, self.config
        version = table_version(self.commits.get(table.name, []), self.readiness.batch_id)
        delta = _delta_side(spark, config, table, version)
        history = published(spark, config, table.name)
        base = self._base(table, [r for r in history if r["dt"] < self.day])
        if base.rows is None and delta is None:
            logger.info("snapshot %s: nothing to publish yet (no stock export, no Delta table)", table.name)
            return None
        # Keys are unique in the result when they are on both sides: the base by construction (stock
        # rows are deduplicated; a previous snapshot was checked and must still hold its rows), the
        # Delta side is checked here (small next to the base on most nights).
        changed, duplicates = _key_counts(delta, table.key)
        if duplicates:
            raise SnapshotError(
                f"{table.name} holds {duplicates} duplicate key(s) at version {version}: nothing published. "
                "Check the table's key in the config against the source's primary key"
            )
        source = _source_count(spark, table, self.day)
        union = union_rows(base.rows, delta, table.key)
        rows = union.rows.select(
            *[F.col(C.quote(f.name)).cast(f.dataType) for f in hive.hive_schema(union.rows.schema).fields]
        )
        name = hive.hive_table(config, table)
        root = hive.table_location(config, table)
        folder = f"{root}/{hive.PARTITION_COLUMN}={self.day}/run-{self.run_id}"
        hive.write_files(rows, folder)
        count = union.count("rows")
        base_rows = (
            union.count("base_rows")
            if base.rows is not None and delta is not None
            else (count if base.rows is not None else 0)
        )
        problem = None
        if base.expected_rows is not None and base_rows != base.expected_rows:
            problem = (
                f"the base ({base.kind}) now reads {base_rows} rows, it was published with {base.expected_rows}: "
                "its files were changed; re-run with --from-stock or re-publish that day first"
            )
        elif config.snapshot.full_check:
            written = spark.read.parquet(folder)
            duplicates = count - written.select(*table.key).distinct().count()
            if duplicates:
                problem = f"the written snapshot holds {duplicates} duplicate key(s)"
        if problem:
            delete(spark, folder)
            raise SnapshotError(f"snapshot of {table.name} dt={self.day} not published: {problem}")
        ddl = hive.ensure_table(spark, name, rows.schema, qualified(spark, root))
        previous = hive.switch_partition(spark, name, self.day, folder)
        published_count = spark.table(name).where(F.col(hive.PARTITION_COLUMN) == self.day).count()
        if published_count != count:
            raise SnapshotError(f"{name} dt={self.day} reads {published_count} rows after publishing, wrote {count}")
        self._record(table, name, folder, base.kind, version, count)
        for old in list_dirs(spark, f"{root}/{hive.PARTITION_COLUMN}={self.day}"):
            if not same_location(old, qualified(spark, folder)):
                delete(spark, old)
        latest = max([self.day, *(r["dt"] for r in history)])
        self._current_view(table, name, rows.columns, latest)
        base.release()
        deletes = union.count("deletes_applied")
        result = TableSnapshot(
            table=table.name,
            hive_table=name,
            location=qualified(spark, folder),
            base=base.kind,
            delta_version=version,
            rows=count,
            base_rows=base_rows,
            changed_keys=changed,
            deletes_applied=deletes,
            duplicate_keys=duplicates,
            stock_rejects=base.rejects,
            source_count=source,
            count_difference=None if source is None else count - source,
            ddl=ddl,
            duration_s=round(time.monotonic() - started, 2),
        )
        logger.info(
            "snapshot %s dt=%s: %d rows (base %s: %d, %d changed keys, %d deletes applied) from Delta v%s%s, %s%s",
            name,
            self.day,
            count,
            base.kind,
            base_rows,
            changed,
            deletes,
            version,
            f", {base.rejects} stock rejects" if base.rejects else "",
            "replaced the partition" if previous else "new partition",
            f", source count {source} (difference {count - source})" if source is not None else "",
        )
        return result

    def _record(self, table: TableConfig, name: str, folder: str, base: str, version: int | None, rows: int) -> None:
        entry = [
            (
                table.name,
                self.day,
                self.run_id,
                name,
                qualified(self.spark, folder),
                base,
                version,
                self.readiness.batch_id,
                self.readiness.cutoff,
                json.dumps(self.readiness.positions, sort_keys=True),
                rows,
                dt.datetime.now(dt.timezone.utc),
            )
        ]
        frame = self.spark.createDataFrame(entry, LOG_SCHEMA)
        frame.write.format("delta").mode("append").save(log_path(self.config))

    def _current_view(self, table: TableConfig, name: str, columns: list[str], latest: str) -> None:
        """``<hive table>_current``: the latest snapshot's keys Delta does not hold, plus Delta's live rows."""
        path = self.config.storage.table_path(table)
        snapshot_cols = ", ".join(f"s.{C.quote(c)}" for c in columns)
        if not DeltaTable.isDeltaTable(self.spark, path):
            body = f"SELECT {snapshot_cols} FROM {name} s WHERE s.dt = '{latest}'"
        else:
            delta_names = {c.lower() for c in self.spark.read.format("delta").load(path).columns}
            delta_cols = ", ".join(
                f"CAST(d.{C.quote(c)} AS {t})" if c.lower() in delta_names else f"CAST(NULL AS {t})"
                for c, t in ((f.name, f.dataType.simpleString()) for f in self.spark.table(name).schema.fields)
                if c in columns
            )
            match = " AND ".join(f"k.{C.quote(k)} = s.{C.quote(k)}" for k in table.key)
            source = C.delta_path_identifier(path)
            body = (
                f"SELECT {delta_cols} FROM {source} d WHERE NOT d.{C.DELETED}\n"
                f"UNION ALL\nSELECT {snapshot_cols} FROM {name} s WHERE s.dt = '{latest}'\n"
                f"  AND NOT EXISTS (SELECT 1 FROM {source} k WHERE {match})"
            )
        self.spark.sql(f"CREATE OR REPLACE VIEW {name}_current AS\n{body}")


def run_snapshot(
    spark: SparkSession,
    config: AppConfig,
    day: dt.date,
    kafka_positions: KafkaPositions,
    *,
    from_stock: bool = False,
    wait_minutes: float | None = None,
    clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.timezone.utc),
) -> SnapshotReport:
    """Check readiness, then publish ``day`` for every snapshot table; writes the JSON report."""
    started = time.monotonic()
    snap = config.snapshot
    cutoff = cutoff_for(day, snap.time_zone)
    wait_s = 60 * (snap.wait_minutes if wait_minutes is None else wait_minutes)
    with exclusive_lock(lock_path(config), stale_after_s=12 * 3600, what="snapshot"):
        readiness, commits = wait_until_ready(spark, config, cutoff, kafka_positions, wait_s, clock)
        run_id = f"{clock().strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"
        run = _Run(spark, config, day.isoformat(), run_id, readiness, commits, from_stock)
        tables = [t for t in (run.publish(table) for table in config.snapshot_tables()) if t is not None]
    report = SnapshotReport(
        date=day.isoformat(),
        run_id=run_id,
        cutoff=cutoff.isoformat(),
        batch_id=readiness.batch_id,
        positions=readiness.positions,
        idle_partitions=readiness.idle,
        tables=tables,
        duration_s=round(time.monotonic() - started, 2),
    )
    write_report(
        config.under_root(snap.report_dir, "_cdc_snapshot_reports"), f"snapshot-{day}-{run_id}", asdict(report)
    )
    return report
