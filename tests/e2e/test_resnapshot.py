"""Repairing a running replica with real components: MariaDB -> Debezium 3.5 (Kafka Connect) -> Kafka ->
``cdc-delta stream`` (a process, running throughout) -> Delta. A replicated table is damaged in Delta
(values changed, rows deleted, rows soft-deleted, rows the source never had) while writes to the source
go on; ``cdc-delta resnapshot`` has Debezium read it again (an incremental snapshot, then a blocking one
limited by ``--where``), and the table equals ``SELECT *`` (types and values), the rows the source lacks
soft-deleted with ``--delete-missing``, the other table untouched. Bad requests are refused in one line
with nothing sent. A column masked after the fact is refused at start until the connector masks it, its
unmasked changes dead-lettered masked, and a re-snapshot brings the rows masked."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition
from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.config import load_config
from cdc_delta.connect.files import ConnectorFile
from cdc_delta.connect.masking_settings import with_masking
from cdc_delta.retry import retry_on_conflict
from tests.e2e.pipeline import LakeTable, Pipeline
from tests.e2e.writer import BackgroundWriter
from tests.services import ConnectWorker, MariaDB, StreamProcess, cdc_delta, cdc_delta_here, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def lake_table(db: str, name: str) -> LakeTable:
    return LakeTable(f"{db}.{name}", ((db, name),))


def setup_sql(db: str) -> list[str]:
    orders = ", ".join(f"({i}, {i}.{i % 100:02d}, 'new', 'order {i}')" for i in range(1, 301))
    customers = ", ".join(f"({i}, 'customer {i}')" for i in range(1, 51))
    return [
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.orders (id INT PRIMARY KEY, amount DECIMAL(10,2) NOT NULL, status VARCHAR(20), note TEXT)",
        f"INSERT INTO {db}.orders VALUES {orders}",
        f"CREATE TABLE {db}.customers (id INT PRIMARY KEY, name VARCHAR(50))",
        f"INSERT INTO {db}.customers VALUES {customers}",
        f"CREATE TABLE {db}.nopk (id INT, name VARCHAR(20))",
        f"INSERT INTO {db}.nopk VALUES (1, 'a')",
        f"CREATE TABLE {db}.marker (id INT PRIMARY KEY)",
        f"CREATE TABLE {db}.late (id INT PRIMARY KEY, name VARCHAR(20))",
        f"INSERT INTO {db}.late VALUES (1, 'there before'), (2, 'its capture')",
        f"CREATE TABLE {db}.debezium_signal (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL,"
        " data VARCHAR(2048))",
        f"GRANT INSERT, DELETE ON {db}.debezium_signal TO 'cdc'@'%'",
    ]


def write_config(pipe: Pipeline) -> Path:
    db = pipe.db
    data: dict[str, Any] = {
        "app_id": f"e2e-{db}",
        "kafka": {
            "bootstrap_servers": pipe.kafka,
            "topic_pattern": rf"^{pipe.prefix}(\..*)?$",
            "starting_offsets": "earliest",
        },
        "spark": {"master": "local[2]", "shuffle_partitions": 2, "conf": {"spark.ui.enabled": "false"}},
        "storage": {"root": str(pipe.folder / "lake")},
        "trigger_interval": "1 second",
        "merge": {"max_delay_seconds": 2},
        "connect": {"url": pipe.connect.url},
        "source": {
            "port": pipe.mariadb.port,
            "user": "cdc",
            "password_file": str(pipe.source_password()),
            "check": {"settle_seconds": 0, "wait_seconds": 60, "attempts": 1},
        },
        "repair": {"wait_seconds": 300, "settle_seconds": 1},
        "tables": [
            {"name": "{db}.{table}", "topic_pattern": rf"{pipe.prefix}\.{db}\.[^.]+"},
            {"name": f"{db}.nopk", "topics": [pipe.topic(db, "nopk")], "key": ["id"]},
        ],
    }
    path = pipe.folder / "cdc.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


class Writer(BackgroundWriter):
    """Writes to the source's orders the whole time: updates, inserts, deletes, a few a second."""

    def __init__(self, pipe: Pipeline) -> None:
        super().__init__(pipe, seed=7, pause=0.1)
        self.next_id = 1000

    def write(self, conn: Any, cur: Any) -> None:
        db = self.pipe.db
        kind, key = self.rng.random(), self.rng.randint(1, 300)
        if kind < 0.7:
            cur.execute(f"UPDATE {db}.orders SET amount = amount + 1, status = 'paid' WHERE id = {key}")
        elif kind < 0.9:
            self.next_id += 1
            cur.execute(f"INSERT INTO {db}.orders VALUES ({self.next_id}, 9.99, 'new', 'written meanwhile')")
        else:
            cur.execute(f"DELETE FROM {db}.orders WHERE id = {key}")


