"""A table's versions (SCD type 2), read from its history (:mod:`.append`) by one SQL query, which
``cdc-delta sql`` makes the view ``hist.<db>_<table>``.

Per key, the history's changes and the truncates that reach it, in ordering-key order:
- a truncate reaches a key whose source table it truncated, where a change of the key landed at or
  before the truncate's landing (the rows the merge soft-deletes: :mod:`cdc_delta.rows.truncates`);
- at one ordering key, one change (a purge's archiving one before a delete: :mod:`cdc_delta.rows.archival`);
- a delete or a truncate closes the key's open version; a change opens a new version where the key has
  none open or where it changes a tracked column (:meth:`~cdc_delta.config.history.History.tracked`),
  and otherwise updates the open version in place (a change to untracked columns, a record delivered
  twice, a re-snapshot's read of an unchanged row).

A version has the image of its last change, when it opened (its first change: ``_cdc_valid_from``, the
source commit time, and ``_cdc_valid_from_seq``, the ordering key, which orders two changes of one
millisecond) and when it closed (the next change of its key: ``_cdc_valid_to`` and
``_cdc_valid_to_seq``; null while it is current), and what closed it (``_cdc_closed_by``: the op of a new
version, ``d`` or ``t``). Its ``_cdc_op`` and ``_cdc_seq`` are its last change's, as in the table: the
current versions are the table's live rows (``_cdc_deleted`` false)."""

from __future__ import annotations

import logging

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.config.history import History
from cdc_delta.history.append import LAND_SEQ, TRUNCATE

logger = logging.getLogger(__name__)

VALID_FROM = "_cdc_valid_from"
VALID_TO = "_cdc_valid_to"
IS_CURRENT = "_cdc_is_current"
CLOSED_BY = "_cdc_closed_by"
VALID_FROM_SEQ = "_cdc_valid_from_seq"
VALID_TO_SEQ = "_cdc_valid_to_seq"
CLOSERS = ("d", TRUNCATE)


