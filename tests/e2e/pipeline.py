"""One end-to-end pipeline of a test: its MariaDB databases, its Debezium connector on the session's
Connect worker (registered through cdc_delta.connect, from connectors/mariadb-inventory.yaml), its
topics, its stream config, and the checks of the lake against ``SELECT *``."""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import Consumer, KafkaException, TopicPartition
from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.config import ConnectConfig, load_config
from cdc_delta.config.masking import MaskRule
from cdc_delta.connect.apply import apply, plan
from cdc_delta.connect.client import ConnectClient
from cdc_delta.connect.files import load_connector_file
from cdc_delta.connect.http import ConnectHttp
from cdc_delta.connect.masking_settings import with_masking
from cdc_delta.connect.repair_settings import with_repair_settings
from cdc_delta.events.masking import masked_value
from tests.e2e.source import Comparison, SourceColumn, compare, source_columns, source_rows
from tests.services import ROOT, ConnectWorker, MariaDB

CONNECTOR_FILE = ROOT / "connectors" / "mariadb-inventory.yaml"


@dataclass(frozen=True)
class LakeTable:
    """A logical table and the source tables that feed it."""

    name: str
    sources: tuple[tuple[str, str], ...]
    key: tuple[str, ...] = ("id",)
    sharded: bool = False

    @property
    def lake_key(self) -> tuple[str, ...]:
        return (*C.SHARD_KEY, *self.key) if self.sharded else self.key