def damage(spark: SparkSession, path: str) -> None:
    """Values changed (1-5), rows deleted (6-10), rows soft-deleted (11-15), rows the source never had
    (100001-100003, copies of rows 16-18 with their ordering keys): beside the running stream."""
    table = DeltaTable.forPath(spark, path)

    def go() -> None:
        table.update("id BETWEEN 1 AND 5", {"amount": F.lit(-1).cast("decimal(10,2)"), "note": F.lit("drifted")})
        table.delete("id BETWEEN 6 AND 10")
        table.update("id BETWEEN 11 AND 15", {C.DELETED: F.lit(True)})
        extra = spark.read.format("delta").load(path).where("id BETWEEN 16 AND 18 AND NOT _cdc_deleted")
        extra.withColumn("id", F.col("id") + 99985).write.format("delta").mode("append").save(path)

    retry_on_conflict(go, "damaging the table beside the stream", attempts=10)


@contextmanager
def running(
    db: str, server_id: int, kafka_bootstrap: str, mariadb: MariaDB, connect_worker: ConnectWorker, tmp_path: Path
) -> Iterator[tuple[Pipeline, Path, StreamProcess]]:
    """A source database ``db`` captured by its connector, and the stream running on it."""
    pipe = Pipeline(
        db,
        tmp_path,
        kafka_bootstrap,
        mariadb,
        connect_worker,
        server_id=server_id,
        extra_connector_settings={
            "signal.data.collection": f"{db}.debezium_signal",
            "database.include.list": db,
            "table.exclude.list": rf"{db}\.late",  # captured later, by a change of the connector's config
        },
    )
    pipe.sql(setup_sql(db))
    pipe.register()
    pipe.mark(1)
    config = write_config(pipe)
    stream = StreamProcess(config, tmp_path / "stream.log")
    stream.start()
    try:
        yield pipe, config, stream
    finally:
        if stream.proc is not None and stream.proc.poll() is None:
            stream.kill9()


def source_orders(pipe: Pipeline, aggregate: str, condition: str) -> int:
    """``aggregate`` (``MIN(id)``, ``COUNT(*)``) over the source's orders that ``condition`` takes, now."""
    conn = pipe.mariadb.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT {aggregate} FROM {pipe.db}.orders WHERE {condition}")
            return int(cur.fetchone()[0])
    finally:
        conn.close()


def live_id(pipe: Pipeline, condition: str) -> int:
    """A key the source's orders hold now, taken by ``condition``."""
    return source_orders(pipe, "MIN(id)", condition)


def equal_now(spark: SparkSession, pipe: Pipeline, config: Path, table: LakeTable) -> bool:
    return pipe.compare_table(table, pipe.live_rows(spark, config, table)).equal


def caught_up(spark: SparkSession, pipe: Pipeline, config: Path, n: int, *tables: LakeTable) -> None:
    """Marker ``n`` through, then every table equal to the source; where they do not become equal, the
    failure says how each differs (a wait that only timed out once in CI could not be told from load)."""
    pipe.mark(n)
    try:
        wait_for(lambda: all(equal_now(spark, pipe, config, t) for t in tables), 180, "the lake to equal the source")
    except AssertionError as timed_out:
        found = [pipe.compare_table(t, pipe.live_rows(spark, config, t)) for t in tables]
        differ = "\n".join(c.describe() for c in found if not c.equal) or "(equal by now)"
        raise AssertionError(f"{timed_out}, after marker {n}:\n{differ}") from None


def resnapshot(config: Path, *args: str) -> tuple[int, str]:
    run = cdc_delta_here(config, "resnapshot", *args)
    return run.returncode, run.stdout + run.stderr


def test_a_running_replica_is_repaired_and_recovered_from_a_gap_with_the_real_connector(
    spark: SparkSession, kafka_bootstrap: str, mariadb: MariaDB, connect_worker: ConnectWorker, tmp_path: Path
) -> None:
    """One source database, its connector and the stream (one pipeline: its start is the costly part):
    bad requests refused, a damaged table repaired while the source is written, a gap in Kafka stopped
    and recovered, a table added to the capture later filled."""
    with running("rs1", 5411, kafka_bootstrap, mariadb, connect_worker, tmp_path) as (pipe, config, stream):
        refused(pipe, config)
        repaired(spark, pipe, config, stream)
        recovered_from_a_gap(spark, pipe, config, stream)
        masked_later(spark, pipe, config, stream)


