"""A table's rows as of a landing: its merged Delta version overridden by its changes still pending in
the changelog (the latest per key, by the ordering key, as a merge would leave it).

The live views (:mod:`cdc_delta.views.live`) read a table as of the newest landing, so a reader sees a
change within one trigger whatever the merge delay; the nightly snapshot reads it as of the landing where
the stream passed its cut-off. Columns the pending changes add are there (their default on the rows that
predate them, where the source gave one); a pending change the table cannot take (an incompatible type
change, which stops the table) leaves the rows as the merger leaves the table: the changes landed before
it applied, it and those after left out, with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.changelog.pending import LANDED_AT, TableSummary, changes, table_summaries
from cdc_delta.changelog.table import LAND_SEQ, changelog_path, newest_land_seq
from cdc_delta.config import AppConfig, TableConfig
from cdc_delta.decode.decoded import is_row_event
from cdc_delta.delta.commits import app_commits, merged_through
from cdc_delta.delta.tables import current_version, table_schema
from cdc_delta.exceptions import SchemaChangeError
from cdc_delta.rows import column_defaults
from cdc_delta.rows.archival import archived_where
from cdc_delta.rows.dedupe import latest_per_key
from cdc_delta.rows.schema_evolution import plan_in_order
from cdc_delta.rows.target import TableState, table_state
from cdc_delta.rows.truncates import marked, segments
from cdc_delta.rows.typed import typed_literal
from cdc_delta.rows.typed_rows import typed_rows

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Merged:
    """A table's merged side: the Delta version read and the newest landing it holds."""

    version: int | None
    """None: the table held nothing then (or does not exist)."""
    land_seq: int


@dataclass(frozen=True)
class Cut:
    """A read that stops short of what has landed: the changes of landings up to ``through`` that
    ``visible`` takes (a predicate over the rows :func:`~cdc_delta.changelog.pending.changes` gives; None:
    all of them), over each table's newest version whose merges hold no landing past ``held[table]``
    (``through`` where the table is not named): where a merge went past what the cut shows, the version
    before it (:mod:`cdc_delta.consistency.cut` makes one at the consistent point)."""

    through: int
    held: Mapping[str, int] = field(default_factory=dict)
    visible: Column | None = None
    oldest_left_out_ms: Mapping[str, int] = field(default_factory=dict)
    """Per table, the oldest source time of a change landed that the cut leaves out (past ``through`` too)."""

    def held_at(self, table: str) -> int:
        """The newest landing ``table``'s merged version may hold."""
        return self.held.get(table, self.through)


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
    spark: SparkSession,
    config: AppConfig,
    tables: Iterable[TableConfig],
    through: int | None = None,
    cut: Cut | None = None,
) -> dict[str, DataFrame]:
    """Per table, its rows as of landing ``through`` (None: the newest), soft-deleted rows included:
    the merged rows (at the version that holds no landing past ``through``) overridden by the changelog
    rows past it; with a ``cut``, as of it instead. Tables with neither rows nor changes are left out. The
    pending changes of all the tables are read in one pass, here, and held as long as the rows are (a
    view's for its session; Spark frees them when the driver collects the rows)."""
    wanted = list(tables)
    if cut is not None:
        through = cut.through

    def merged_side(table: TableConfig) -> Merged:
        held = through if cut is None else cut.held_at(table.name)
        return merged_now(spark, config, table) if held is None else merged_at(spark, config, table, held)

    merged = {t.name: merged_side(t) for t in wanted}
    # Everything landed now, not at each action: the stream may land meanwhile (:func:`newest_land_seq`).
    upper = newest_land_seq(spark, config) if through is None else through
    bounds = {name: (m.land_seq, upper) for name, m in merged.items()}
    pending, summaries = None, {}
    if DeltaTable.isDeltaTable(spark, changelog_path(config)):  # none before the stream's first batch
        pending = changes(spark, config, bounds).frame
        if cut is not None and cut.visible is not None:
            pending = pending.where(cut.visible)
        summaries = table_summaries(pending)
    out = {}
    for table in wanted:
        rows = _table_rows(spark, config, table, merged[table.name], pending, summaries.get(table.name), upper)
        if rows is not None:
            out[table.name] = rows
    return out


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
        typed = archived_where(
            typed_rows(landed, plan.columns, F.col(LANDED_AT), defaults, list(descriptors)), table.archival_deletes
        )
        changes = typed.select(*[F.col(C.quote(f.name)).cast(f.dataType).alias(f.name) for f in schema.fields])
        rows = latest_per_key(changes if rows is None else rows.unionByName(changes), key)
        rows = marked(rows, segment.truncates)
    return rows
