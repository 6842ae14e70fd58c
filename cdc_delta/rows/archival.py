"""Archived rows (a table's ``archival_deletes``): the deletes of a purge are landed with op ``a``
(:mod:`cdc_delta.stream.purges`), and a row so deleted stays live, ``_cdc_op = 'a'``.

A purge is often found only once part of it has landed as deletes: its earlier deletes are then landed
again with op ``a`` and the same ordering key. At one ordering key an ``a`` replaces a ``d`` (and nothing
else), so that the merge, the live views and a rebuild turn those rows archived whenever they read them."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.config import AppConfig
from cdc_delta.config.archival import ArchivalDeletes
from cdc_delta.exceptions import ConfigError, one_line

ARCHIVE = C.ARCHIVE


def replaces(s_seq: Column, s_op: Column, t_seq: Column, t_op: Column) -> Column:
    """Whether a change (``s_``) replaces a row (``t_``): a greater ordering key, or the same one where the
    change archives what the row's delete removed."""
    return (s_seq > t_seq) | ((s_seq == t_seq) & (s_op == ARCHIVE) & (t_op == "d"))


def archived_first() -> Column:
    """The order, within one ordering key, that puts an archiving change first (:func:`replaces`)."""
    return (F.col(C.OP) == ARCHIVE).desc()


def archived_where(rows: DataFrame, settings: ArchivalDeletes | None) -> DataFrame:
    """Typed ``rows`` where a purge's delete of a row that ``archival_deletes.where`` does not take is a
    delete again (op ``d``, soft-deleted); without a ``where``, every archived delete stays archived."""
    if settings is None or settings.where is None:
        return rows
    kept = F.coalesce(F.expr(settings.where), F.lit(False))
    op = F.when((F.col(C.OP) == ARCHIVE) & ~kept, F.lit("d")).otherwise(F.col(C.OP))
    return rows.withColumn(C.OP, op).withColumn(C.DELETED, op == "d")


def check_where(spark: SparkSession, config: AppConfig) -> None:
    """:class:`ConfigError`, in one line, where a table's ``archival_deletes.where`` does not parse (found at
    start, not by each merge that reads it: a column it names that the table lacks stops the table there).
    Parsed by the session's parser: ``F.expr`` parses only when a query is analysed."""
    from pyspark.errors import ParseException

    parser = spark._jsparkSession.sessionState().sqlParser()
    for table in config.tables:
        where = table.archival_deletes.where if table.archival_deletes is not None else None
        if where is None:
            continue
        try:
            parser.parseExpression(where)
        except ParseException as exc:
            raise ConfigError(
                f"table {table.name}: archival_deletes.where {where!r} is not a SQL condition "
                f"({one_line(exc, limit=200)}): write one such as status = 'closed'"
            ) from None
