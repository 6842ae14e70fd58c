"""The changelog: one Delta table holding every change of every table, appended once per micro-batch.

Each landing (one micro-batch's append, one Delta commit) gets a *landing number*, ``land_seq``, that
grows with every landing and is never reused: the stream is the changelog's only lander, and a
process starts numbering above the changelog's version (which is at least every number used before).
A table's merge records the landing it holds up to (:mod:`cdc_delta.merger`): its pending changes are
the changelog rows past it.

A row holds what rebuilds any table without Kafka: the logical table, op, ordering key, source time
and shard, the Kafka record (its key and timestamp too), the micro-batch, and the row image in one of two forms:

- as Debezium wrote it (JSON records the JVM decodes): ``payload``, the envelope's payload text, and
  ``schema_id``, a reference to its Connect schema (:func:`cdc_delta.decode.images.schema_ref`), whose
  text the schemas table holds; the image is made canonical where the table's changes are read
  (:mod:`cdc_delta.decode.canonical`), so that landing builds nothing per table. Schema and payload
  together are the Kafka record's value, byte for byte.
- canonical JSON (``row_json``, the records the reference decoder decoded, Avro's, and every row landed
  before ``payload`` existed) and ``schema_id``, a reference to its column descriptor, stored in the
  schemas table too.

Either is typed at merge time. Each schema is stored once, in the schemas table beside
(``<changelog>_schemas``). The tables that pattern entries made are listed
in the table index (``<changelog>_tables``, :mod:`.table_index`). The changelog is not partitioned: a batch's rows
are sorted by table into files of small row groups (``changelog.row_group_mb``, a fraction of a landing's
file), so that reading one table's changes skips most of the others' row groups, and the files of
landings a table has merged are skipped by ``land_seq``.
"""

from __future__ import annotations

import hashlib
import json

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType, _parse_datatype_string

from cdc_delta import hadoop_fs
from cdc_delta.columns import delta_path_identifier
from cdc_delta.config import AppConfig
from cdc_delta.delta.commits import AppCommit, app_commits
from cdc_delta.delta.tables import create_if_missing, current_version
from cdc_delta.events.ordering import SEQ_DDL
from cdc_delta.events.transactions import TXN_DDL

LAND_SEQ = "land_seq"
TABLE = "table"

CHANGELOG_DDL = (
    f"{LAND_SEQ} bigint, batch_id bigint, epoch string, landed_at timestamp, `{TABLE}` string, op string, "
    f"seq {SEQ_DDL}, source_ts_ms bigint, source_db string, source_table string, topic string, "
    "`partition` int, `offset` bigint, row_json string, schema_id string, payload string, `key` binary, "
    f"kafka_timestamp timestamp, txn {TXN_DDL}"
)
"""Truncates (op ``t``, a DROP TABLE included) are rows too, without a row image. So are the ENDs of
source transactions (op ``x``, no table: :mod:`cdc_delta.events.transactions`), where the connector
provides transaction metadata; ``txn`` is a change's transaction block, an END's id and event count.
``payload``, ``key``, ``kafka_timestamp`` and ``txn`` were added later: a changelog written before gains
them (:func:`ensure_tables`); a reader sees them null in its rows (:func:`added_fields`)."""
ADDED_COLUMNS = ("payload", "key", "kafka_timestamp", "txn")
SCHEMAS_DDL = "schema_id string, schema_json string"
TABLES_DDL = (
    f"`{TABLE}` string, topic string, source_db string, source_table string, {LAND_SEQ} bigint, found_at timestamp, "
    "`key` array<string>"
)
"""The table index: each table a pattern entry made, the topic and source table it comes from, the
landing that found it and, where its entry has no key, its key as Debezium's record key names it
(``key`` was added later: an index written before has no such column)."""


def changelog_path(config: AppConfig) -> str:
    return config.changelog.located(config.storage.root)


def row_group_confs(config: AppConfig) -> dict[str, str]:
    """The session conf of the changelog's writers (a landing, maintenance's OPTIMIZE): Parquet row groups
    of ``changelog.row_group_mb``, so that a reader of one table's changes skips most of the others'
    (each landing's rows are sorted by table)."""
    return {"parquet.block.size": str(int(config.changelog.row_group_mb * 1024 * 1024))}


def schemas_path(config: AppConfig) -> str:
    return f"{changelog_path(config).rstrip('/')}_schemas"


