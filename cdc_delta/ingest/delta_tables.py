"""Create replicated Delta tables, evolve their schema, and keep their stopped flag."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType, _parse_datatype_string

from cdc_delta import columns as C
from cdc_delta.events.ordering import SEQ_DDL
from cdc_delta.ingest import column_defaults
from cdc_delta.ingest.column_defaults import ColumnDefault
from cdc_delta.ingest.schema_evolution import SchemaPlan

logger = logging.getLogger(__name__)

STOPPED_PROPERTY = "cdc_delta.stopped"
"""Set to 'true' on a table whose source made a change it cannot follow; its events are parked."""
STOPPED_REASON_PROPERTY = "cdc_delta.stopped_reason"
"""Why the table stopped, for the reason of every event parked after."""
TYPE_WIDENING_PROPERTY = "delta.enableTypeWidening"
MANIFEST_PROPERTY = "delta.compatibility.symlinkFormatManifest.enabled"
"""With it, Delta rewrites the table's symlink manifest after each commit (``live_tables.enabled``)."""


@dataclass(frozen=True)
class TableState:
    """What a batch needs to know of a target table before merging into it."""

    exists: bool
    business: tuple[tuple[str, str], ...] = ()
    stopped: bool = False
    stopped_reason: str = ""
    defaults: dict[str, ColumnDefault] = field(default_factory=dict)
    """Columns the source added with a default (see :mod:`cdc_delta.ingest.column_defaults`)."""
    manifest: bool = False
    """Delta keeps the table's symlink manifest current (:data:`MANIFEST_PROPERTY`)."""
    table_id: str | None = None
    """The Delta table's id (its metadata's), which a table re-created at the same path does not keep."""


def table_state(spark: SparkSession, path: str) -> TableState:
    """The table's business columns and stopped flag; ``exists=False`` when there is no table yet."""
    if not DeltaTable.isDeltaTable(spark, path):
        return TableState(exists=False)
    detail = DeltaTable.forPath(spark, path).detail().select("id", "properties").first()
    properties = detail["properties"] if detail else {}
    schema = spark.read.format("delta").load(path).schema
    business = tuple((f.name, f.dataType.simpleString()) for f in schema.fields if not f.name.startswith(C.PREFIX))
    properties = properties or {}
    stopped = properties.get(STOPPED_PROPERTY) == "true"
    reason = properties.get(STOPPED_REASON_PROPERTY, "")
    defaults = column_defaults.from_properties(properties)
    manifest = properties.get(MANIFEST_PROPERTY) == "true"
    return TableState(True, business, stopped, reason, defaults, manifest, detail["id"] if detail else None)


def table_schema(business: tuple[tuple[str, str], ...]) -> StructType:
    """The full schema of a replicated table: business columns then metadata columns."""
    parts = [f"{C.quote(name)} {type_name}" for name, type_name in business]
    parts += [f"{C.quote(name)} {type_name or SEQ_DDL}" for name, type_name in C.METADATA_DDL]
    schema = _parse_datatype_string(", ".join(parts))
    assert isinstance(schema, StructType)
    return schema


def create_table(spark: SparkSession, path: str, business: tuple[tuple[str, str], ...], manifest: bool = False) -> str:
    """Create the Delta table at ``path`` (no-op when a concurrent writer created it first), with
    Delta keeping its symlink manifest current when ``manifest``; returns its Delta table id."""
    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(table_schema(business))
    if manifest:
        builder = builder.property(MANIFEST_PROPERTY, "true")
    builder.execute()
    logger.info("created Delta table %s with %d business columns", path, len(business))
    return table_id(spark, path)


def table_id(spark: SparkSession, path: str) -> str:
    """The id of the Delta table at ``path`` as this process last saw it (no Spark job)."""
    log = spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)  # type: ignore[union-attr]
    return str(log.unsafeVolatileSnapshot().metadata().id())


def apply_schema_plan(spark: SparkSession, path: str, plan: SchemaPlan, widening: str = "rewrite") -> None:
    """Add the plan's new columns and widen the widened ones (identifiers quoted, types validated):
    by rewriting the table (``rewrite``) or with Delta's typeWidening feature (``delta_feature``), see
    :attr:`cdc_delta.config.AppConfig.type_widening`."""
    target = C.delta_path_identifier(path)
    if plan.added:
        cols = ", ".join(f"{C.quote(name)} {type_name}" for name, type_name in plan.added)
        spark.sql(f"ALTER TABLE {target} ADD COLUMNS ({cols})")
        logger.info("table %s: added columns %s", path, ", ".join(f"{n} {t}" for n, t in plan.added))
    if not plan.widened:
        return
    if widening == "delta_feature":
        spark.sql(f"ALTER TABLE {target} SET TBLPROPERTIES ('{TYPE_WIDENING_PROPERTY}' = 'true')")
        for name, _, new in plan.widened:
            spark.sql(f"ALTER TABLE {target} ALTER COLUMN {C.quote(name)} TYPE {new}")
    else:
        _rewrite_widened(spark, path, plan.widened)
    for name, old, new in plan.widened:
        logger.warning("table %s: widened column %s from %s to %s (%s)", path, name, old, new, widening)


def _rewrite_widened(spark: SparkSession, path: str, widened: tuple[tuple[str, str, str], ...]) -> None:
    """One commit that rewrites every file of the table with the widened columns cast up (an overwrite
    of the table by itself: Delta reads the snapshot it replaces). The table's properties stay."""
    from pyspark.sql import functions as F

    rows = spark.read.format("delta").load(path)
    casts = {name: F.col(C.quote(name)).cast(new) for name, _, new in widened}
    rows.withColumns(casts).write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)


def enable_manifest(spark: SparkSession, path: str) -> None:
    """Have Delta write the table's symlink manifest now and after every later commit."""
    spark.sql(f"ALTER TABLE {C.delta_path_identifier(path)} SET TBLPROPERTIES ('{MANIFEST_PROPERTY}' = 'true')")
    logger.info("table %s: symlink manifest enabled (live_tables.enabled)", path)


def mark_stopped(spark: SparkSession, path: str, reason: str) -> None:
    """Flag the table as stopped, with why; later batches park its events until an operator resumes it
    (:func:`clear_stopped`, ``cdc-delta resume-table``)."""
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
