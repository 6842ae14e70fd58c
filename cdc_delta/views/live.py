"""Fresh reads: a table as its merged Delta version overridden by its changes still pending in the
changelog (the latest per key, by the ordering key, as a merge would leave it), so a reader sees a change
within one trigger whatever the merge delay.

The same rows serve the live views of ``cdc-delta sql`` and the nightly snapshot, which asks for a table
as of the landing where the stream passed its cut-off. Columns the pending changes add are there (their
default on the rows that predate them, where the source gave one); a pending change the table cannot
take (an incompatible type change, which stops the table) leaves the view as the merger leaves the table:
the changes landed before it applied, it and those after left out, with a warning.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.changelog.pending import LANDED_AT, TableSummary, changes, table_summaries
from cdc_delta.changelog.table import LAND_SEQ, changelog_path
from cdc_delta.config import AppConfig, TableConfig
from cdc_delta.decode.decoded import is_row_event
from cdc_delta.delta.commits import app_commits, merged_through
from cdc_delta.delta.tables import current_version, table_schema
from cdc_delta.exceptions import ConfigError, SchemaChangeError
from cdc_delta.merger import column_defaults
from cdc_delta.merger.dedupe import latest_per_key
from cdc_delta.merger.rows import typed_rows
from cdc_delta.merger.schema_evolution import plan_in_order
from cdc_delta.merger.target import TableState, table_state
from cdc_delta.merger.truncates import marked, segments
from cdc_delta.merger.typed import typed_literal

logger = logging.getLogger(__name__)

NEWEST = 2**62
"""A landing number above every landing: "up to the newest"."""


@dataclass(frozen=True)
class Merged:
    """A table's merged side: the Delta version read and the newest landing it holds."""

    version: int | None
    """None: the table held nothing then (or does not exist)."""
    land_seq: int


def merged_now(spark: SparkSession, config: AppConfig, table: TableConfig) -> Merged:
    """The table's current version and the landing it holds."""
    path = config.storage.table_path(table)
    if not DeltaTable.isDeltaTable(spark, path):
        return Merged(None, -1)
    position = merged_through(spark, path, config.app_id, table.name)  # brings the snapshot up to date
    return Merged(current_version(spark, path), position)


def merged_at(spark: SparkSession, config: AppConfig, table: TableConfig, through: int) -> Merged:
    """The table's newest version whose merges hold no landing past ``through``, and the landing it
    holds (from the merge commits' records)."""
    path = config.storage.table_path(table)
    if not DeltaTable.isDeltaTable(spark, path):
        return Merged(None, -1)
    for commit in app_commits(DeltaTable.forPath(spark, path), config.app_id):  # newest first
        held = commit.record.land_seq
        if commit.record.operation == "merge" and held is not None and held <= through:
            return Merged(commit.version, held)
    return Merged(None, -1)


def live_rows(
    spark: SparkSession, config: AppConfig, tables: Iterable[TableConfig], through: int | None = None
) -> dict[str, DataFrame]:
    """Per table, its rows as of landing ``through`` (None: the newest), soft-deleted rows included:
    the merged rows (at the version that holds no landing past ``through``) overridden by the changelog
    rows past it. Tables with neither rows nor changes are left out. The pending changes of all the
    tables are read in one pass, here, and held as long as the rows are (a view's for its session;
    Spark frees them when the driver collects the rows)."""
    wanted = list(tables)
    merged = {
        t.name: merged_now(spark, config, t) if through is None else merged_at(spark, config, t, through)
        for t in wanted
    }
    upper = NEWEST if through is None else through
    bounds = {name: (m.land_seq, upper) for name, m in merged.items()}
    pending, summaries = None, {}
    if DeltaTable.isDeltaTable(spark, changelog_path(config)):  # none before the stream's first batch
        pending = changes(spark, config, bounds).frame
        summaries = table_summaries(pending)
    out = {}
    for table in wanted:
        rows = _table_rows(spark, config, table, merged[table.name], pending, summaries.get(table.name), upper)
        if rows is not None:
            out[table.name] = rows
    return out


def live_view_names(table: TableConfig) -> tuple[str, str]:
    """(view of the table's live rows, view that keeps the soft-deleted ones): the table's name with
    ``_`` for ``.``, in Spark's global temporary database (``live`` in ``cdc-delta sql``)."""
    base = table.name.replace(".", "_")
    return base, f"{base}_all"