def repaired(spark: SparkSession, pipe: Pipeline, config: Path, stream: StreamProcess) -> None:
    """A table damaged in Delta (values changed, rows deleted, soft-deleted, rows the source never had)
    while writes to the source go on: an incremental resnapshot makes it equal ``SELECT *``, the rows the
    source lacks soft-deleted, the other table untouched; a blocking one limited by --where repairs what
    it takes and leaves the rest; check names the repair of a table that differs, over the key range
    where it differs, and --repair runs it."""
    orders_table, customers_table = lake_table(pipe.db, "orders"), lake_table(pipe.db, "customers")
    caught_up(spark, pipe, config, 2, orders_table, customers_table)
    cfg = load_config(config, env={})
    orders, customers = cfg.table_path(orders_table.name), cfg.table_path(customers_table.name)
    customers_version = DeltaTable.forPath(spark, customers).history(1).first()["version"]

    with Writer(pipe) as writer:
        damage(spark, orders)
        time.sleep(2)
        code, out = resnapshot(config, "--table", orders_table.name, "--delete-missing")
        assert code == 0, out[-4000:]
        assert f"repaired {orders_table.name}: " in out and "soft-deleted 3 row(s) the source lacks" in out, out[-2000:]
        assert writer.writes > 0
    caught_up(spark, pipe, config, 3, orders_table, customers_table)
    assert DeltaTable.forPath(spark, customers).history(1).first()["version"] == customers_version

    # A blocking snapshot of part of the table: what --where takes is repaired, the rest left as it is.
    low, high = (live_id(pipe, condition) for condition in ("id <= 100", "id > 200"))
    table = DeltaTable.forPath(spark, orders)
    drift = f"id IN ({low}, {high})"
    retry_on_conflict(lambda: table.update(drift, {"note": F.lit("drifted again")}), "damaging the table", 10)
    code, out = resnapshot(config, "--table", orders_table.name, "--blocking", "--where", "id <= 100")
    assert code == 0, out[-4000:]
    notes = {r["id"]: r["note"] for r in spark.read.format("delta").load(orders).where(drift).collect()}
    assert notes[low] != "drifted again" and notes[high] == "drifted again", notes
    code, out = resnapshot(config, "--table", orders_table.name, "--where", "id > 200")
    assert code == 0, out[-4000:]
    caught_up(spark, pipe, config, 4, orders_table, customers_table)

    # check finds a table that differs, names its repair, and with --repair runs it.
    lost = live_id(pipe, "id > 0")
    retry_on_conflict(lambda: table.delete(f"id = {lost}"), "damaging the table", 10)
    run = cdc_delta_here(config, "check", "--table", orders_table.name)
    named = f'cdc-delta resnapshot --table {orders_table.name} --where "id BETWEEN {lost} AND '
    assert run.returncode == 1 and named in run.stdout, run.stdout  # the range the row was lost from
    run = cdc_delta_here(config, "check", "--table", orders_table.name, "--repair")
    assert run.returncode == 0 and f"repaired {orders_table.name}: " in run.stdout, run.stdout + run.stderr[-3000:]
    assert f'--where "id BETWEEN {lost} AND ' in run.stdout, run.stdout
    caught_up(spark, pipe, config, 5, orders_table, customers_table)
    log = stream.log.read_text(errors="replace")
    assert "Traceback" not in log
    # The signal table's rows (the incremental snapshots' watermarks) were skipped, never a table.
    assert not DeltaTable.isDeltaTable(spark, cfg.table_path(f"{pipe.db}.debezium_signal"))
    assert "signal table" in log


def refused(pipe: Pipeline, config: Path) -> None:
    """Bad requests: one line each naming the fix, exit 2, and nothing sent to the connector."""
    db = pipe.db
    orders = f"{db}.orders"
    refusals = {
        ("--table", f"{db}.nowhere"): f"the source database has no table {db}.nowhere",
        ("--table", "elsewhere.x"): "no connector on",
        ("--table", orders, "--where", "id >>> 3"): f"--where 'id >>> 3' does not work on {orders}",
        ("--table", orders, "--where", f"id = 1; DROP TABLE {orders}"): "must be one SQL condition",
        ("--table", f"{db}.nopk"): f"{db}.nopk has no primary key, which an incremental snapshot reads by",
        ("--table", orders, "--connector", "nobody"): "no connector 'nobody'",
    }
    for args, message in refusals.items():
        code, out = resnapshot(config, *args)
        errors = [line for line in out.splitlines() if line.startswith("cdc-delta: error:")]
        assert code == 2 and len(errors) == 1 and message in errors[0], (args, out[-2000:])
        assert "Traceback" not in out
    assert signals_sent(pipe) == 0


