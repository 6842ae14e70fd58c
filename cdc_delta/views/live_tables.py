"""Hive tables over the live Delta tables, for Presto, Trino and Athena: per replicated table
``db.name``, the external table ``<live_tables.database>.<name>_all`` over the Delta table's symlink
manifest (every row, soft-deleted ones included) and the view ``<live_tables.database>.<name>`` of
its live rows (``NOT _cdc_deleted``).

The manifest (``<table>/_symlink_format_manifest/manifest``, the Parquet files of the table's current
version) is rewritten by Delta after every commit of a table with
:data:`~cdc_delta.delta.tables.MANIFEST_PROPERTY`, which the stream sets when
``live_tables.enabled``. The Hive table's columns are the Delta table's at registration: after the
source adds or widens a column, :func:`register` (run by the hourly maintenance and by
``cdc-delta live-tables --register``) re-creates the table and the view; the files are untouched.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from cdc_delta.changelog.table_index import indexed
from cdc_delta.columns import DELETED, quote
from cdc_delta.config import AppConfig, TableConfig
from cdc_delta.delta.tables import MANIFEST_PROPERTY
from cdc_delta.hadoop_fs import exists, qualified
from cdc_delta.metastore import ensure_database, hive_schema

logger = logging.getLogger(__name__)

SYMLINK_INPUT_FORMAT = "org.apache.hadoop.hive.ql.io.SymlinkTextInputFormat"
PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
TEXT_OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat"
MANIFEST_DIR = "_symlink_format_manifest"


@dataclass(frozen=True)
class LiveTable:
    """One replicated table's Hive table and view: names, DDL, and what :func:`register` did."""

    table: str
    hive_table: str
    view: str
    manifest: str
    columns: tuple[tuple[str, str], ...]
    """(name, Hive type) of the Delta table's columns."""
    table_ddl: str
    view_ddl: str
    action: str = ""
    """``created``, ``re-created (columns changed)``, ``unchanged``; empty when only printed."""


def names(config: AppConfig, table: TableConfig) -> tuple[str, str]:
    """(Hive table, view) of a replicated table."""
    short = table.name.split(".")[-1]
    db = config.live_tables.database
    return f"{db}.{short}_all", f"{db}.{short}"


def live_table(config: AppConfig, table: TableConfig, schema: StructType, manifest: str) -> LiveTable:
    """The DDL of ``table``'s Hive table over ``manifest`` (a qualified folder) and its live view."""
    hive_table, view = names(config, table)
    columns = tuple((f.name, f.dataType.simpleString()) for f in hive_schema(schema).fields)
    cols = ",\n  ".join(f"{quote(name)} {type_name}" for name, type_name in columns)
    table_ddl = (
        f"CREATE EXTERNAL TABLE {_q(hive_table)} (\n  {cols}\n)\n"
        f"ROW FORMAT SERDE '{PARQUET_SERDE}'\n"
        f"STORED AS INPUTFORMAT '{SYMLINK_INPUT_FORMAT}'\n"
        f"OUTPUTFORMAT '{TEXT_OUTPUT_FORMAT}'\n"
        f"LOCATION '{manifest}'"
    )
    view_ddl = f"CREATE OR REPLACE VIEW {_q(view)} AS SELECT * FROM {_q(hive_table)} WHERE NOT {quote(DELETED)}"
    return LiveTable(table.name, hive_table, view, manifest, columns, table_ddl, view_ddl)


def live_tables(spark: SparkSession, config: AppConfig) -> list[LiveTable]:
    """The Hive table and view of every replicated table that has a Delta table yet."""
    out = []
    for table in _named_apart(config, indexed(spark, config).tables()):
        path = config.storage.table_path(table)
        if not DeltaTable.isDeltaTable(spark, path):
            logger.info("%s: no Delta table yet at %s, no live table", table.name, path)
            continue
        schema = spark.read.format("delta").load(path).schema
        out.append(live_table(config, table, schema, qualified(spark, f"{path.rstrip('/')}/{MANIFEST_DIR}")))
    return out


def _named_apart(config: AppConfig, tables: list[TableConfig]) -> list[TableConfig]:
    """``tables`` without the made tables that would share a Hive name (:meth:`AppConfig.apart`), logged."""
    kept, left = config.apart(tables)
    for name, sharing in left.items():
        logger.warning(
            "%s: no live table: %s.%s would also be the Hive name of %s. List the tables apart with names of their own",
            name,
            config.live_tables.database,
            name.split(".")[-1],
            ", ".join(sharing),
        )
    return kept


def register(spark: SparkSession, config: AppConfig) -> list[LiveTable]:
    """Create, or re-create where the Delta columns changed, every live table and view in the
    metastore of ``spark`` (a session with Hive support, :func:`cdc_delta.metastore.metastore_conf`).
    A table without a manifest yet gets one now (written beside the stream; no Delta commit)."""
    ensure_database(spark, config.live_tables.database)
    done = []
    for live in live_tables(spark, config):
        path = config.table_path(live.table)
        delta = DeltaTable.forPath(spark, path)
        detail = delta.detail().select("properties").first()
        properties: dict[str, str] = (detail["properties"] if detail else None) or {}
        if properties.get(MANIFEST_PROPERTY) != "true":
            logger.warning(
                "%s: Delta does not keep its manifest current yet (%s): restart the stream with "
                "live_tables.enabled, which sets it on its next batch; until then the live table shows this moment",
                live.table,
                MANIFEST_PROPERTY,
            )
        if not exists(spark, live.manifest):
            delta.generate("symlink_format_manifest")
        action = _ensure_table(spark, live)
        spark.sql(live.view_ddl)  # SELECT * is expanded when the view is made: re-made every time
        logger.info("live table %s (view %s): %s", live.hive_table, live.view, action)
        done.append(dataclasses.replace(live, action=action))
    return done


def _ensure_table(spark: SparkSession, live: LiveTable) -> str:
    if not spark.catalog.tableExists(live.hive_table):
        spark.sql(live.table_ddl)
        return "created"
    registered = [(f.name.lower(), f.dataType.simpleString()) for f in spark.table(live.hive_table).schema.fields]
    if registered == [(name.lower(), type_name) for name, type_name in live.columns]:
        return "unchanged"
    spark.sql(f"DROP VIEW IF EXISTS {_q(live.view)}")
    spark.sql(f"DROP TABLE {_q(live.hive_table)}")  # external: the Delta table's files stay
    spark.sql(live.table_ddl)
    return "re-created (columns changed)"


def _q(qualified_name: str) -> str:
    db, name = qualified_name.split(".")
    return f"{quote(db)}.{quote(name)}"