def named_in(query: str, database: str, tables: Iterable[TableConfig]) -> list[TableConfig]:
    """The tables whose live view (or ``_all`` view) ``query`` names as ``<database>.<view>``."""
    out = []
    for table in tables:
        view, _ = live_view_names(table)
        pattern = rf"(?<![\w`]){re.escape(database)}\s*\.\s*`?{re.escape(view)}(_all)?`?(?![\w`])"
        if re.search(pattern, query, re.IGNORECASE):
            out.append(table)
    return out


def register_live_views(spark: SparkSession, config: AppConfig, tables: Iterable[TableConfig]) -> list[str]:
    """Make ``tables``' live views in the session's global temporary database, as of now: the rows of
    each (soft-deleted ones out) and ``_all`` (kept). A view holds the versions read when it was made:
    make it again to see later changes. Returns the views made (a table with neither rows nor changes
    has none)."""
    wanted = list(tables)
    seen: dict[str, str] = {}
    for table in wanted:
        view, _ = live_view_names(table)
        if seen.setdefault(view.lower(), table.name) != table.name:
            raise ConfigError(
                f"tables {seen[view.lower()]} and {table.name} would share the live view {view}: rename one "
                "(tables[].name)"
            )
    database = spark.conf.get("spark.sql.globalTempDatabase")
    made = []
    by_name = {t.name: t for t in wanted}
    for name, rows in live_rows(spark, config, wanted).items():
        view, view_all = live_view_names(by_name[name])
        rows.createOrReplaceGlobalTempView(view_all)
        rows.where(~F.col(C.DELETED)).createOrReplaceGlobalTempView(view)
        made += [f"{database}.{view}", f"{database}.{view_all}"]
    return made


def _table_rows(
    spark: SparkSession,
    config: AppConfig,
    table: TableConfig,
    merged: Merged,
    pending: DataFrame | None,
    summary: TableSummary | None,
    upper: int,
) -> DataFrame | None:
    path = config.storage.table_path(table)
    state = table_state(spark, path) if merged.version is not None else TableState(False)
    if merged.version is None and summary is None:
        return None
    descriptors = summary.descriptors if summary is not None else {}
    landings = summary.first_landings if summary is not None else {}
    try:
        ordered = plan_in_order(table.name, state.business, landings, config.allow_type_widening)
    except SchemaChangeError as exc:  # refused from the first pending landing on: the merged rows only
        logger.warning("live view of %s: its pending changes are left out (%s)", table.name, exc)
        descriptors, summary = {}, None
        ordered = plan_in_order(table.name, state.business, {}, config.allow_type_widening)
    plan = ordered.plan
    if ordered.error is not None and ordered.through is not None:  # as the merger leaves the table: stopped there
        logger.warning(
            "live view of %s: its changes from landing %d on are left out (%s)",
            table.name,
            ordered.through + 1,
            ordered.error,
        )
        descriptors = {d: descriptors[d] for d in ordered.covers(landings)}
        upper = min(upper, ordered.through)
    schema = table_schema(plan.columns)
    added = column_defaults.added_defaults(plan, descriptors, filled=False)
    defaults = {**state.defaults, **added}
    key = table.row_key
    rows: DataFrame | None = None
    if merged.version is not None:
        stored = spark.read.format("delta").option("versionAsOf", merged.version).load(path)
        have = set(stored.columns)
        cols: list[Column] = []
        for f in schema.fields:
            if f.name in have:
                cols.append(F.col(C.quote(f.name)).cast(f.dataType).alias(f.name))
            elif f.name in added:
                cols.append(typed_literal(added[f.name].value, dict(plan.columns)[f.name]).alias(f.name))
            else:
                cols.append(F.lit(None).cast(f.dataType).alias(f.name))
        rows = stored.select(*cols)
    if summary is None or pending is None:
        return rows
    events = pending.where(is_row_event() & (F.col("_decoded.table") == table.name))
    # As the merger would apply them: segment by segment, each change against the rows so far (the
    # newest per key wins), then the segment's truncates.
    for segment in segments(summary.truncates, merged.land_seq, upper):
        landed = events.where((F.col(LAND_SEQ) > segment.after) & (F.col(LAND_SEQ) <= segment.through))
        typed = typed_rows(landed, plan.columns, F.col(LANDED_AT), defaults, list(descriptors))
        changes = typed.select(*[F.col(C.quote(f.name)).cast(f.dataType).alias(f.name) for f in schema.fields])
        rows = latest_per_key(changes if rows is None else rows.unionByName(changes), key)
        rows = marked(rows, segment.truncates)
    return rows
