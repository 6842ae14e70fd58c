"""End to end with real components only: MariaDB -> Debezium (Kafka Connect) -> Kafka -> cdc-delta stream
-> Delta -> nightly snapshot. The lake must equal ``SELECT *`` of MariaDB column by column, with the
column types docs/design.md promises (masked columns masked as Debezium masks them), after the connector's
snapshot, after a binlog workload of every kind of change, through kill -9 of the stream and a restart of
the Connect worker, and in the snapshot."""

from __future__ import annotations

import datetime as dt
import json
import random
import time
import zoneinfo
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.changelog.status import pending_changes
from cdc_delta.changelog.table_index import indexed
from cdc_delta.config import FreshViewsConfig, load_config
from cdc_delta.consistency.read import consistent_point, taken_by
from cdc_delta.delta.tables import STOPPED_REASON_PROPERTY
from cdc_delta.history.append import history_path
from cdc_delta.history.check import check_history
from cdc_delta.history.versions import read_versions
from cdc_delta.rows.as_of import live_rows
from cdc_delta.snapshot import hive_publish
from cdc_delta.snapshot.positions import kafka_positions_of
from cdc_delta.snapshot.readiness import cutoff_for
from cdc_delta.snapshot.run import run_snapshot
from cdc_delta.views import fresh
from tests.e2e.pipeline import Pipeline, noon_zone
from tests.e2e.workload import (
    HISTORY_AT,
    HISTORY_ROW,
    archived_rows,
    binlog_steps,
    deleted_keys,
    history_steps,
    setup_sql,
)
from tests.services import ConnectWorker, MariaDB, StreamProcess, caught_up_here, cdc_delta_here, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def assert_lake_equals_source(spark: SparkSession, pipe: Pipeline, config: Path, after: str) -> None:
    """Every table's live rows equal ``SELECT *`` column by column, with the promised types; nothing is
    dead-lettered; the table whose column name Delta cannot store is stopped, its changes pending."""
    problems = []
    for table in pipe.tables():
        if table.name == f"{pipe.db}.odd":
            continue
        comparison = pipe.compare_table(table, pipe.live_rows(spark, config, table))
        if not comparison.equal:
            problems.append(comparison.describe())
    assert not problems, f"after {after}, the lake differs from MariaDB:\n" + "\n".join(problems)
    cfg = load_config(config, env={})
    assert not DeltaTable.isDeltaTable(spark, cfg.storage.dead_letters), "something was dead-lettered"
    odd = indexed(spark, cfg).table(f"{pipe.db}.odd")
    properties = DeltaTable.forPath(spark, cfg.storage.table_path(odd)).detail().first()["properties"]
    assert "column 'weird name' has characters a Delta column name cannot hold" in properties[STOPPED_REASON_PROPERTY]
    assert pending_changes(cfg, {odd.name: -1})[odd.name]["pending"] > 0


def assert_history_follows_the_source(spark: SparkSession, pipe: Pipeline, config: Path) -> None:
    """The plain row updated five times has six versions (its snapshot read, then one per update), each
    opened at its update's source time and closed at the next; every table's current versions are its
    live rows."""
    cfg = load_config(config, env={})
    catalog = indexed(spark, cfg)
    plain = catalog.table(f"{pipe.db}.plain")
    assert plain.history is not None
    found = read_versions(spark, history_path(cfg, plain.name), plain.row_key, plain.history)
    row = found.where(F.col("id") == HISTORY_ROW).orderBy("_cdc_valid_from_seq")
    got = [
        (str(r["amount"]), r["op"], r["start"], r["end"])
        for r in row.select(
            "amount",
            F.col(C.OP).alias("op"),
            F.unix_seconds("_cdc_valid_from").alias("start"),
            F.unix_seconds("_cdc_valid_to").alias("end"),
        ).collect()
    ]
    assert len(got) == 6 and got[0][1] == "r", got
    assert got[0][3] == HISTORY_AT[0], got
    assert [g[0] for g in got[1:]] == [f"{k}.00" for k in range(1, 6)], got
    assert [g[2] for g in got[1:]] == list(HISTORY_AT), got
    assert [g[3] for g in got[1:]] == [*HISTORY_AT[1:], None], got
    checks = check_history(spark, cfg, catalog.tables())
    assert len(checks) > 5 and all(c.ok for c in checks), "\n".join(c.line() for c in checks)


