"""Fresh views kept in the metastore: per table, a view that any Spark session with that metastore can
read, showing the table's changes within one trigger whatever the merge delay.

A view kept in a metastore is SQL text: it may not name the temporary views and functions that the
live views of ``cdc-delta sql`` (:mod:`.live`) are made of. So a fresh view is the table's rows as
Delta holds them now (the newest version, not one pinned), overridden by the changelog rows of the
table past the landing it had merged when the view was made (the latest per key by the ordering key:
a change a merge applied since then ties with the table's own row, or loses to a newer one). Landed
images still as Debezium wrote them are made canonical by cdc-delta's Hive function
(``cdc_canonical_image``, the JVM function of :mod:`cdc_delta.decode.canonical` kept in the metastore
with its jar) and typed with ``from_json``, as the merger types them.

What the text cannot follow, it does not guess: the changelog rows are read up to the first landing
that holds a change of the table the view's text cannot type. That is a truncate, a change of a schema
the table did not have when the view was made (the table's schema changed, or a new one among its
pending changes), or an image the function leaves to the reference decoder. From there on the view
shows the table as merged: stale, not wrong. Registering the views again (the hourly maintenance,
or ``cdc-delta fresh-views --register``) moves each past what its table has merged since.

Two things would make a view wrong, and are kept from it by its text alone, whenever it was made. A column
the merger widens after the view was made is read as wide (the views follow their query's types). A
tombstone the maintenance purged would let an older change of its key, still read by the view, show as
live: the purge removes only tombstones whose source change is older than
``maintenance.tombstone_retention_hours``, so a view overrides a key only where every change of it that
the view reads is younger than that, less a margin for clocks (:data:`CLOCK_MARGIN_MS`); any later change
of the key (the delete among them) is younger still, and its tombstone is kept. A key with an older change
among those the view reads is shown as the table holds it: stale, not wrong.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from delta.tables import DeltaTable
from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from cdc_delta import columns as C
from cdc_delta.changelog.table import LAND_SEQ, TABLE, changelog_path, schemas_path
from cdc_delta.changelog.table_index import indexed
from cdc_delta.config import AppConfig, TableConfig
from cdc_delta.config.fresh_views import LOCAL_JAR
from cdc_delta.decode.canonical import function_plans, images_of
from cdc_delta.decode.images import REF_PREFIX
from cdc_delta.decode.plan import decode_plan
from cdc_delta.exceptions import CdcDeltaError, SchemaChangeError
from cdc_delta.metastore import ensure_database
from cdc_delta.rows.as_of import merged_now
from cdc_delta.rows.column_defaults import ColumnDefault
from cdc_delta.rows.schema_evolution import descriptor_columns, plan_schema
from cdc_delta.rows.target import table_state
from cdc_delta.rows.truncates import seq_sql
from cdc_delta.rows.typed import json_type
from cdc_delta.spark_session import jars_dir
from cdc_delta.views.live import live_view_names

logger = logging.getLogger(__name__)

DERBY_TEXT_LIMIT = 32_700
"""The longest view text the embedded Derby metastore keeps (its LONG VARCHAR columns)."""
FUNCTION = "cdc_canonical_image"
FUNCTION_CLASS = "io.cdcdelta.decode.HiveCanonicalImage"
ROW_OPS = ("c", "u", "d", "r")
CLOCK_MARGIN_MS = 10 * 60 * 1000
"""How much younger than the tombstone retention a change must be for a view to read it: the readers',
the maintenance's and the source's clocks may differ, and a later change of a key may carry a slightly
earlier source time than the one before it."""
_FOLLOWS_TYPES = "WITH SCHEMA TYPE EVOLUTION"
"""A view's columns take the types its query has when read, not those it had when made: a column the
merger widens since (decimal(10,2) -> decimal(12,4)) is read as wide, never cast back (Spark's default
binding would round it)."""


@dataclass(frozen=True)
class FreshView:
    """One table's fresh views: their names, where their reading of the changelog starts, and DDL."""

    table: str
    view: str
    view_all: str
    after: int
    """The landing the table had merged when the view was made: the view reads the changelog past it."""
    schemas: int
    """The table's schemas (Connect schemas, column descriptors) whose changes the view types."""
    view_all_ddl: str
    view_ddl: str
    refused: str = ""
    """Why :func:`register` did not register it (empty: registered, or only printed)."""


def function_ddl(config: AppConfig) -> str:
    """The persistent function the views call, with the jar a reader loads it from."""
    jar = config.fresh_views.function_jar or str((jars_dir(config.spark) / LOCAL_JAR).resolve())
    name = f"{C.quote(config.fresh_views.database)}.{FUNCTION}"
    return f"CREATE OR REPLACE FUNCTION {name} AS '{FUNCTION_CLASS}' USING JAR {C.string_literal(jar)}"


