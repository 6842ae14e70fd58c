"""Read a Delta table back in the canonical forms the oracle uses."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DateType, DecimalType, TimestampType

from cdc_delta.columns import quote
from cdc_delta.delta.delta_rs import read

COMPARED_METADATA = ("_cdc_op", "_cdc_deleted", "_cdc_seq", "_cdc_source_db", "_cdc_source_table")


def canonical_columns(df: DataFrame) -> list[Column]:
    """The business columns of ``df`` with decimals and dates as text, timestamps as epoch micros."""
    cols = []
    for f in df.schema.fields:
        if f.name.startswith("_cdc_"):
            continue
        c = F.col(quote(f.name))
        if isinstance(f.dataType, (DecimalType, DateType)):
            c = c.cast("string")
        elif isinstance(f.dataType, TimestampType):
            c = F.unix_micros(c)
        cols.append(c.alias(f.name))
    return cols


def read_canonical(spark: SparkSession, path: str) -> tuple[list[str], list[dict[str, Any]]]:
    """(business columns, rows) of the Delta table at ``path``, in the canonical forms."""
    return canonical_rows(spark.read.format("delta").load(path))


def canonical_rows(
    df: DataFrame, metadata: tuple[str, ...] = COMPARED_METADATA
) -> tuple[list[str], list[dict[str, Any]]]:
    """(business columns, rows with them and ``metadata``) with decimals and dates as text, timestamps as
    epoch micros, ordering keys as tuples."""
    business = [f for f in df.schema.fields if not f.name.startswith("_cdc_")]
    cols = canonical_columns(df)
    rows = []
    for r in df.select(*cols, *metadata).collect():
        row = r.asDict()
        for name in metadata:
            if name.endswith("_seq") and row[name] is not None:
                row[name] = tuple(row[name])
        for f in business:
            if isinstance(f.dataType, ArrayType) and row[f.name] is not None:
                row[f.name] = list(row[f.name])
        rows.append(row)
    return [f.name for f in business], sorted(rows, key=repr)


def _merge_commits(spark: SparkSession, path: str) -> list[Any]:
    """The table's MERGE commits (history rows), oldest first."""
    from delta.tables import DeltaTable

    return DeltaTable.forPath(spark, path).history().where("operation = 'MERGE'").orderBy("version").collect()


def landings_per_commit(spark: SparkSession, path: str) -> list[int]:
    """The landing each MERGE commit of the table merged through, oldest first (every landing is merged
    once: the list strictly grows)."""
    import json

    return [json.loads(r["userMetadata"])["land_seq"] for r in _merge_commits(spark, path)]


def merges_matching(spark: SparkSession, path: str) -> list[bool]:
    """Whether each MERGE commit of the table, oldest first, had a clause for rows it matched (False: an
    insert-only MERGE, as into a table that holds no row yet)."""
    return [r["operationParameters"]["matchedPredicates"] != "[]" for r in _merge_commits(spark, path)]


def arrow_rows(location: str) -> list[dict[str, Any]]:
    """The Parquet files at ``location`` read by pyarrow (not Spark), in the oracle's canonical forms."""
    import datetime as dt

    import pyarrow.parquet as pq

    from tests.oracle import canonical

    table = pq.read_table(location.removeprefix("file:"))
    rows = [
        {k: canonical(v.replace(tzinfo=None) if isinstance(v, dt.datetime) else v) for k, v in r.items()}
        for r in table.to_pylist()
    ]
    return sorted(rows, key=repr)


