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


def modified_ms(spark: SparkSession, location: str) -> int | None:
    """When the file at ``location`` was last written (epoch milliseconds); None when there is none."""
    fs, path = _fs(spark, location)
    return int(fs.getFileStatus(path).getModificationTime()) if fs.exists(path) else None


def list_names(spark: SparkSession, location: str) -> list[str]:
    """The names of the files and folders directly under ``location`` (none when it does not exist)."""
    fs, path = _fs(spark, location)
    if not fs.exists(path):
        return []
    return [str(s.getPath().getName()) for s in fs.listStatus(path)]


def read_text(spark: SparkSession, location: str) -> str | None:
    """The UTF-8 text of the file at ``location``; None when there is none."""
    fs, path = _fs(spark, location)
    if not fs.exists(path):
        return None
    stream = fs.open(path)
    try:
        jvm = spark.sparkContext._jvm
        return str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))  # type: ignore[union-attr]
    finally:
        stream.close()


def write_text(spark: SparkSession, location: str, text: str) -> None:
    """Write ``text`` (UTF-8) to the file at ``location``, replacing it: written beside under a
    temporary name, then renamed, so that a reader never finds half a file."""
    fs, path = _fs(spark, location)
    jvm = spark.sparkContext._jvm
    staging = jvm.org.apache.hadoop.fs.Path(path.getParent(), f".{path.getName()}.tmp")  # type: ignore[union-attr]
    out = fs.create(staging, True)
    try:
        out.write(bytearray(text.encode("utf-8")))
    finally:
        out.close()
    if fs.exists(path):
        fs.delete(path, False)
    if not fs.rename(staging, path):
        raise OSError(f"cannot rename {staging} to {location}")


def rename(spark: SparkSession, source: str, target: str) -> None:
    """Move the folder or file ``source`` to ``target`` (which must not exist): a rename on a file system,
    a copy on an object store."""
    fs, path = _fs(spark, source)
    _, to = _fs(spark, target)
    if not fs.rename(path, to):
        raise OSError(f"cannot move {source} to {target}")