def fresh_views(spark: SparkSession, config: AppConfig) -> list[FreshView]:
    """The views of every replicated table that has a Delta table (one without has none yet: the merger
    makes it with its first merge)."""
    tables = []
    for table in _named_apart(indexed(spark, config).tables()):
        path = config.storage.table_path(table)
        if DeltaTable.isDeltaTable(spark, path):
            tables.append(table)
        else:
            logger.info("%s: no Delta table yet at %s, no fresh view", table.name, path)
    afters = {t.name: merged_now(spark, config, t).land_seq for t in tables}
    landed = _landed_schemas(spark, config, afters)
    texts = _schema_texts(spark, config, {ref for ids in landed.values() for ref in ids})
    out = []
    for t in tables:
        try:
            out.append(_fresh_view(spark, config, t, afters[t.name], landed.get(t.name, set()), texts))
        except (AnalysisException, Py4JJavaError, CdcDeltaError) as exc:  # one table's, never the others'
            view, view_all = (f"{config.fresh_views.database}.{name}" for name in live_view_names(t))
            out.append(FreshView(t.name, view, view_all, afters[t.name], 0, "", "", refused=_first_line(exc)))
    return out


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def register(spark: SparkSession, config: AppConfig) -> list[FreshView]:
    """Create or replace the function and every table's views in the metastore of ``spark`` (a session
    with Hive support, :func:`cdc_delta.metastore.metastore_conf`)."""
    ensure_database(spark, config.fresh_views.database)
    spark.sql(function_ddl(config))
    done = []
    for fresh in fresh_views(spark, config):
        if not fresh.refused and not config.snapshot.metastore_uri and len(fresh.view_all_ddl) > DERBY_TEXT_LIMIT:
            fresh = dataclasses.replace(
                fresh,
                refused=f"its text ({len(fresh.view_all_ddl):,} characters) is longer than the embedded Derby "
                f"metastore keeps ({DERBY_TEXT_LIMIT:,}): use a Hive metastore (snapshot.metastore_uri)",
            )
        if not fresh.refused:
            try:
                spark.sql(fresh.view_all_ddl)
                spark.sql(fresh.view_ddl)
            except (AnalysisException, Py4JJavaError) as exc:  # one table's, never the others'
                fresh = dataclasses.replace(fresh, refused=f"Spark refused its text: {_first_line(exc)}")
        if fresh.refused:
            logger.error("fresh view %s not registered: %s", fresh.view, fresh.refused)
            _drop(spark, fresh)  # a view of before would read from an old landing: gone rather than stale
        else:
            logger.info("fresh view %s: the changelog past landing %d", fresh.view, fresh.after)
        done.append(fresh)
    return done


def _drop(spark: SparkSession, fresh: FreshView) -> None:
    for name in (fresh.view, fresh.view_all):
        db, view = name.split(".")
        spark.sql(f"DROP VIEW IF EXISTS {C.quote(db)}.{C.quote(view)}")


def _named_apart(tables: list[TableConfig]) -> list[TableConfig]:
    """``tables`` without those whose view names another's would take (logged)."""
    seen: dict[str, str] = {}
    kept = []
    for table in tables:
        view, _ = live_view_names(table)
        owner = seen.setdefault(view.lower(), table.name)
        if owner == table.name:
            kept.append(table)
        else:
            logger.warning(
                "%s: no fresh view: %s would share the view %s; rename one (tables[].name)", table.name, owner, view
            )
    return kept


def _landed_schemas(spark: SparkSession, config: AppConfig, afters: Mapping[str, int]) -> dict[str, set[str]]:
    """Per table of ``afters`` (each with the landing it has merged), the schema ids (a Connect schema's
    reference or a column descriptor's id) its changes were landed with since its last merged change: the
    schemas its next changes come with. One small job over the changelog's table, schema id and landing."""
    path = changelog_path(config)
    if not DeltaTable.isDeltaTable(spark, path) or not afters:
        return {}
    rows = (
        spark.read.format("delta")
        .load(path)
        .where(F.col("op").isin(*ROW_OPS) & F.col("schema_id").isNotNull() & F.col(TABLE).isin(sorted(afters)))
        .groupBy(TABLE, "schema_id")
        .agg(F.max(LAND_SEQ).alias("last"))
        .collect()
    )
    uses: dict[str, dict[str, int]] = {}
    for r in rows:
        uses.setdefault(r[TABLE], {})[r["schema_id"]] = r["last"]
    out: dict[str, set[str]] = {}
    for table, last in uses.items():
        merged = [landing for landing in last.values() if landing <= afters[table]]
        since = max(merged, default=-1)
        out[table] = {i for i, landing in last.items() if landing >= since}
    return out


