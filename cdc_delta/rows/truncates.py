"""Truncates among a table's pending changes: where they split the changes into segments, and what they
do to the rows.

A truncate (op ``t``, a DROP TABLE included) soft-deletes the rows of its source table whose ordering key
is older, after the changes of its own landing; a change older than it that lands later is applied as
usual. Landings merged together must give what merging them one by one gives, so a table's pending
changes are merged in segments that end at each landing holding a truncate: within a segment every
change is older than the segment's truncates or not, whatever its landing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.changelog.pending import Truncate
from cdc_delta.events.ordering import SEQ_FIELDS, Seq

Truncates = Mapping[tuple[str | None, str | None], Seq]
"""The latest truncate of each source table (database, table) of one segment."""


@dataclass(frozen=True)
class Segment:
    """Pending changes of the landings in ``(after, through]``, then the truncates of ``through``."""

    after: int
    through: int
    truncates: Truncates


def segments(truncates: Iterable[Truncate], after: int, through: int) -> list[Segment]:
    """The segments of the changes past landing ``after`` up to ``through``: one per landing that holds a
    truncate (ending there), and one for the landings after the last of them."""
    by_landing: dict[int, dict[tuple[str | None, str | None], Seq]] = {}
    for t in truncates:
        if after < t.land_seq <= through:
            latest = by_landing.setdefault(t.land_seq, {})
            where = (t.source_db, t.source_table)
            latest[where] = max(latest.get(where, t.seq), t.seq)
    out, start = [], after
    for land_seq in sorted(by_landing):
        out.append(Segment(start, land_seq, by_landing[land_seq]))
        start = land_seq
    if start < through:
        out.append(Segment(start, through, {}))
    return out


def seq_literal(seq: Seq) -> Column:
    """A literal ``_cdc_seq`` struct."""
    fields = zip(SEQ_FIELDS, seq, strict=True)
    return F.struct(*[F.lit(value).cast(type_name).alias(name) for (name, type_name), value in fields])


def seq_sql(seq: Seq) -> str:
    """:func:`seq_literal` as SQL text (a view's, a DML condition's)."""
    fields = zip(SEQ_FIELDS, seq, strict=True)
    return "named_struct(" + ", ".join(f"'{name}', CAST({int(v)} AS {t})" for (name, t), v in fields) + ")"


def same_source(db: str | None, table: str | None, prefix: str = "") -> Column:
    return F.col(prefix + C.SOURCE_DB).eqNullSafe(F.lit(db)) & F.col(prefix + C.SOURCE_TABLE).eqNullSafe(F.lit(table))


def older_than(truncates: Truncates, prefix: str = "") -> tuple[Column, Column]:
    """(whether a row is older than a truncate of its source table, that truncate's ``_cdc_seq``)."""
    older, at = F.lit(False), F.lit(None)
    for (db, table), seq in truncates.items():
        hit = same_source(db, table, prefix) & (F.col(prefix + C.SEQ) < seq_literal(seq))
        older, at = older | hit, F.when(hit, seq_literal(seq)).otherwise(at)
    return older, at


def marked(rows: DataFrame, truncates: Truncates) -> DataFrame:
    """``rows`` (a table's rows: business and metadata columns) with those older than a truncate of their
    source table soft-deleted by it: the image kept, ``_cdc_op`` 't', the truncate's ordering key."""
    if not truncates:
        return rows
    older, at = older_than(truncates)
    return rows.withColumns(
        {
            C.DELETED: F.when(older, F.lit(True)).otherwise(F.col(C.DELETED)),
            C.OP: F.when(older, F.lit("t")).otherwise(F.col(C.OP)),
            C.SOURCE_TS: F.when(older, F.timestamp_millis(at.getField("ts_ms"))).otherwise(F.col(C.SOURCE_TS)),
            C.SEQ: F.when(older, at).otherwise(F.col(C.SEQ)),
        }
    )