def assert_every_transaction_landed_whole(spark: SparkSession, pipe: Pipeline, config: Path) -> None:
    """With transaction metadata on: every binlog change landed with its transaction; every END the
    connector wrote landed, its count per table the lake takes equal to the distinct changes landed; and
    once caught up, the consistent point is the newest END, nothing waiting."""
    cfg = load_config(config, env={})
    landed = spark.read.format("delta").load(cfg.changelog.located(cfg.storage.root))
    # Binlog row changes: c, u, d and the purge's deletes landed archived (not reads, truncates or ENDs).
    binlog = landed.where((F.col("seq.phase") == 1) & ~F.col("op").isin("r", "t", "x") & (F.col("seq.row") >= 0))
    assert binlog.where(F.col("txn").isNull()).count() == 0
    changes = (
        binlog.groupBy(F.col("txn.id").alias("id"), F.concat_ws(".", "source_db", "source_table").alias("collection"))
        .agg(F.count_distinct("txn.total_order").alias("landed"))
        .collect()
    )
    have = {(r["id"], r["collection"]): r["landed"] for r in changes}
    ends = landed.where(F.col("op") == "x").select("txn.id", "topic", "offset", "row_json").collect()
    assert len({r["id"] for r in ends}) >= 10  # the workload's transactions
    taken = taken_by(cfg)
    short = [
        (r["id"], collection, have.get((r["id"], collection), 0), n)
        for r in ends
        for collection, n in json.loads(r["row_json"]).items()
        if taken(r["topic"].removesuffix(".transaction"), collection) and have.get((r["id"], collection), 0) != n
    ]
    assert short == []
    assert {txn for txn, _ in have} <= {r["id"] for r in ends}  # every transaction with changes has its END
    found = consistent_point(cfg)
    newest = max(ends, key=lambda r: r["offset"])
    assert found.unavailable is None and found.waiting is None and found.ends_after == 0, found.line()
    assert found.point is not None and found.point.txn_id == newest["id"], found.line()


def assert_live_views_equal_source(spark: SparkSession, pipe: Pipeline, config: Path) -> None:
    """Every table's live view (its merged rows overridden by the changes pending in the changelog)
    equals ``SELECT *`` column by column, with the promised types, where the Delta tables themselves
    differ from it: the changes are visible before they are merged."""
    cfg = load_config(config, env={})
    catalog = indexed(spark, cfg)
    tables = [t for t in pipe.tables() if t.name != f"{pipe.db}.odd"]
    live = live_rows(spark, cfg, [catalog.table(t.name) for t in tables])
    problems, behind = [], []
    for table in tables:
        rows = live.get(table.name)
        if rows is not None:
            business = [C.quote(f.name) for f in rows.schema.fields if not f.name.startswith(C.PREFIX)]
            rows = rows.where(~F.col(C.DELETED)).select(*business, *(C.SHARD_KEY if table.sharded else ()))
        comparison = pipe.compare_table(table, rows)
        if not comparison.equal:
            problems.append(comparison.describe())
        if not pipe.compare_table(table, pipe.live_rows(spark, config, table)).equal:
            behind.append(table.name)
    assert not problems, "the live views differ from MariaDB while merges lag:\n" + "\n".join(problems)
    lagging = {f"{pipe.db}.{t}" for t in ("plain", "items", "wide", "marker")}  # changed and altered since
    assert lagging <= set(behind), f"the Delta tables were merged already (only {behind} behind)"


