"""The target table as the merger sees it: its state before a batch, and changes to its schema."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from cdc_delta import columns as C
from cdc_delta.delta.tables import MANIFEST_PROPERTY, STOPPED_PROPERTY, STOPPED_REASON_PROPERTY
from cdc_delta.rows import column_defaults
from cdc_delta.rows.column_defaults import ColumnDefault
from cdc_delta.rows.schema_evolution import SchemaPlan

logger = logging.getLogger(__name__)

TYPE_WIDENING_PROPERTY = "delta.enableTypeWidening"


@dataclass(frozen=True)
class TableState:
    """What a batch needs to know of a target table before merging into it."""

    exists: bool
    business: tuple[tuple[str, str], ...] = ()
    stopped: bool = False
    stopped_reason: str = ""
    defaults: dict[str, ColumnDefault] = field(default_factory=dict)
    """Columns the source added with a default (see :mod:`cdc_delta.rows.column_defaults`)."""
    manifest: bool = False
    """Delta keeps the table's symlink manifest current (:data:`~cdc_delta.delta.tables.MANIFEST_PROPERTY`)."""
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
