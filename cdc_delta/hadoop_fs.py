"""List and delete folders through Hadoop's FileSystem, so the same code serves local paths and
s3a://, abfss://, gs:// locations (whatever the Spark session can read)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession


def _fs(spark: SparkSession, location: str) -> tuple[Any, Any]:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(location)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path  # type: ignore[union-attr]


def qualified(spark: SparkSession, location: str) -> str:
    """The fully qualified form of ``location`` (``file:/...`` for a local path), as metastores hold it."""
    fs, path = _fs(spark, location)
    return str(fs.makeQualified(path).toString())


def list_dirs(spark: SparkSession, location: str) -> list[str]:
    """The qualified folders directly under ``location`` (none when it does not exist)."""
    fs, path = _fs(spark, location)
    if not fs.exists(path):
        return []
    return [str(s.getPath().toString()) for s in fs.listStatus(path) if s.isDirectory()]


def delete(spark: SparkSession, location: str) -> bool:
    """Delete ``location`` and everything under it; False when there was nothing."""
    fs, path = _fs(spark, location)
    return bool(fs.delete(path, True))


def same_location(a: str | None, b: str | None) -> bool:
    """Whether two qualified locations name the same folder (a trailing slash aside)."""
    return a is not None and b is not None and a.rstrip("/") == b.rstrip("/")


def exists(spark: SparkSession, location: str) -> bool:
    fs, path = _fs(spark, location)
    return bool(fs.exists(path))