def tables_path(config: AppConfig) -> str:
    return f"{changelog_path(config).rstrip('/')}_tables"


def _struct(ddl: str) -> StructType:
    schema = _parse_datatype_string(ddl)
    assert isinstance(schema, StructType)
    return schema


def changelog_schema() -> StructType:
    return _struct(CHANGELOG_DDL)


def added_fields() -> list[StructField]:
    """The changelog's columns added after its first release (null in the rows landed before)."""
    return [f for f in changelog_schema().fields if f.name in ADDED_COLUMNS]


def schemas_schema() -> StructType:
    return _struct(SCHEMAS_DDL)


def tables_schema() -> StructType:
    return _struct(TABLES_DDL)


def schema_id(schema_json: str) -> str:
    """The reference a changelog row holds to its column descriptor (a digest of its text)."""
    return hashlib.sha256(schema_json.encode("utf-8")).hexdigest()[:24]


def ensure_tables(spark: SparkSession, config: AppConfig) -> None:
    """Create the changelog, its schemas table and its table index where they do not exist yet; add the
    changelog's later columns to one written before them. The changelog last: a reader that finds it finds
    the other two (a live view made while a stream first started failed on a schemas table not there yet)."""
    for path, schema in (
        (schemas_path(config), schemas_schema()),
        (tables_path(config), tables_schema()),
        (changelog_path(config), changelog_schema()),
    ):
        if not DeltaTable.isDeltaTable(spark, path):
            create_if_missing(spark, path, schema)  # a stream and a merger starting at once both try
    path = changelog_path(config)
    present = set(DeltaTable.forPath(spark, path).toDF().columns)
    added = [f for f in added_fields() if f.name not in present]
    if added:
        columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in added)
        spark.sql(f"ALTER TABLE {delta_path_identifier(path)} ADD COLUMNS ({columns})")


def latest_version(spark: SparkSession, path: str) -> int | None:
    """The changelog's newest version, read from its log now (None: there is no changelog yet)."""
    if not DeltaTable.isDeltaTable(spark, path):
        return None
    DeltaTable.forPath(spark, path)  # brings this process's view of the log up to date
    return current_version(spark, path)


def newest_land_seq(spark: SparkSession, config: AppConfig) -> int:
    """The newest landing the changelog holds now (-1: none). A reader of "everything landed" bounds its
    reads by it: a DataFrame over a Delta table reads the table's newest version at each action, so two
    actions over one DataFrame would otherwise see two different sets of landings while the stream lands."""
    path = changelog_path(config)
    if not DeltaTable.isDeltaTable(spark, path):
        return -1
    found = spark.read.format("delta").load(path).agg(F.max(LAND_SEQ)).first()
    return -1 if found is None or found[0] is None else int(found[0])


HISTORY_LIMIT = 20_000
"""Landings read back (a day at a 5 s trigger): the snapshot's readiness, the purge's watermarks."""


def landings(spark: SparkSession, config: AppConfig, limit: int = HISTORY_LIMIT) -> list[AppCommit]:
    """Newest first, this app's landings among the changelog's last ``limit`` commits (none when there
    is no changelog yet)."""
    path = changelog_path(config)
    if not DeltaTable.isDeltaTable(spark, path):
        return []
    return list(app_commits(DeltaTable.forPath(spark, path), config.app_id, limit))


def deleted_path(config: AppConfig) -> str:
    """Where the retention records how far it may have deleted each table's changes."""
    return f"{changelog_path(config).rstrip('/')}_deleted.json"


def deleted_through(spark: SparkSession, config: AppConfig) -> dict[str, int]:
    """Per table, the newest landing whose changes the retention may have deleted (a table not in it:
    the changelog holds all its changes), so a rebuild knows whether it can start from nothing."""
    text = hadoop_fs.read_text(spark, deleted_path(config))
    return {str(k): int(v) for k, v in json.loads(text).items()} if text else {}


def record_deleted(spark: SparkSession, config: AppConfig, through: dict[str, int]) -> None:
    """Record, before the retention deletes them, the landings it may delete per table (never lowered)."""
    merged = deleted_through(spark, config)
    for table, seq in through.items():
        merged[table] = max(seq, merged.get(table, -1))
    hadoop_fs.write_text(spark, deleted_path(config), json.dumps(dict(sorted(merged.items()))) + "\n")
