"""Tables in a catalog: the Spark session's Hive metastore (a thrift metastore, or an embedded Derby),
databases made where missing, the replicated Delta tables registered by name, and the Hive-compatible
form of a schema. The one place that registers tables: ``cdc-delta sql``, the live tables over manifests
(:mod:`cdc_delta.views.live_tables`) and the nightly snapshot's Hive tables use it."""

from __future__ import annotations

import logging
import socket
import time
import urllib.parse
from collections.abc import Callable

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql.types import StructField, StructType, TimestampNTZType, TimestampType

from cdc_delta.changelog.table_index import indexed
from cdc_delta.columns import quote
from cdc_delta.config import AppConfig
from cdc_delta.exceptions import MetastoreUnavailable

logger = logging.getLogger(__name__)


def metastore_conf(config: AppConfig) -> dict[str, str]:
    """Spark settings for Hive support: a thrift metastore from config, else embedded Derby."""
    snap = config.snapshot
    conf = {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": warehouse_dir(config),
    }
    if snap.metastore_uri:
        conf["spark.hadoop.hive.metastore.uris"] = snap.metastore_uri
    else:
        folder = config.under_root(snap.metastore_dir, "_cdc_metastore")
        conf["spark.hadoop.javax.jdo.option.ConnectionURL"] = (
            f"jdbc:derby:;databaseName={folder}/metastore_db;create=true"
        )
        conf["spark.driver.extraJavaOptions"] = f"-Dderby.stream.error.file={folder}/derby.log"
    return conf


def check_metastore(config: AppConfig, clock: Callable[[], float] = time.monotonic) -> None:
    """Raise :class:`SnapshotError` naming ``snapshot.metastore_uri`` when none of its thrift servers
    accepts a connection within ``snapshot.metastore_timeout_seconds`` (no-op for the embedded Derby)."""
    uris = config.snapshot.metastore_uri
    if not uris:
        return
    timeout = config.snapshot.metastore_timeout_seconds
    deadline = clock() + timeout
    servers = []
    for uri in uris.split(","):
        parsed = urllib.parse.urlsplit(uri.strip())
        servers.append((parsed.hostname or "localhost", parsed.port or 9083))
    last: OSError | None = None
    while True:
        for host, port in servers:
            try:
                socket.create_connection((host, port), timeout=min(5.0, timeout)).close()
                return
            except OSError as exc:
                last = exc
        if clock() >= deadline:
            raise MetastoreUnavailable(
                f"cannot reach the Hive metastore at {uris} within {timeout:g}s ({last}): is it running? "
                "Check snapshot.metastore_uri"
            )
        time.sleep(1)


def warehouse_dir(config: AppConfig) -> str:
    return config.under_root(config.snapshot.warehouse_dir, "_cdc_warehouse")


def hive_schema(schema: StructType) -> StructType:
    """The schema with types Hive 2 lacks replaced (TIMESTAMP_NTZ -> TIMESTAMP)."""
    return StructType(
        [
            StructField(f.name, TimestampType() if isinstance(f.dataType, TimestampNTZType) else f.dataType, True)
            for f in schema.fields
        ]
    )


def ensure_database(spark: SparkSession, db: str) -> None:
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote(db)}")


def register_delta_tables(spark: SparkSession, config: AppConfig) -> list[str]:
    """Make every existing replicated table queryable as ``db.table`` in this session's catalog;
    returns their names."""
    names = []
    for table in indexed(spark, config).tables():
        path = config.storage.table_path(table)
        if not DeltaTable.isDeltaTable(spark, path):
            continue
        db, _, _ = table.name.rpartition(".")
        if db:
            ensure_database(spark, db)
        if not spark.catalog.tableExists(table.name):
            spark.catalog.createTable(table.name, path=path, source="delta")
        names.append(table.name)
    return names