def assert_fresh_views_follow_source(spark: SparkSession, pipe: Pipeline, config: Path) -> None:
    """The fresh views (the metastore's, SQL text, registered now) equal ``SELECT *`` where their text can
    type every change pending for their table, among them the table of every MySQL type (Debezium's images
    made canonical by the Hive function); elsewhere (a column added, a key widened, a truncate pending)
    they equal the Delta table as merged: stale, never wrong."""
    cfg = load_config(config, env={}).model_copy(update={"fresh_views": FreshViewsConfig(database="fresh_e2e")})
    views = {v.table: v for v in fresh.register(spark, cfg)}
    current, stale = set(), set()
    for table in pipe.tables():
        view = views.get(table.name)
        if table.name == f"{pipe.db}.odd" or view is None:
            continue
        rows = spark.table(view.view)
        business = [C.quote(f.name) for f in rows.schema.fields if not f.name.startswith(C.PREFIX)]
        rows = rows.select(*business, *(C.SHARD_KEY if table.sharded else ()))
        if pipe.compare_table(table, rows).equal:
            current.add(table.name)
            continue
        merged = pipe.live_rows(spark, config, table)
        assert merged is not None and sorted(merged.columns) == sorted(rows.columns), table.name
        merged = merged.select(*rows.columns)
        assert rows.exceptAll(merged).isEmpty() and merged.exceptAll(rows).isEmpty(), f"{view.view} is wrong"
        stale.add(table.name)
    assert f"{pipe.db}.wide" in current and f"{pipe.db}_archive.items" in current, (current, stale)
    assert stale <= {f"{pipe.db}.{t}" for t in ("plain", "items", "orders")}, (current, stale)


def assert_deleted_keys_are_soft_deleted(spark: SparkSession, pipe: Pipeline, config: Path) -> None:
    """The workload's deletes are soft-deleted; with archival deletes, its purge is kept, archived."""
    expected = deleted_keys(pipe.db, archival=pipe.archival is not None).deleted
    archived = {t: {(r["id"],) for r in rows} for t, rows in (pipe.archived or {}).items()}
    for table in pipe.tables():
        if table.name in expected:
            assert pipe.deleted_keys(spark, config, table) == expected[table.name], table.name
            assert pipe.archived_keys(spark, config, table) == archived.get(table.name, set()), table.name


def start_pipeline(
    tmp_path: Path, db: str, kafka: str, mariadb: MariaDB, connect: ConnectWorker, **kw: object
) -> Pipeline:
    pipe = Pipeline(db, tmp_path, kafka, mariadb, connect, **kw)  # type: ignore[arg-type]
    pipe.sql(setup_sql(db))
    pipe.register()
    pipe.mark(1)  # the connector's snapshot is all in Kafka
    return pipe


def test_mariadb_to_delta_equals_select_star_then_the_nightly_snapshot_does_too(
    spark: SparkSession, kafka_bootstrap: str, mariadb: MariaDB, connect_worker: ConnectWorker, tmp_path: Path
) -> None:
    pipe = start_pipeline(
        tmp_path,
        "e2e",
        kafka_bootstrap,
        mariadb,
        connect_worker,
        server_id=5401,
        extra_connector_settings={"provide.transaction.metadata": "true", "heartbeat.interval.ms": "1000"},
        masks={"name": "hash", "note": "truncate 6"},  # plain's: hashed and cut by Debezium, checked at start
        archival={"min_rows": 6},  # the workload's purge of items kept; its DELETE of 5 plain rows is not one
        history=True,
    )
    zone = noon_zone()
    config = pipe.write_config(time_zone=zone)
    # The stream runs in the tests' JVM (caught_up_here); the next test runs and kills it as a process.
    log = caught_up_here(config, f"{pipe.db}.odd")  # its column name: stopped, its changes pending
    assert_lake_equals_source(spark, pipe, config, "the connector's snapshot")

    for step in binlog_steps(pipe.db):
        pipe.sql(step)
    pipe.sql(history_steps(pipe.db))
    pipe.archived = archived_rows(pipe.db)  # the lake keeps what the last step purged
    pipe.mark(2)
    # Landed and not merged (the same lake and checkpoint, the merger not run): the live views equal
    # MariaDB while the Delta tables still hold the connector's snapshot.
    landing_only = pipe.write_config(time_zone=zone, merge={"in_stream": False}, name="cdc-landing-only.yaml")
    log += caught_up_here(landing_only)
    assert_live_views_equal_source(spark, pipe, landing_only)
    assert_fresh_views_follow_source(spark, pipe, landing_only)
    log += caught_up_here(config, f"{pipe.db}.odd")
    assert_lake_equals_source(spark, pipe, config, "the binlog workload")
    assert_deleted_keys_are_soft_deleted(spark, pipe, config)
    assert_history_follows_the_source(spark, pipe, config)
    assert_every_transaction_landed_whole(spark, pipe, config)
    assert "Traceback" not in log, log[-3000:]

    # The nightly snapshot of today, run after midnight (the clock), every partition quiet since: the
    # connector paused (no more heartbeats), the stream caught up with what it wrote before.
    pipe.client().pause(pipe.connector)
    time.sleep(3)
    caught_up_here(config, f"{pipe.db}.odd")
    cfg = load_config(config, env={})
    catalog = indexed(spark, cfg)
    day = dt.datetime.now(zoneinfo.ZoneInfo(zone)).date()
    after_midnight = cutoff_for(day, zone) + dt.timedelta(hours=1)
    report = run_snapshot(spark, cfg, day, kafka_positions_of(cfg), clock=lambda: after_midnight)
    assert {t.table for t in report.tables} == set(cfg.snapshot.tables)
    problems = []
    for table in pipe.tables():
        if table.name not in cfg.snapshot.tables:
            continue
        hive = spark.table(hive_publish.hive_table(cfg, catalog.table(table.name)))
        published = hive.where(F.col("dt") == day.isoformat()).drop("dt")
        comparison = pipe.compare_table(table, published)
        if not comparison.equal:
            problems.append(comparison.describe())
    assert not problems, "the nightly snapshot differs from MariaDB:\n" + "\n".join(problems)