def signals_sent(pipe: Pipeline) -> int:
    """Records on the connector's Kafka signal topic (0 where it was never made)."""
    topic = f"{pipe.prefix}-signal"
    consumer = Consumer({"bootstrap.servers": pipe.kafka, "group.id": "signals-sent", "log_level": 0})
    try:
        if topic not in consumer.list_topics(timeout=10).topics:
            return 0
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        consumer.close()


def recovered_from_a_gap(spark: SparkSession, pipe: Pipeline, config: Path, stream: StreamProcess) -> None:
    """Changes deleted from Kafka before the stream read them: the stream stops in one line (exit 2),
    status shows the gap, accept-gap moves past it on the record and has the table read again, the stream
    applies what came after, and resnapshot follows that read until merged: the table equals the source
    again; a table added to the capture later is filled by a re-snapshot too, and a connector whose only
    channel is its signal table is signalled through it."""
    orders = lake_table(pipe.db, "orders")
    assert stream.proc is not None
    refused = cdc_delta(config, "accept-gap", timeout=120)  # the running stream holds the checkpoint it moves
    assert refused.returncode == 2 and f"a stream of app e2e-{pipe.db} already runs" in refused.stderr, refused.stderr
    assert f"stream pid {stream.proc.pid} on " in refused.stderr
    stream.proc.terminate()
    assert stream.proc.wait(timeout=120) == 0
    pipe.sql(
        [
            f"UPDATE {pipe.db}.orders SET note = 'lost' WHERE id <= 20",
            f"DELETE FROM {pipe.db}.orders WHERE id BETWEEN 21 AND 25",
        ]
    )
    pipe.mark(6)  # in Kafka: then gone
    topic = pipe.topic(pipe.db, "orders")
    lose_records(pipe.kafka, topic)
    pipe.sql([f"UPDATE {pipe.db}.orders SET note = 'after the gap' WHERE id BETWEEN 30 AND 35"])

    stopped = cdc_delta_here(config, "stream", "--until-caught-up")  # in the tests' JVM: no start to pay
    errors = [line for line in stopped.stderr.splitlines() if line.startswith("cdc-delta: error:")]
    assert stopped.returncode == 2 and len(errors) == 1, stopped.stderr[-3000:]
    assert f"{topic}[0] offsets " in errors[0] and f"of {orders.name} in them are lost" in errors[0], errors
    assert f"cdc-delta accept-gap --config {config}" in errors[0] and "Traceback" not in stopped.stderr
    status = cdc_delta(config, "status")
    assert status.returncode == 1 and f"gap: {topic}[0] offsets " in status.stdout, status.stdout[-2000:]

    sent = signals_sent(pipe)
    accepted = cdc_delta_here(config, "accept-gap")
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr[-3000:]
    assert (
        f"accepted: {topic}[0] offsets " in accepted.stdout and f"re-snapshot needed: {orders.name}" in accepted.stdout
    )
    # Where the connector takes signals, accept-gap has the table read again itself, the stream stopped.
    assert f"read again: {orders.name}: " in accepted.stdout and signals_sent(pipe) == sent + 1, accepted.stdout
    status = cdc_delta(config, "status")
    assert status.returncode == 1 and f"re-snapshot needed: {orders.name}: " in status.stdout, status.stdout
    assert "accept-gap had it read again" in status.stdout and "gap: " not in status.stdout, status.stdout

    stream.start()
    wait_for(lambda: after_the_gap_applied(spark, pipe, config), 180, "the changes after the gap")
    code, out = resnapshot(config, "--table", orders.name, "--delete-missing")
    assert code == 0, out[-4000:]
    # It followed accept-gap's re-snapshot to its end (no second read); the deletes lost are soft-deleted.
    assert "following it, not reading again" in out and signals_sent(pipe) == sent + 1, out[-3000:]
    caught_up(spark, pipe, config, 7, orders)
    status = cdc_delta(config, "status")
    assert status.returncode == 0, status.stdout[-2000:]

    # A table added to the capture later: its rows from before come by a re-snapshot of it alone.
    client = pipe.client()
    settings = client.config(pipe.connector) or {}
    client.put_config(pipe.connector, {k: v for k, v in settings.items() if k != "table.exclude.list"})
    time.sleep(5)  # the connector restarts with its new config
    wait_for(lambda: connector_running(client, pipe.connector), 120, "the connector restarted")
    late = lake_table(pipe.db, "late")
    code, out = resnapshot(config, "--table", late.name)
    assert code == 0, out[-4000:]
    caught_up(spark, pipe, config, 8, orders, late)

    # The signal table as the connector's only channel: the signal goes in by an INSERT through source:.
    settings = client.config(pipe.connector) or {}
    client.put_config(pipe.connector, {**settings, "signal.enabled.channels": "source"})
    time.sleep(5)
    wait_for(lambda: connector_running(client, pipe.connector), 120, "the connector restarted")
    customers = lake_table(pipe.db, "customers")
    path = load_config(config, env={}).table_path(customers.name)
    drift = DeltaTable.forPath(spark, path)
    retry_on_conflict(lambda: drift.update("id = 7", {"name": F.lit("drifted")}), "damaging the table", 10)
    sent = signals_sent(pipe)
    code, out = resnapshot(config, "--table", customers.name)
    assert code == 0 and f"on its signal table {pipe.db}.debezium_signal" in out, out[-4000:]
    assert signals_sent(pipe) == sent  # nothing on the Kafka channel
    caught_up(spark, pipe, config, 9, orders, late, customers)