def _schema_texts(spark: SparkSession, config: AppConfig, ids: set[str]) -> dict[str, str]:
    """The stored text of each schema id of ``ids``: a Connect schema's, or a column descriptor."""
    if not ids:
        return {}
    stored = spark.read.format("delta").load(schemas_path(config)).where(F.col("schema_id").isin(sorted(ids)))
    return {r["schema_id"]: r["schema_json"] for r in stored.select("schema_id", "schema_json").collect()}


def _descriptors(
    config: AppConfig, table: TableConfig, landed: set[str], texts: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, Any]]:
    """The column descriptor of each schema id of ``landed`` the view can type (a Connect schema's that the
    canonical-image function reads, or a descriptor's), and the function's plans for the Connect schemas."""
    refs = [(ref, table.name) for ref in landed if ref.startswith(REF_PREFIX) and ref in texts]
    images = images_of(refs, texts)
    out = {ref: image.descriptor for ref, image in images.items()}
    out.update({i: texts[i] for i in landed if not i.startswith(REF_PREFIX) and i in texts})
    return out, function_plans(refs, images, decode_plan(config))


def _fresh_view(
    spark: SparkSession,
    config: AppConfig,
    table: TableConfig,
    after: int,
    landed: set[str],
    texts: Mapping[str, str],
) -> FreshView:
    path = config.storage.table_path(table)
    # The columns first, then the properties: a column's default is recorded before the column is added.
    schema = spark.read.format("delta").load(path).schema
    state = table_state(spark, path)
    business = tuple((f.name, f.dataType.simpleString()) for f in schema.fields if not f.name.startswith(C.PREFIX))
    lacking = [k for k in table.row_key if k not in schema.names]
    descriptors, plans = _descriptors(config, table, landed, texts)
    # Only the schemas the table's columns hold as they are: a change of any other waits for its merge.
    typable = {i: d for i, d in descriptors.items() if _fits(table.name, business, d, config.allow_type_widening)}
    view, view_all = live_view_names(table)
    db = C.quote(config.fresh_views.database)
    body = _view_sql(config, table, path, schema, after, typable, plans, state.defaults) if not lacking else ""
    return FreshView(
        table=table.name,
        view=f"{config.fresh_views.database}.{view}",
        view_all=f"{config.fresh_views.database}.{view_all}",
        after=after,
        schemas=len(typable),
        view_all_ddl=f"CREATE OR REPLACE VIEW {db}.{C.quote(view_all)} {_FOLLOWS_TYPES} AS\n{body}",
        view_ddl=(
            f"CREATE OR REPLACE VIEW {db}.{C.quote(view)} {_FOLLOWS_TYPES} AS "
            f"SELECT * FROM {db}.{C.quote(view_all)} WHERE NOT {C.quote(C.DELETED)}"
        ),
        refused=(
            f"its Delta table has no key column {', '.join(lacking)} yet: no change of it has been merged "
            "(cdc-delta status says why)"
            if lacking
            else ""
        ),
    )


def _fits(table: str, business: Iterable[tuple[str, str]], descriptor: str, allow_widening: bool) -> bool:
    """Whether the table's columns take the changes of ``descriptor`` as they are (nothing to add or widen)."""
    try:
        return not plan_schema(table, business, [descriptor], allow_widening).changed
    except SchemaChangeError:
        return False


