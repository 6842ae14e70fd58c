"""Reads consistent across tables, with real components: MariaDB -> Debezium 3.5 (the project's connector
file, transaction metadata on) -> Kafka -> ``cdc-delta stream`` (a process, running throughout, a few
records a batch so that landings cut transactions and merges go past them) -> Delta.

A writer moves amounts from accounts to the ledger and opens accounts with a ledger row, each in one
transaction over two tables, and inserts into a third table on its own, the whole time. While it runs,
every read at the consistent point keeps the invariants (balances plus ledger amounts constant, every
ledger row's account present), and plain reads of the same tables, in the same test, break them at least
once: the property is needed, not only held. Once the writer stops, the point reaches the source's last
transaction, and a read there equals ``SELECT *``.

The writer's session clock (``SET TIMESTAMP``, which the binlog and so Debezium take) crosses a midnight
while it writes: the nightly snapshot of the day before it cuts every table at the writer's last
transaction before that midnight, exactly."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc_delta.changelog.table_index import indexed_without_spark
from cdc_delta.config import AppConfig, load_config
from cdc_delta.consistency.cut import consistent_cut
from cdc_delta.consistency.read import consistent_point
from cdc_delta.rows.as_of import live_rows
from cdc_delta.snapshot import hive_publish
from cdc_delta.snapshot.positions import kafka_positions_of
from cdc_delta.snapshot.readiness import cutoff_for
from cdc_delta.snapshot.run import run_snapshot
from tests.e2e.pipeline import Pipeline
from tests.e2e.writer import BackgroundWriter
from tests.services import ConnectWorker, MariaDB, StreamProcess, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.spark]

DB = "tx"
ACCOUNTS = 20
OPENING = 1_000
TOTAL = ACCOUNTS * OPENING


def setup_sql(db: str) -> list[str]:
    opening = ", ".join(f"({i}, {OPENING})" for i in range(1, ACCOUNTS + 1))
    return [
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL)",
        f"INSERT INTO {db}.accounts VALUES {opening}",
        f"CREATE TABLE {db}.ledger (id INT AUTO_INCREMENT PRIMARY KEY, account_id INT NOT NULL, "
        "amount BIGINT NOT NULL)",
        f"CREATE TABLE {db}.events (id INT AUTO_INCREMENT PRIMARY KEY, what VARCHAR(40))",
        f"CREATE TABLE {db}.marker (id INT PRIMARY KEY)",
    ]


class Writer(BackgroundWriter):
    """Transactions over accounts and ledger (and single inserts into events), five a second (the catch-up
    after them is short): a transfer between two accounts with its fee to the ledger (two account rows, one
    ledger row), an account opened with its ledger row first. Its session clock starts ``before`` seconds
    before ``midnight`` and runs with the real one; it keeps each transaction's time, GTID and the ledger or
    events row it inserted."""

    def __init__(self, pipe: Pipeline, midnight: dt.datetime, before: float) -> None:
        super().__init__(pipe, seed=11, pause=0.2)
        self.opened = ACCOUNTS
        self.start = midnight.timestamp() - before
        self.began = time.monotonic()
        self.written: list[tuple[int, str, str, int]] = []
        """Per transaction: (its time, epoch seconds; its GTID; the table it inserted a row into; the row's id)."""

    def write(self, conn: Any, cur: Any) -> None:
        at = int(self.start + time.monotonic() - self.began)
        cur.execute(f"SET TIMESTAMP = {at}")
        kind = self.rng.random()
        if kind < 0.15:
            cur.execute(f"INSERT INTO {DB}.events (what) VALUES ('tick')")
            self.kept(cur, at, "events")
            return
        conn.begin()
        if kind < 0.35:
            self.opened += 1
            cur.execute(f"INSERT INTO {DB}.ledger (account_id, amount) VALUES ({self.opened}, 0)")
            ledger_id = cur.lastrowid
            cur.execute(f"INSERT INTO {DB}.accounts VALUES ({self.opened}, 0)")
        else:
            payer, payee = self.rng.sample(range(1, ACCOUNTS + 1), 2)
            amount, fee = self.rng.randint(1, 50), self.rng.randint(1, 3)
            cur.execute(f"UPDATE {DB}.accounts SET balance = balance - {amount + fee} WHERE id = {payer}")
            cur.execute(f"UPDATE {DB}.accounts SET balance = balance + {amount} WHERE id = {payee}")
            cur.execute(f"INSERT INTO {DB}.ledger (account_id, amount) VALUES ({payer}, {fee})")
            ledger_id = cur.lastrowid
        conn.commit()
        self.kept(cur, at, "ledger", ledger_id)

    def kept(self, cur: Any, at: int, table: str, row: int | None = None) -> None:
        row = cur.lastrowid if row is None else row
        cur.execute("SELECT @@last_gtid")
        self.written.append((at, cur.fetchone()[0], table, int(row)))


def write_config(pipe: Pipeline, per_batch: int | None, name: str) -> Path:
    """``per_batch``: records a micro-batch reads at most (a few: landings cut transactions)."""
    data: dict[str, Any] = {
        "app_id": f"e2e-{pipe.db}",
        "kafka": {
            "bootstrap_servers": pipe.kafka,
            "topic_pattern": rf"^{pipe.prefix}(\..*)?$",  # the transaction topic too
            "starting_offsets": "earliest",
            "max_offsets_per_trigger": per_batch,
        },
        "spark": {"master": "local[2]", "shuffle_partitions": 2, "conf": {"spark.ui.enabled": "false"}},
        "storage": {"root": str(pipe.folder / "lake")},
        "trigger_interval": "1 second",
        "merge": {"max_delay_seconds": 0},  # merges go past the point
        "snapshot": {
            "database": f"{pipe.db}_ods",
            "tables": [f"{pipe.db}.{t}" for t in ("accounts", "ledger", "events")],
            "time_zone": "UTC",
            "idle_grace_minutes": 0,
        },
        "tables": [{"name": "{db}.{table}", "topic_pattern": rf"{pipe.prefix}\.{pipe.db}\.[^.]+"}],
    }
    path = pipe.folder / name
    path.write_text(yaml.safe_dump(data))
    return path


def read(spark: SparkSession, config: AppConfig, consistent: bool) -> tuple[dict[int, int], list[tuple[int, int]]]:
    """Accounts (id -> balance) and ledger rows (account, amount), live: now, or at the consistent point."""
    cut = None
    if consistent:
        found = consistent_point(config)
        assert found.point is not None and found.unavailable is None, found.line()
        cut = consistent_cut(spark, config, found.point)
    wanted = {f"{DB}.accounts", f"{DB}.ledger"}
    tables = [t for t in indexed_without_spark(config).tables() if t.name in wanted]
    rows = live_rows(spark, config, tables, cut=cut)

    def live(name: str) -> list[Any]:
        frame = rows.get(f"{DB}.{name}")
        return [] if frame is None else frame.where("NOT _cdc_deleted").collect()

    accounts = {r["id"]: r["balance"] for r in live("accounts")}
    ledger = [(r["account_id"], r["amount"]) for r in live("ledger")]
    return accounts, ledger


def source_rows(mariadb: MariaDB, query: str) -> list[tuple[Any, ...]]:
    conn = mariadb.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(query)
            return list(cur.fetchall())
    finally:
        conn.close()


def broken(accounts: dict[int, int], ledger: list[tuple[int, int]]) -> list[str]:
    """The invariants a read breaks."""
    out = []
    total = sum(accounts.values()) + sum(amount for _, amount in ledger)
    if total != TOTAL:
        out.append(f"balances and ledger sum to {total}, not {TOTAL}")
    orphans = sorted({account for account, _ in ledger} - set(accounts))
    if orphans:
        out.append(f"ledger rows of accounts not there: {orphans[:5]}")
    return out


def test_reads_at_the_consistent_point_never_show_half_a_transaction(
    spark: SparkSession, kafka_bootstrap: str, mariadb: MariaDB, connect_worker: ConnectWorker, tmp_path: Path
) -> None:
    pipe = Pipeline(DB, tmp_path, kafka_bootstrap, mariadb, connect_worker, server_id=5403)  # type: ignore[arg-type]
    pipe.sql(setup_sql(pipe.db))
    pipe.register()  # the project's connector file: provide.transaction.metadata true
    pipe.mark(1)
    config_path = write_config(pipe, 10, "cdc.yaml")
    config = load_config(config_path, env={})
    stream = StreamProcess(config_path, tmp_path / "stream.log")
    proc = stream.start()
    try:
        wait_for(lambda: len(read(spark, config, consistent=False)[0]) == ACCOUNTS, 240, "the accounts' snapshot")
        plain_breaks, points = [], []
        # A midnight ahead of every real time the source wrote (the commit order is the times' order but
        # for the writer's), crossed 25 s into the writing.
        day = dt.datetime.now(dt.timezone.utc).date() + dt.timedelta(days=1)
        midnight = cutoff_for(day, "UTC")
        with Writer(pipe, midnight, before=25) as writer:
            wait_for(lambda: writer.writes > 30, 60, "the writer's first transactions")
            for n in range(8):  # until a plain read has broken, and three reads at the point at least
                if plain_breaks and n >= 3:
                    break
                plain = broken(*read(spark, config, consistent=False))
                if plain:
                    plain_breaks.append(plain)
                at_point = read(spark, config, consistent=True)
                assert broken(*at_point) == [], at_point
                points.append(consistent_point(config).point)
        assert plain_breaks, "no plain read showed half a transaction: the test does not prove the point matters"
        assert len({p.txn_id for p in points if p is not None}) > 1  # the point moved on while the writer ran

        # Once the writer stops, the point reaches the source's last transaction; a read there is SELECT *.
        proc.terminate()  # stops after its batch
        proc.wait(timeout=120)
        pipe.mark(2)
        last = source_rows(mariadb, "SELECT @@gtid_binlog_pos")[0][0]
        catch_up = StreamProcess(write_config(pipe, None, "catch-up.yaml"), tmp_path / "catch-up.log")
        assert catch_up.run_until_caught_up() == 0, catch_up.log.read_text()[-3000:]

        def at_last() -> bool:
            found = consistent_point(config)
            return found.point is not None and found.point.txn_id == last

        assert at_last(), (last, consistent_point(config).line())
        accounts, ledger = read(spark, config, consistent=True)
        assert accounts == {int(i): int(b) for i, b in source_rows(mariadb, f"SELECT id, balance FROM {DB}.accounts")}
        assert sorted(ledger) == sorted(
            (int(a), int(m)) for a, m in source_rows(mariadb, f"SELECT account_id, amount FROM {DB}.ledger")
        )
        assert broken(accounts, ledger) == []

        # The nightly snapshot of the day that midnight ends: every table at the writer's last transaction
        # before it (the stream passed it on every partition; the quiet ones, read to the end, count).
        before = [w for w in writer.written if w[0] < midnight.timestamp()]
        assert before and len(before) < len(writer.written), "the writer's clock did not cross the midnight"
        report = run_snapshot(
            spark, config, day, kafka_positions_of(config), clock=lambda: midnight + dt.timedelta(hours=1)
        )
        assert report.transaction == before[-1][1], (report.transaction, before[-1])
        catalog = indexed_without_spark(config)

        def published(name: str) -> list[Any]:
            hive = spark.table(hive_publish.hive_table(config, catalog.table(f"{DB}.{name}")))
            return hive.where(F.col("dt") == day.isoformat()).collect()

        ledger_rows, events = published("ledger"), published("events")
        assert {r["id"] for r in ledger_rows} == {row for _, _, table, row in before if table == "ledger"}
        assert {r["id"] for r in events} == {row for _, _, table, row in before if table == "events"}
        cut_accounts = {r["id"]: r["balance"] for r in published("accounts")}
        assert broken(cut_accounts, [(r["account_id"], r["amount"]) for r in ledger_rows]) == []
        assert cut_accounts != accounts  # the transfers after the midnight are not in it
        # --at-landing (the way out where a dead letter holds a transaction): as of the landing that
        # passed the midnight, the day's partition replaced; it holds what the cut held, and no transaction.
        landing = run_snapshot(
            spark,
            config,
            day,
            kafka_positions_of(config),
            at_landing=True,
            clock=lambda: midnight + dt.timedelta(hours=1),
        )
        assert landing.transaction is None and landing.land_seq == report.land_seq
        assert {r["id"] for r in published("ledger")} >= {r["id"] for r in ledger_rows}
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=120)