def masked_later(spark: SparkSession, pipe: Pipeline, config: Path, stream: StreamProcess) -> None:
    """A column masked after the fact: with ``mask:`` in the config and the connector not masking yet, the
    stream refuses to start in one line; once ``connectors apply`` has the connector mask it, the stream
    starts, the changes that arrived unmasked meanwhile are dead letters keeping it masked, and a
    re-snapshot brings the table's rows masked, as Debezium masks them."""
    assert stream.proc is not None
    stream.proc.terminate()
    assert stream.proc.wait(timeout=120) == 0
    pipe.masks = {"name": "hash"}  # customers' (and late's): the pattern entry's tables that have it
    data = yaml.safe_load(config.read_text())
    data["tables"][0].update(source_database=pipe.db, source_table="[^.]+", mask=pipe.masks)
    data["masking"] = {"password_file": str(pipe.salt_file())}
    config.write_text(yaml.safe_dump(data))
    pipe.sql([f"UPDATE {pipe.db}.customers SET name = 'renamed while unmasked' WHERE id = 3"])

    stopped = cdc_delta_here(config, "stream", "--until-caught-up")
    errors = [line for line in stopped.stderr.splitlines() if line.startswith("cdc-delta: error:")]
    assert stopped.returncode == 2 and len(errors) == 1 and "Traceback" not in stopped.stderr, stopped.stderr[-3000:]
    assert "column name arrives without Debezium's masked parameter" in errors[0], errors
    assert f"no connector masks it. Run `cdc-delta connectors apply --config {config}`" in errors[0], errors

    client = pipe.client()
    current = ConnectorFile(pipe.connector, client.config(pipe.connector) or {}, "test")
    masked, _ = with_masking(current, load_config(config))
    client.put_config(pipe.connector, masked.config)
    time.sleep(5)
    wait_for(lambda: connector_running(client, pipe.connector), 120, "the connector restarted")
    stream.start()
    customers = lake_table(pipe.db, "customers")
    code, out = resnapshot(config, "--table", customers.name)
    assert code == 0, out[-4000:]
    caught_up(spark, pipe, config, 10, customers)  # its names hashed by Debezium (compare_table masks them)
    log = stream.log.read_text(errors="replace")
    assert "and a connector masks it now: the changes that arrived unmasked are dead-lettered" in log, log[-3000:]
    letters = (
        spark.read.format("delta")
        .load(load_config(config).storage.dead_letters)
        .where(F.col("table") == customers.name)
    )
    values = [bytes(r["value"]).decode() for r in letters.collect()]
    salt = pipe.salt_file().read_text().strip()
    # The dead letter's hash is whole: Debezium cuts it to the column's length (50), which the schema lacks.
    hashed = hashlib.sha256(f"{salt}renamed while unmasked".encode()).hexdigest()
    assert values and all("renamed while unmasked" not in v and "customer " not in v for v in values), values
    assert any(hashed in v for v in values), values


def connector_running(client: Any, name: str) -> bool:
    state = client.status(name)
    return state.state == "RUNNING" and bool(state.tasks) and all(t.state == "RUNNING" for t in state.tasks)


def lose_records(bootstrap: str, topic: str) -> None:
    """Delete every record of ``topic`` (Kafka's retention, at once)."""
    from confluent_kafka.admin import AdminClient

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lose", "log_level": 0})
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, end)]).values():
        future.result(30)


def after_the_gap_applied(spark: SparkSession, pipe: Pipeline, config: Path) -> bool:
    rows = pipe.live_rows(spark, config, lake_table(pipe.db, "orders"))
    after = "note = 'after the gap'"
    return rows is not None and rows.where(after).count() == source_orders(pipe, "COUNT(*)", after)
