"""Publish a snapshot as one partition of a Hive table, atomically, in files Hive and Trino read.

Each run writes a new folder ``<table location>/dt=<day>/run-<run id>``; nothing points at it until
one metastore call (ADD PARTITION or SET LOCATION) makes it the partition. A run that fails or is
killed before that call leaves the table as it was; its folder is removed by the next run of that day.
Files are Parquet in Hive's legacy encoding (decimals as fixed-length bytes, timestamps as INT96).
"""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from cdc_delta.columns import quote
from cdc_delta.config import AppConfig, TableConfig
from cdc_delta.exceptions import SnapshotError
from cdc_delta.hadoop_fs import qualified
from cdc_delta.metastore import ensure_database, warehouse_dir
from cdc_delta.spark_session import session_confs

logger = logging.getLogger(__name__)

PARTITION_COLUMN = "dt"
# Written around each snapshot write: the Parquet that Hive 2/3 and Trino read without surprises.
HIVE_PARQUET_CONF = {
    "spark.sql.parquet.writeLegacyFormat": "true",
    "spark.sql.parquet.outputTimestampType": "INT96",
    "spark.sql.parquet.compression.codec": "snappy",
}


def hive_table(config: AppConfig, table: TableConfig) -> str:
    """``<snapshot.database>.<table>``: the logical name without its source database."""
    return f"{config.snapshot.database}.{table.name.split('.')[-1]}"


def table_location(config: AppConfig, table: TableConfig) -> str:
    db, name = hive_table(config, table).split(".")
    return f"{warehouse_dir(config).rstrip('/')}/{db}.db/{name}"


def table_ddl(qualified_name: str, schema: StructType, location: str) -> str:
    """The Hive DDL of a snapshot table (printed in the report; run by :func:`ensure_table`)."""
    db, name = qualified_name.split(".")
    cols = ",\n  ".join(f"{quote(f.name)} {f.dataType.simpleString()}" for f in schema.fields)
    return (
        f"CREATE EXTERNAL TABLE IF NOT EXISTS {quote(db)}.{quote(name)} (\n  {cols}\n)\n"
        f"PARTITIONED BY ({PARTITION_COLUMN} STRING)\nSTORED AS PARQUET\nLOCATION '{location}'"
    )


def ensure_table(spark: SparkSession, qualified_name: str, schema: StructType, location: str) -> str:
    """Create the database and table if missing; add columns the snapshot gained. Returns the DDL."""
    db, _ = qualified_name.split(".")
    ensure_database(spark, db)
    ddl = table_ddl(qualified_name, schema, location)
    if not spark.catalog.tableExists(qualified_name):
        spark.sql(ddl)
        logger.info("created Hive table %s at %s", qualified_name, location)
        return ddl
    existing = {f.name.lower(): f.dataType for f in spark.table(qualified_name).schema.fields}
    changed = [
        f"{f.name}: {existing[f.name.lower()].simpleString()} -> {f.dataType.simpleString()}"
        for f in schema.fields
        if f.name.lower() in existing and existing[f.name.lower()] != f.dataType
    ]
    if changed:
        raise SnapshotError(
            f"Hive table {qualified_name} has other column types than the snapshot ({'; '.join(changed)}): "
            "Hive cannot change a column's type in place; rename the old table or publish under another database"
        )
    added = [f for f in schema.fields if f.name.lower() not in existing]
    if added:
        cols = ", ".join(f"{quote(f.name)} {f.dataType.simpleString()}" for f in added)
        spark.sql(f"ALTER TABLE {qualified_name} ADD COLUMNS ({cols})")
        logger.info("Hive table %s: added columns %s", qualified_name, cols)
    return ddl


def write_files(rows: DataFrame, location: str, files: int | None = None) -> None:
    """Write the snapshot's Parquet files to a new folder (fails if it exists)."""
    spark = rows.sparkSession
    out = rows.repartition(files) if files else rows
    with session_confs(spark, HIVE_PARQUET_CONF):
        out.write.mode("errorifexists").parquet(location)


def partition_location(spark: SparkSession, qualified_name: str, day: str) -> str | None:
    """Where the metastore says partition ``dt=day`` lives (None: no such partition)."""
    spec = f"{PARTITION_COLUMN}='{day}'"
    shown = {r["partition"] for r in spark.sql(f"SHOW PARTITIONS {qualified_name} PARTITION ({spec})").collect()}
    if f"{PARTITION_COLUMN}={day}" not in shown:
        return None
    for row in spark.sql(f"DESCRIBE FORMATTED {qualified_name} PARTITION ({spec})").collect():
        if row["col_name"].strip() == "Location":
            return str(row["data_type"]).strip()
    return None


def switch_partition(spark: SparkSession, qualified_name: str, day: str, location: str) -> str | None:
    """Point partition ``dt=day`` at ``location`` in one metastore call; returns its old location."""
    spec = f"{PARTITION_COLUMN}='{day}'"
    location = qualified(spark, location)
    previous = partition_location(spark, qualified_name, day)
    if previous is None:
        spark.sql(f"ALTER TABLE {qualified_name} ADD PARTITION ({spec}) LOCATION '{location}'")
    else:
        spark.sql(f"ALTER TABLE {qualified_name} PARTITION ({spec}) SET LOCATION '{location}'")
    spark.catalog.refreshTable(qualified_name)
    return previous