@dataclass
class Pipeline:
    db: str
    folder: Path
    kafka: str
    mariadb: MariaDB
    connect: ConnectWorker
    server_id: int
    extra_connector_settings: dict[str, str] | None = None
    archival: dict[str, object] | None = None
    """``archival_deletes`` of the pattern entry; the comparisons then expect ``archived`` too."""
    archived: dict[str, list[dict[str, Any]]] | None = None
    """Rows the source purged and the lake keeps, archived, per table."""
    history: bool = False
    """``history: true`` on the pattern entry: every version of its tables' rows is kept."""
    masks: dict[str, str] | None = None
    """``mask:`` of the pattern entry (its tables that have those columns), with the salt in :meth:`salt_file`;
    ``register`` has the connector mask them, and the comparisons expect them masked."""

    @property
    def prefix(self) -> str:
        return f"dbz_{self.db}"

    @property
    def connector(self) -> str:
        return f"{self.prefix}-mariadb"

    def topic(self, database: str, table: str) -> str:
        return f"{self.prefix}.{database}.{table}"

    def tables(self) -> list[LakeTable]:
        db = self.db
        plain = [LakeTable(f"{db}.{t}", ((db, t),)) for t in ("wide", "plain", "items", "temp", "odd", "marker")]
        return [
            *plain,
            LakeTable(f"{db}_archive.items", ((f"{db}_archive", "items"),), key=("id", "label")),
            LakeTable(f"{db}.orders", ((f"{db}_s0", "orders_000"), (f"{db}_s1", "orders_001")), sharded=True),
        ]

    def client(self) -> ConnectClient:
        return ConnectClient(ConnectHttp(ConnectConfig(url=self.connect.url)))

    # --- setting up --------------------------------------------------------------------------------

    def sql(self, statements: list[str]) -> None:
        conn = self.mariadb.connect()
        try:
            with conn.cursor() as cur:
                for statement in statements:
                    cur.execute(statement)
        finally:
            conn.close()

    def register(self) -> None:
        """Apply the project's MariaDB connector file, pointed at this test's databases and topics."""
        overrides = {
            "name": self.connector,
            "database.hostname": "127.0.0.1",
            "database.port": str(self.mariadb.port),
            "database.password": f"${{file:{self.mariadb.capture_secrets}:password}}",
            "database.server.id": str(self.server_id),
            "database.include.list": rf"{self.db}(_archive|_s[0-9])?",
            "topic.prefix": self.prefix,
            "schema.history.internal.kafka.bootstrap.servers": self.kafka,
            "schema.history.internal.kafka.topic": f"{self.prefix}-history",
            **(self.extra_connector_settings or {}),
        }
        file, _ = with_repair_settings(load_connector_file(CONNECTOR_FILE, overrides), "debezium_signal")
        if self.masks:
            file, _ = with_masking(file, load_config(self.write_config(name="masking.yaml"), env={}))
        client = self.client()
        exists, diff = plan(client, file)
        assert apply(client, file, diff, exists, dry_run=False).action == "created"

    def mark(self, n: int, timeout: float = 180) -> None:
        """Insert marker row ``n`` and wait until Debezium has streamed it to Kafka from the binlog:
        everything the database did before it is in Kafka then. A marker inserted while the connector's
        snapshot runs can come as the snapshot's read of the table (op ``r``) before the snapshot of
        the other tables is in Kafka: it is then deleted and inserted again, and the wait is for that
        insert (op ``c``), which Debezium streams only once its snapshot is complete."""
        self.sql([f"INSERT INTO {self.db}.marker VALUES ({n})"])
        topic = self.topic(self.db, "marker")
        consumer = Consumer(
            {"bootstrap.servers": self.kafka, "group.id": f"marker-{self.db}", "enable.auto.commit": False}
        )
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                try:
                    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
                except (KafkaException, KeyError):
                    partitions = {}
                if partitions:
                    break
                time.sleep(1)
            consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
            while time.monotonic() < deadline:
                msg = consumer.poll(1)
                if msg is None or msg.error() is not None or not msg.key() or not msg.value():
                    continue
                if f'"id":{n}}}' not in msg.key().decode():
                    continue
                value = json.loads(msg.value())
                op = value.get("payload", value)["op"]
                if op == "c":
                    return
                if op == "r":  # read by the snapshot, which may still be running: stream it again
                    again = f"DELETE FROM {self.db}.marker WHERE id = {n}", f"INSERT INTO {self.db}.marker VALUES ({n})"
                    self.sql(list(again))
        finally:
            consumer.close()
        raise AssertionError(f"marker {n} did not reach {topic} in {timeout}s: is the connector running?")

    def write_config(self, time_zone: str = "UTC", merge: dict[str, Any] | None = None, name: str = "cdc.yaml") -> Path:
        """The shards fold into a listed table; every other table comes from one pattern entry, named from
        its source database and table (``{db}.{table}``) as Debezium reports them, its key the one
        Debezium's record key names (the table's primary key: ``id``, or ``(id, label)``). ``merge``: the
        config's ``merge`` section (the defaults without); ``name``: the file's, beside the lake."""
        sharded = next(t for t in self.tables() if t.sharded)
        masked = {"source_database": rf"{self.db}(_archive)?", "source_table": "[^.]+", "mask": self.masks}
        tables: list[dict[str, Any]] = [
            {
                "name": "{db}.{table}",
                "topic_pattern": rf"{self.prefix}\.{self.db}(_archive)?\.[^.]+",
                **(masked if self.masks else {}),
                **({"archival_deletes": self.archival} if self.archival else {}),
                **({"history": True} if self.history else {}),
            },
            {
                "name": sharded.name,
                "topic_pattern": rf"{self.prefix}\.{self.db}_s\d\.orders_\d+",
                "source_database": rf"{self.db}_s\d",
                "source_table": r"orders_\d+",
                "key": list(sharded.key),
                "key_includes_source": True,
            },
        ]
        data = {
            "app_id": f"e2e-{self.db}",
            "kafka": {
                "bootstrap_servers": self.kafka,
                # the schema-change, transaction and heartbeat topics too: recognised and skipped
                "topic_pattern": rf"^(__debezium-heartbeat\.)?{self.prefix}(\..*)?$",
                "starting_offsets": "earliest",
            },
            "spark": {"master": "local[2]", "shuffle_partitions": 2, "conf": {"spark.ui.enabled": "false"}},
            "storage": {"root": str(self.folder / "lake")},
            "trigger_interval": "1 second",
            "source": {  # cdc-delta check reads the tables as the capture user
                "port": self.mariadb.port,
                "user": "cdc",
                "password_file": str(self.source_password()),
                "check": {"settle_seconds": 0, "wait_seconds": 60, "attempts": 1},
            },
            "snapshot": {
                "database": f"{self.db}_ods",
                "tables": [f"{self.db}.{t}" for t in ("wide", "plain", "items", "temp")],
                "time_zone": time_zone,
                "idle_grace_minutes": 0,
            },
            "tables": tables,
            **({"merge": merge} if merge is not None else {}),
            **({"masking": {"password_file": str(self.salt_file())}} if self.masks else {}),
        }
        path = self.folder / name
        path.write_text(yaml.safe_dump(data))
        return path

    def source_password(self) -> Path:
        """The capture user's password alone in a file (the connector reads it as ``password=...``)."""
        path = self.folder / "source-password"
        lines = self.mariadb.capture_secrets.read_text().splitlines()
        path.write_text(next(line.split("=", 1)[1] for line in lines if line.startswith("password=")))
        path.chmod(0o600)
        return path

    def salt_file(self) -> Path:
        """The salt of the ``hash`` mask rules, in a file of its own."""
        path = self.folder / "mask-salt"
        if not path.exists():
            path.write_text(f"salt.of.{self.db}\n")
            path.chmod(0o600)
        return path

    # --- checking ----------------------------------------------------------------------------------

    def compare_table(self, table: LakeTable, lake: DataFrame | None) -> Comparison:
        conn = self.mariadb.connect()
        try:
            columns = source_columns(conn, *table.sources[0])
            rows = []
            for database, name in table.sources:
                for row in source_rows(conn, database, name):
                    rows.append({**row, C.SOURCE_DB: database, C.SOURCE_TABLE: name} if table.sharded else row)
        finally:
            conn.close()
        rows += (self.archived or {}).get(table.name, [])  # kept by the lake where the source purged them
        if self.masks:
            rows = masked_rows(columns, rows, self.masks, self.salt_file().read_text().strip())
        return compare(table.name, columns, rows, lake, table.lake_key)

    def live_rows(self, spark: SparkSession, config_path: Path, table: LakeTable) -> DataFrame | None:
        """The Delta table's live rows; None when the stream has not created the table (yet)."""
        path = load_config(config_path, env={}).table_path(table.name)
        if not DeltaTable.isDeltaTable(spark, path):
            return None
        df = spark.read.format("delta").load(path)
        business = [C.quote(f.name) for f in df.schema.fields if not f.name.startswith(C.PREFIX)]
        shard = list(C.SHARD_KEY) if table.sharded else []
        return df.where(~F.col(C.DELETED)).select(*business, *shard)

    def deleted_keys(self, spark: SparkSession, config_path: Path, table: LakeTable) -> set[tuple[Any, ...]]:
        df = spark.read.format("delta").load(load_config(config_path, env={}).table_path(table.name))
        return {tuple(r) for r in df.where(F.col(C.DELETED)).select(*table.lake_key).collect()}

    def archived_keys(self, spark: SparkSession, config_path: Path, table: LakeTable) -> set[tuple[Any, ...]]:
        """Keys of the rows the lake keeps archived (``_cdc_op = 'a'``, live)."""
        df = spark.read.format("delta").load(load_config(config_path, env={}).table_path(table.name))
        archived = (F.col(C.OP) == C.ARCHIVE) & ~F.col(C.DELETED)
        return {tuple(r) for r in df.where(archived).select(*table.lake_key).collect()}


def masked_rows(
    columns: list[SourceColumn], rows: list[dict[str, Any]], masks: dict[str, str], salt: str
) -> list[dict[str, Any]]:
    """``SELECT *``'s rows with the columns of ``masks`` masked as Debezium masks them: cdc-delta's own
    masking (the dead letters') is checked against Debezium's here."""
    rules = {c.lower(): MaskRule.parse(r, c) for c, r in masks.items()}
    lengths = {c.name: int(c.column_type.split("(")[1].split(")")[0]) for c in columns if "char(" in c.column_type}
    out = []
    for row in rows:
        masked = dict(row)
        for name, value in row.items():
            rule = rules.get(name.lower())
            if rule is not None:
                masked[name] = masked_value(value, (rule.kind, rule.n), salt, lengths.get(name))
        out.append(masked)
    return out


def noon_zone(now: dt.datetime | None = None) -> str:
    """An Etc/GMT zone where it is about noon now, so that the day's cut-off (midnight) is hours away."""
    hour = (now or dt.datetime.now(dt.timezone.utc)).hour
    offset = 12 - hour  # local = UTC + offset; Etc/GMT-N is UTC+N
    return "Etc/GMT" + (f"-{offset}" if offset > 0 else f"+{-offset}" if offset < 0 else "")
