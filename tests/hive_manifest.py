"""Read a manifest-based Hive table the way Presto and Trino do, from what the metastore holds.

Spark cannot read such a table itself: Hive's SymlinkTextInputFormat reads its targets as text
(delta-io/delta#706), and Spark's support for Parquet targets was never merged (SPARK-32432). So the
tests take the table's input format, serde, location and columns from the metastore (through Spark
with Hive support), read the manifest files at the location, and read the Parquet files they list
with the metastore's columns, as Trino's Hive connector does."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from cdc_delta.views.live_tables import PARQUET_SERDE, SYMLINK_INPUT_FORMAT


def described(spark: SparkSession, name: str) -> dict[str, str]:
    rows = spark.sql(f"DESCRIBE FORMATTED {name}").collect()
    return {r["col_name"].strip(): (r["data_type"] or "").strip() for r in rows if r["col_name"]}


def manifest_files(location: str) -> list[str]:
    """The data files the manifests under ``location`` list (Hive skips names starting _ or .)."""
    folder = Path(location.removeprefix("file:"))
    manifests = [p for p in sorted(folder.rglob("*")) if p.is_file() and not p.name.startswith(("_", "."))]
    return [line for m in manifests for line in m.read_text().splitlines() if line.strip()]


def read_symlink_table(spark: SparkSession, name: str) -> DataFrame:
    info = described(spark, name)
    assert info["InputFormat"] == SYMLINK_INPUT_FORMAT and info["Serde Library"] == PARQUET_SERDE, info
    files = manifest_files(info["Location"])
    return spark.read.schema(spark.table(name).schema).parquet(*files)


def read_view(spark: SparkSession, view: str, over: str) -> DataFrame:
    """Run the view's SQL as the metastore stores it, with ``over`` (the symlink table it selects
    from) read as :func:`read_symlink_table` reads it."""
    text = described(spark, view)["View Text"]
    stand_in = "symlink_" + over.replace(".", "_")
    read_symlink_table(spark, over).createOrReplaceTempView(stand_in)
    db, name = over.split(".")
    quoted = f"`{db}`.`{name}`"
    assert quoted in text, text
    return spark.sql(text.replace(quoted, stand_in))