def test_exact_through_two_kill_9_of_the_stream_and_a_restart_of_connect(
    spark: SparkSession, kafka_bootstrap: str, mariadb: MariaDB, connect_worker: ConnectWorker, tmp_path: Path
) -> None:
    pipe = start_pipeline(tmp_path, "k9", kafka_bootstrap, mariadb, connect_worker, server_id=5402)
    config = pipe.write_config()
    stream = StreamProcess(config, tmp_path / "stream.log")
    rng = random.Random(13)
    steps = binlog_steps(pipe.db)

    def kill_after_a_batch(run: int) -> None:
        """kill -9 at a random moment after the run's first batch: mid-batch or between batches."""
        done = len(stream.batch_lines())
        wait_for(lambda: len(stream.batch_lines()) > done, 240, f"a batch of run {run}")
        time.sleep(rng.uniform(0, 3))
        stream.kill9()

    stream.start()
    pipe.sql(steps[0])
    kill_after_a_batch(1)

    stream.start()
    connect_worker.stop()  # mid-way: the connector resumes from its committed offsets
    connect_worker.start()
    pipe.sql(steps[1])
    pipe.mark(2)
    kill_after_a_batch(2)
    assert stream.proc is not None and stream.proc.returncode == -9

    pipe.sql(steps[2])
    pipe.mark(3)
    caught_up_here(config, f"{pipe.db}.odd")  # its column name: stopped, its changes pending
    assert_lake_equals_source(spark, pipe, config, "two kill -9 and a Connect restart")
    assert_deleted_keys_are_soft_deleted(spark, pipe, config)

    # cdc-delta check, the source probes, agree table by table (made tables compared with their source
    # tables, read in Kafka from their own topics); a row lost from one Delta table fails it alone.
    checked = [f"{pipe.db}.wide", f"{pipe.db}.plain", f"{pipe.db}_archive.items"]
    options = [option for name in checked for option in ("--table", name)]
    run = cdc_delta_here(config, "check", *options)
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    assert [line.split(":")[0] for line in run.stdout.splitlines()[:3]] == [f"ok      {n}" for n in checked], run.stdout
    plain = load_config(config, env={}).table_path(f"{pipe.db}.plain")
    DeltaTable.forPath(spark, plain).delete("id = 1 AND NOT _cdc_deleted")
    run = cdc_delta_here(config, "check", *options)
    assert run.returncode == 1, run.stdout + run.stderr[-2000:]
    failed = [line for line in run.stdout.splitlines() if not line.startswith("ok ")]
    assert len(failed) == 1 and failed[0].startswith(f"FAILED  {pipe.db}.plain: "), run.stdout
    assert "(-1)" in failed[0], failed[0]
    assert f'(repair: cdc-delta resnapshot --table {pipe.db}.plain --where "id BETWEEN 1 AND ' in failed[0], failed[0]