def versions_sql(source: str, columns: list[str], key: list[str], settings: History) -> str:
    """The query of the versions of the history ``source`` (a table reference, e.g. delta.`path`) whose
    columns are ``columns``, keyed by ``key`` (the table's row key)."""
    q = C.quote
    business = [c for c in columns if not c.startswith(C.PREFIX)]
    tracked = settings.tracked(business)
    named = {c.lower() for c in [*settings.columns, *settings.except_columns]}
    missing = sorted(named - {c.lower() for c in business})
    if missing:
        logger.warning("history: %s named but not columns of the table: left out", ", ".join(missing))
    as_stored = {c.lower(): c for c in columns}
    key = [as_stored.get(k.lower(), k) for k in key]  # the source's names: a config may spell them otherwise
    keys = ", ".join(q(k) for k in key)
    grouped = list(dict.fromkeys([*key, C.SOURCE_DB, C.SOURCE_TABLE]))
    by_source = ", ".join(q(c) for c in grouped)
    item_columns = [*business, C.OP, C.SEQ, C.SOURCE_TS, C.SOURCE_DB, C.SOURCE_TABLE, LAND_SEQ]
    from_marks = [f"f.{q(c)}" if c in grouped else f"NULL AS {q(c)}" for c in business]
    mark_columns = ", ".join(
        [*from_marks, f"'{TRUNCATE}'", "t.seq", "t.ts", f"f.{q(C.SOURCE_DB)}", f"f.{q(C.SOURCE_TABLE)}", "t.land"]
    )
    tracked_struct = (
        "named_struct(" + ", ".join(f"'c{i}', {q(c)}" for i, c in enumerate(tracked)) + ")" if tracked else "0"
    )
    window = f"PARTITION BY {keys} ORDER BY {q(C.SEQ)}"
    closer = f"{q(C.OP)} IN ({', '.join(repr(c) for c in CLOSERS)})"
    last = (
        "named_struct("
        + ", ".join(
            [f"'c{i}', {q(c)}" for i, c in enumerate(business)]
            + [
                f"'op', {q(C.OP)}",
                f"'seq', {q(C.SEQ)}",
                f"'db', {q(C.SOURCE_DB)}",
                f"'tbl', {q(C.SOURCE_TABLE)}",
                "'next_seq', _cdc_next_seq",
                "'next_ts', _cdc_next_ts",
                "'next_op', _cdc_next_op",
            ]
        )
        + ")"
    )
    out = ", ".join(
        [f"_cdc_last.c{i} AS {q(c)}" for i, c in enumerate(business)]
        + [
            f"{VALID_FROM}",
            f"_cdc_last.next_ts AS {VALID_TO}",
            f"_cdc_last.next_seq IS NULL AS {IS_CURRENT}",
            f"_cdc_last.op AS {q(C.OP)}",
            f"_cdc_last.next_op AS {CLOSED_BY}",
            f"{VALID_FROM_SEQ}",
            f"_cdc_last.next_seq AS {VALID_TO_SEQ}",
            f"_cdc_last.seq AS {q(C.SEQ)}",
            f"_cdc_last.db AS {q(C.SOURCE_DB)}",
            f"_cdc_last.tbl AS {q(C.SOURCE_TABLE)}",
        ]
    )
    item_list = ", ".join(q(c) for c in item_columns)
    return f"""
WITH history AS (SELECT * FROM {source}),
items AS (SELECT {item_list} FROM history WHERE {q(C.OP)} <> '{TRUNCATE}'),
truncates AS (
  SELECT {q(C.SOURCE_DB)} AS db, {q(C.SOURCE_TABLE)} AS tbl, {q(C.SEQ)} AS seq, {q(C.SOURCE_TS)} AS ts,
         {q(LAND_SEQ)} AS land
  FROM history WHERE {q(C.OP)} = '{TRUNCATE}'
),
firsts AS (SELECT {by_source}, min({q(LAND_SEQ)}) AS _cdc_first_land FROM items GROUP BY {by_source}),
marks AS (
  SELECT {mark_columns}
  FROM firsts f JOIN truncates t
    ON f.{q(C.SOURCE_DB)} <=> t.db AND f.{q(C.SOURCE_TABLE)} <=> t.tbl AND f._cdc_first_land <= t.land
),
changes AS (SELECT * FROM items UNION ALL SELECT * FROM marks),
one_per_seq AS (
  SELECT * FROM (
    SELECT *, row_number() OVER (
      PARTITION BY {keys}, {q(C.SEQ)} ORDER BY {q(C.OP)} = '{C.ARCHIVE}' DESC, {q(LAND_SEQ)} DESC
    ) AS _cdc_n FROM changes
  ) WHERE _cdc_n = 1
),
neighbours AS (
  SELECT *, {closer} AS _cdc_closer,
         lag({closer}) OVER w AS _cdc_prev_closer,
         {tracked_struct} AS _cdc_tracked, lag({tracked_struct}) OVER w AS _cdc_prev_tracked,
         lead({q(C.SEQ)}) OVER w AS _cdc_next_seq, lead({q(C.SOURCE_TS)}) OVER w AS _cdc_next_ts,
         lead({q(C.OP)}) OVER w AS _cdc_next_op
  FROM one_per_seq WINDOW w AS ({window})
),
runs AS (
  SELECT *, sum(CASE WHEN _cdc_closer OR _cdc_prev_closer IS NULL OR _cdc_prev_closer
                     OR NOT (_cdc_tracked <=> _cdc_prev_tracked) THEN 1 ELSE 0 END)
           OVER ({window} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS _cdc_run
  FROM neighbours
),
versions AS (
  SELECT min({q(C.SEQ)}) AS {VALID_FROM_SEQ}, min_by({q(C.SOURCE_TS)}, {q(C.SEQ)}) AS {VALID_FROM},
         max_by({last}, {q(C.SEQ)}) AS _cdc_last
  FROM runs WHERE NOT _cdc_closer GROUP BY {keys}, _cdc_run
)
SELECT {out} FROM versions
"""


def as_of(versions: DataFrame, at: Column) -> DataFrame:
    """The versions valid at source time ``at``: the table's rows as they were then."""
    return versions.where((F.col(VALID_FROM) <= at) & (F.col(VALID_TO).isNull() | (F.col(VALID_TO) > at)))


def read_versions(spark: SparkSession, path: str, key: list[str], settings: History) -> DataFrame:
    """The versions of the history at ``path`` (:func:`versions_sql`)."""
    columns = spark.read.format("delta").load(path).columns
    return spark.sql(versions_sql(C.delta_path_identifier(path), columns, key, settings))
