"""Live views: each table's rows now (:mod:`cdc_delta.rows.as_of`: the merged Delta table overridden by
its changes still pending in the changelog) as Spark global temporary views, ``<db>_<table>`` (soft-deleted
rows out) and ``<db>_<table>_all``, made for the tables a query names (``cdc-delta sql``'s ``live.*``)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.config import AppConfig, TableConfig
from cdc_delta.exceptions import ConfigError
from cdc_delta.rows.as_of import Cut, live_rows


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


def register_live_views(
    spark: SparkSession, config: AppConfig, tables: Iterable[TableConfig], cut: Cut | None = None
) -> list[str]:
    """Make ``tables``' live views in the session's global temporary database, as of now (or as of
    ``cut``: :mod:`cdc_delta.consistency.cut`): the rows of each (soft-deleted ones out) and ``_all``
    (kept). A view holds the versions read when it was made: make it again to see later changes. Returns
    the views made (a table with neither rows nor changes has none)."""
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
    for name, rows in live_rows(spark, config, wanted, cut=cut).items():
        view, view_all = live_view_names(by_name[name])
        rows.createOrReplaceGlobalTempView(view_all)
        rows.where(~F.col(C.DELETED)).createOrReplaceGlobalTempView(view)
        made += [f"{database}.{view}", f"{database}.{view_all}"]
    return made