def plain(value: Any) -> Any:
    """A value as Spark's and delta-rs's Python readers both can give it: Rows and structs as dicts,
    timestamps as naive UTC, bytearrays as bytes."""
    import datetime as dt

    from pyspark.sql import Row

    if isinstance(value, Row):
        return {k: plain(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def spark_and_delta_rs_rows(spark: SparkSession, path: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every row of the Delta table at ``path`` as Spark reads it and as delta-rs (``deltalake``) reads
    it, columns in the table's order, timestamps as epoch microseconds (Python's datetime has no year
    0, which a 0001-01-01 in another zone needs), rows sorted."""
    from deltalake import DeltaTable

    df = spark.read.format("delta").load(path)
    cols = [
        F.unix_micros(F.col(quote(f.name))).alias(f.name)
        if isinstance(f.dataType, TimestampType)
        else F.col(quote(f.name))
        for f in df.schema.fields
    ]
    by_spark = sorted((tuple(plain(v) for v in r) for r in df.select(*cols).collect()), key=repr)
    dataset = DeltaTable(path).to_pyarrow_dataset()
    table = read(dataset, dataset.schema.names)
    assert table.column_names == df.columns, (table.column_names, df.columns)
    return by_spark, sorted_arrow_rows(table)


def sorted_arrow_rows(table: Any) -> list[tuple[Any, ...]]:
    """The rows of a pyarrow table in the form of :func:`spark_and_delta_rs_rows` (timestamps as epoch
    microseconds, values :func:`plain`), sorted."""
    import pyarrow as pa

    for i, field in enumerate(table.schema):
        if pa.types.is_timestamp(field.type):
            micros = table.column(i).cast(pa.timestamp("us", tz=field.type.tz)).cast(pa.int64())
            table = table.set_column(i, field.name, micros)
    return sorted((tuple(plain(v) for v in r.values()) for r in table.to_pylist()), key=repr)


def duckdb_connection() -> Any:
    """A DuckDB connection with its delta extension loaded from the ``duckdb-extension-delta`` package
    (extensions.duckdb.org is out of reach here). Loading it takes a quarter of a second, ten times a
    table's read: a reader of many tables keeps one connection per thread."""
    import os

    import duckdb
    import duckdb_extension_delta

    folder = os.path.dirname(duckdb_extension_delta.__file__)
    extension = os.path.join(folder, "extensions", f"v{duckdb.__version__}", "delta.duckdb_extension")
    con = duckdb.connect(config={"autoinstall_known_extensions": False, "threads": 1})
    con.execute(f"LOAD '{extension}'")
    return con


def duckdb_table(con: Any, path: str) -> Any:
    """The Delta table at ``path`` as DuckDB reads it through ``con`` (:func:`duckdb_connection`), as a
    pyarrow table."""
    return con.sql(f"SELECT * FROM delta_scan('{path}')").to_arrow_table()


def same_arrow_types(a: Any, b: Any) -> bool:
    """Whether two Arrow types hold the same values (large and small strings and binaries alike, any
    timestamp unit, nested types member by member)."""
    import pyarrow as pa

    def norm(t: Any) -> Any:
        if pa.types.is_large_string(t) or pa.types.is_string_view(t):
            return pa.string()
        if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
            return pa.binary()
        if pa.types.is_timestamp(t):
            return pa.timestamp("us", tz="UTC" if t.tz else None)
        if pa.types.is_large_list(t) or pa.types.is_list(t) or pa.types.is_list_view(t):
            return pa.list_(norm(t.value_type))
        if pa.types.is_struct(t):
            return pa.struct([pa.field(f.name, norm(f.type)) for f in t])
        if pa.types.is_map(t):
            return pa.map_(norm(t.key_type), norm(t.item_type))
        return t

    return bool(norm(a) == norm(b))


def write_as_merged(
    spark: SparkSession, config: Any, frames: dict[str, DataFrame], positions: dict[str, dict[str, int]]
) -> None:
    """Append ``frames`` (table name -> rows in the table's stored form) as if the stream had landed one
    batch (landing 1, with ``positions``: per topic, per partition, a source time in ms, read at offset
    = that table's row count) and every table had merged it: what readiness, the snapshot and the
    purge read, without going through Kafka."""
    from cdc_delta.changelog.table import changelog_path, changelog_schema, ensure_tables
    from cdc_delta.delta.commits import Commit, StreamCommit, delta_transaction, merge_txn_app_id, txn_app_id

    for name, rows in frames.items():
        record = StreamCommit(config.app_id, land_seq=1, table=name, operation="merge")
        with delta_transaction(spark, Commit(merge_txn_app_id(config.app_id, name), 1, record)):
            rows.write.format("delta").mode("append").save(config.storage.table_path(config.table(name)))
    ensure_tables(spark, config)  # the changelog's version 0
    landing = StreamCommit(
        config.app_id,
        batch_id=0,
        land_seq=1,
        operation="land",
        offsets={t: {p: 1 for p in parts} for t, parts in positions.items()},
        partition_max_source_ts_ms=positions,
    )
    # An empty append commits only with a transaction id here (the stream's landings record empty commits).
    (
        spark.createDataFrame([], changelog_schema())
        .write.format("delta")
        .mode("append")
        .option("txnAppId", txn_app_id(config.app_id, None, "changelog"))
        .option("txnVersion", "0")
        .option("userMetadata", landing.to_json())
        .save(changelog_path(config))
    )


def assert_demo_tables_equal_source(rows_of: Any, generator: Any) -> None:
    """The two demo tables (``inventory.orders``, ``shop.orders``) equal the generator's source: live rows
    with their values, every deleted key a soft-deleted row, nothing else. ``rows_of(name)``: the table's
    rows as dicts, read by whichever reader the test checks (Spark, delta-rs)."""
    from cdc_delta.demo.batches import DEMO_TABLES

    for name, sources in (("inventory.orders", DEMO_TABLES[:1]), ("shop.orders", DEMO_TABLES[1:])):
        rows = {(r["_cdc_source_db"], r["id"]): r for r in rows_of(name)}
        live = {(t.db, k): v for t in sources for k, v in generator.rows[(t.db, t.table)].items()}
        deleted = {(t.db, k) for t in sources for k in generator.deleted[(t.db, t.table)]}
        assert {k for k, r in rows.items() if not r["_cdc_deleted"]} == set(live), name
        assert {k for k, r in rows.items() if r["_cdc_deleted"]} == deleted, name
        for k, v in live.items():
            got = (rows[k]["customer"], rows[k]["amount"], rows[k]["status"])
            assert got == (v["customer"], v["amount"], v["status"]), (name, k)
