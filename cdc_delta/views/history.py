"""History views (a table's ``history``, :mod:`cdc_delta.history`): ``hist.<db>_<table>``, every version of
every row with when it was valid, and a table as of a source time (``cdc-delta sql --as-of``), for the
tables a query names."""

from __future__ import annotations

from collections.abc import Iterable

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.config import AppConfig, TableConfig
from cdc_delta.config.history import History
from cdc_delta.exceptions import QueryError
from cdc_delta.history.append import history_path
from cdc_delta.history.versions import as_of, read_versions, versions_sql
from cdc_delta.metastore import ensure_database
from cdc_delta.views.live import live_view_names

HISTORY_DATABASE = "hist"


def register_history_views(spark: SparkSession, config: AppConfig, tables: Iterable[TableConfig]) -> list[str]:
    """Make ``hist.<db>_<table>`` in the session's catalog for each of ``tables``: a view over its history
    (:func:`~cdc_delta.history.versions.versions_sql`), made again from the history's columns now.
    A table without ``history`` is a :class:`QueryError` saying so; one whose history holds nothing yet
    has no view. Returns the views made."""
    made = []
    for table, settings, path in _histories(spark, config, tables):
        ensure_database(spark, HISTORY_DATABASE)
        columns = spark.read.format("delta").load(path).columns
        query = versions_sql(C.delta_path_identifier(path), columns, table.row_key, settings)
        name = f"{HISTORY_DATABASE}.{C.quote(live_view_names(table)[0])}"
        spark.sql(f"CREATE OR REPLACE VIEW {name} AS {query}")
        made.append(f"{HISTORY_DATABASE}.{live_view_names(table)[0]}")
    return made


def register_as_of_views(spark: SparkSession, config: AppConfig, tables: Iterable[TableConfig], at: str) -> list[str]:
    """Make each of ``tables``' live view (:func:`~cdc_delta.views.live.live_view_names`, in the session's
    global temporary database) its rows as of source time ``at`` (text such as ``2026-12-01 10:00:00``,
    in the session's time zone, UTC), read from its history: the versions valid then. Returns the views
    made."""
    moment = F.lit(at).try_cast("timestamp")
    if spark.range(1).select(moment.alias("at")).first()["at"] is None:  # type: ignore[index]
        raise QueryError(f"--as-of {at!r} is not a time: write one such as '2026-12-01 10:00:00' (UTC)")
    database = spark.conf.get("spark.sql.globalTempDatabase")
    made = []
    for table, settings, path in _histories(spark, config, tables):
        view, _ = live_view_names(table)
        as_of(read_versions(spark, path, table.row_key, settings), moment).createOrReplaceGlobalTempView(view)
        made.append(f"{database}.{view}")
    return made


def _histories(
    spark: SparkSession, config: AppConfig, tables: Iterable[TableConfig]
) -> list[tuple[TableConfig, History, str]]:
    """(table, its ``history``, its history's path) of each of ``tables`` whose history holds something;
    :class:`QueryError` for a table without ``history``."""
    out = []
    for table in tables:
        if table.history is None:
            raise QueryError(
                f"table {table.name} keeps no history: set history: true on its entry (its versions start from "
                "its rows then)"
            )
        path = history_path(config, table.name)
        if DeltaTable.isDeltaTable(spark, path):
            out.append((table, table.history, path))
    return out
