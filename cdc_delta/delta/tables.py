"""Replicated Delta tables as every job knows them: their properties, creating one, its id and version,
its symlink manifest and its stopped flag."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType, _parse_datatype_string

from cdc_delta import columns as C
from cdc_delta.events.ordering import SEQ_DDL
from cdc_delta.retry import is_conflict, retry

logger = logging.getLogger(__name__)

STOPPED_PROPERTY = "cdc_delta.stopped"
"""Set to 'true' on a table whose merge failed; its changes stay pending until an operator resumes it."""
STOPPED_REASON_PROPERTY = "cdc_delta.stopped_reason"
"""Why the table stopped."""
MANIFEST_PROPERTY = "delta.compatibility.symlinkFormatManifest.enabled"
"""With it, Delta rewrites the table's symlink manifest after each commit (``live_tables.enabled``)."""


def table_schema(business: tuple[tuple[str, str], ...]) -> StructType:
    """The full schema of a replicated table: business columns then metadata columns."""
    parts = [f"{C.quote(name)} {type_name}" for name, type_name in business]
    parts += [f"{C.quote(name)} {type_name or SEQ_DDL}" for name, type_name in C.METADATA_DDL]
    schema = _parse_datatype_string(", ".join(parts))
    assert isinstance(schema, StructType)
    return schema


def create_if_missing(
    spark: SparkSession, path: str, schema: StructType, properties: Mapping[str, str] | None = None
) -> None:
    """Create the Delta table at ``path`` with ``schema`` (and table ``properties``) unless one is there.
    Writers starting at once on an empty directory race to create it; the one that loses finds the table
    there when it tries again. Delta's ``createIfNotExists`` says it lost in one of three ways: a conflict,
    a log begun and not committed yet, or that log then read as no table (:data:`_LOST_CREATION`)."""

    def create() -> None:
        builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema)
        for name, value in (properties or {}).items():
            builder = builder.property(name, value)
        builder.execute()

    retry(create, _lost_creation, f"creating {path} (a race with another writer)", log_level=logging.INFO)


_LOST_CREATION = ("DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION", "DELTA_TABLE_NOT_FOUND")


def _lost_creation(exc: Exception) -> bool:
    return is_conflict(exc) or any(marker in str(exc) for marker in _LOST_CREATION)


def create_table(spark: SparkSession, path: str, business: tuple[tuple[str, str], ...], manifest: bool = False) -> str:
    """Create the replicated table at ``path`` unless one is there (:func:`create_if_missing`), with Delta
    keeping its symlink manifest current when ``manifest``; returns its Delta table id."""
    create_if_missing(spark, path, table_schema(business), {MANIFEST_PROPERTY: "true"} if manifest else None)
    logger.info("created Delta table %s with %d business columns", path, len(business))
    return table_id(spark, path)


def writer_features(spark: SparkSession, path: str) -> frozenset[str]:
    """The table features of the table's protocol, as this process last saw it (no listing)."""
    names = str(_seen(spark, path).protocol().writerFeatureNames().mkString(","))
    return frozenset(n for n in names.split(",") if n)


def _seen(spark: SparkSession, path: str) -> Any:
    """The table's snapshot as this process last saw it (right after its own commit, that commit's): no
    listing, no history read, no Spark job."""
    return _delta_log(spark, path).unsafeVolatileSnapshot()


def _delta_log(spark: SparkSession, path: str) -> Any:
    """The table's JVM ``DeltaLog``, with ``spark`` made the active session of the calling JVM thread
    first. Delta falls back on the thread's active session in places (a snapshot update whose
    asynchronous refresh failed or is missing raises ``DELTA_SPARK_SESSION_NOT_SET`` without one); the
    Dataset and SQL APIs set it, a direct JVM call from a worker thread does not. It is left active, not
    restored after the call: the snapshot returned computes its state lazily, on the caller's thread,
    when the caller first asks for its files or size, and that computation needs the session too."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    getattr(jvm, "org.apache.spark.sql.classic.SparkSession").setActiveSession(spark._jsparkSession)
    return jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)


def latest_snapshot(spark: SparkSession, path: str) -> Any:
    """The table's JVM snapshot brought up to date with its log (its version, files and size, its
    transaction ids are read from it without a Spark job once its state is known)."""
    none = spark.sparkContext._jvm.scala.Option.empty()  # type: ignore[union-attr]
    return _delta_log(spark, path).update(False, none, none)


def table_id(spark: SparkSession, path: str) -> str:
    """The id of the Delta table at ``path`` (a table re-created at the same path gets another)."""
    return str(_seen(spark, path).metadata().id())


def current_version(spark: SparkSession, path: str) -> int:
    """The table's version as this process last saw it (right after its own commit, that commit's)."""
    return int(_seen(spark, path).version())


def known_empty(spark: SparkSession, path: str) -> bool:
    """Whether the table as this process last saw it holds no data file, known from the checksum Delta
    keeps beside the snapshot of its own commits (no listing, no Spark job); False where it is not known."""
    checksum = _seen(spark, path).checksumOpt()
    return bool(checksum.isDefined()) and int(checksum.get().numFiles()) == 0


def enable_manifest(spark: SparkSession, path: str) -> None:
    """Have Delta write the table's symlink manifest now and after every later commit."""
    spark.sql(f"ALTER TABLE {C.delta_path_identifier(path)} SET TBLPROPERTIES ('{MANIFEST_PROPERTY}' = 'true')")
    logger.info("table %s: symlink manifest enabled (live_tables.enabled)", path)


def mark_stopped(spark: SparkSession, path: str, reason: str) -> None:
    """Flag the table as stopped, with why; the merger leaves its changes pending until an operator resumes
    it (:func:`clear_stopped`, ``cdc-delta resume-table``)."""
    spark.sql(
        f"ALTER TABLE {C.delta_path_identifier(path)} SET TBLPROPERTIES "
        f"('{STOPPED_PROPERTY}' = 'true', '{STOPPED_REASON_PROPERTY}' = {C.string_literal(reason)})"
    )


def clear_stopped(spark: SparkSession, path: str) -> None:
    """Clear the table's stopped flag and reason: the stream writes it again from its next start."""
    spark.sql(
        f"ALTER TABLE {C.delta_path_identifier(path)} UNSET TBLPROPERTIES IF EXISTS "
        f"('{STOPPED_PROPERTY}', '{STOPPED_REASON_PROPERTY}')"
    )