def _view_sql(
    config: AppConfig,
    table: TableConfig,
    path: str,
    schema: StructType,
    after: int,
    typable: Mapping[str, str],
    plans: Mapping[str, Any],
    defaults: Mapping[str, ColumnDefault],
) -> str:
    """The SQL of a table's ``_all`` view (see the module's docstring)."""
    business = [(f.name, f.dataType.simpleString()) for f in schema.fields if not f.name.startswith(C.PREFIX)]
    names = [f.name for f in schema.fields]
    q = C.quote
    function = f"{q(config.fresh_views.database)}.{FUNCTION}"
    image = (
        f"CASE WHEN {_is_ref('schema_id')} THEN {function}(payload, op, schema_id, {q(TABLE)}, "
        f"{C.string_literal(json.dumps(plans, sort_keys=True))}) ELSE row_json END"
    )
    known = f"schema_id IN ({', '.join(C.string_literal(i) for i in sorted(typable))})" if typable else "FALSE"
    ops = ", ".join(repr(op) for op in ROW_OPS)
    untypable = f"coalesce(op NOT IN ({ops}), TRUE) OR NOT coalesce({known}, FALSE) OR _cdc_image IS NULL"
    as_read = ", ".join(f"{q(name)} {json_type(type_name)}" for name, type_name in business)
    positional = ", ".join(f"c{i}: {json_type(type_name)}" for i, (_, type_name) in enumerate(business))
    made = {
        name: _filled(_typed(f"_cdc_row.c{i}", type_name), name, type_name, defaults.get(name), typable)
        for i, (name, type_name) in enumerate(business)
    }
    made |= {
        C.OP: "op",
        C.DELETED: "op = 'd'",
        C.SEQ: "seq",
        C.SOURCE_TS: "timestamp_millis(source_ts_ms)",
        C.INGESTED_AT: "CAST(landed_at AS timestamp)",
        C.SOURCE_DB: "source_db",
        C.SOURCE_TABLE: "source_table",
        C.TOPIC: "topic",
        C.PARTITION: "CAST(`partition` AS int)",
        C.OFFSET: "`offset`",
    }
    typed = ", ".join(f"{made[n]} AS {q(n)}" for n in names)  # the table's order: the union is by position
    partition = ", ".join(q(k) for k in table.row_key)
    # Only keys whose every change read here is younger than what the purge may remove (the module's docstring).
    window_ms = max(0, round(config.maintenance.tombstone_retention_hours * 3_600_000) - CLOCK_MARGIN_MS)
    columns = ", ".join(q(n) for n in names)
    parse = f"CAST(from_json(_cdc_image, {C.string_literal(as_read)}) AS STRUCT<{positional}>)" if business else "NULL"
    return f"""WITH landed AS (
  SELECT *, {image} AS _cdc_image
  FROM {C.delta_path_identifier(changelog_path(config))}
  WHERE {q(TABLE)} = {C.string_literal(table.name)} AND {LAND_SEQ} > {after}
), readable AS (
  SELECT *, min(CASE WHEN {untypable} THEN {LAND_SEQ} END) OVER () AS _cdc_stop FROM landed
), changes AS (
  SELECT *, {parse} AS _cdc_row FROM readable WHERE _cdc_stop IS NULL OR {LAND_SEQ} < _cdc_stop
), typed AS (
  SELECT {typed}, coalesce(source_ts_ms, 0) AS _cdc_ts FROM changes
), aged AS (
  SELECT *, min(_cdc_ts) OVER (PARTITION BY {partition}) AS _cdc_oldest FROM typed
), rows AS (
  SELECT {columns}, 0 AS _cdc_from FROM {C.delta_path_identifier(path)}
  UNION ALL
  SELECT {columns}, 1 AS _cdc_from FROM aged WHERE _cdc_oldest >= unix_millis(current_timestamp()) - {window_ms}
), ranked AS (
  SELECT *, row_number() OVER (PARTITION BY {partition} ORDER BY {q(C.SEQ)} DESC, _cdc_from) AS _cdc_rank
  FROM rows
)
SELECT {columns} FROM ranked WHERE _cdc_rank = 1"""


def _is_ref(column: str) -> str:
    """SQL of :func:`cdc_delta.decode.images.is_schema_ref`."""
    return f"startswith({column}, {C.string_literal(REF_PREFIX)})"


def _typed(value: str, type_name: str) -> str:
    """SQL of :func:`cdc_delta.rows.typed.typed`: ``value`` (read as its JSON type) as ``type_name``."""
    if type_name == "date":
        return f"to_date({value})"
    if type_name == "timestamp":
        return f"timestamp_micros({value})"
    if type_name == "binary":
        return f"unbase64({value})"
    return f"CAST({value} AS {type_name})"


def _literal(value: object, type_name: str) -> str:
    """SQL of :func:`cdc_delta.rows.typed.typed_literal`: a canonical JSON value as a typed literal."""
    if value is None:
        return f"CAST(NULL AS {type_name})"
    if type_name == "array<string>":
        assert isinstance(value, list)
        return f"CAST(array({', '.join(C.string_literal(str(v)) for v in value)}) AS array<string>)"
    if isinstance(value, bool):
        text = "TRUE" if value else "FALSE"
    elif isinstance(value, int | float):
        text = C.string_literal(repr(value))
    else:
        text = C.string_literal(str(value))
    if type_name in ("date", "timestamp", "binary"):
        source = f"CAST({text} AS bigint)" if type_name == "timestamp" else text
        return _typed(source, type_name)
    return f"CAST({text} AS {type_name})"


def _filled(
    value: str,
    name: str,
    type_name: str,
    default: ColumnDefault | None,
    typable: Mapping[str, str],
) -> str:
    """SQL of :func:`cdc_delta.rows.typed_rows._filled`: the column's default for changes whose schema lacks
    it and that predate its addition at the source."""
    if default is None:
        return value
    lacking = sorted(i for i, d in typable.items() if name not in descriptor_columns(d))
    if not lacking:
        return value
    ids = ", ".join(C.string_literal(i) for i in lacking)
    older = f"schema_id IN ({ids}) AND seq < {seq_sql(default.since)}"
    return f"CASE WHEN {older} THEN {_literal(default.value, type_name)} ELSE {value} END"
