"""The Delta table's side of a probe, read with delta-rs (no Spark): its rows as of the source's
moment, allowing for what the stream applied after it."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from cdc_delta import columns as C
from cdc_delta.delta.delta_rs import read


@dataclass(frozen=True)
class DeltaState:
    rows: int
    """Rows whose first key column is within the source's range that existed at the source's moment:
    live, or deleted by a change the source made after it."""
    newest_key_present: bool | None
    """Whether the source's newest key has such a row (None: the source is empty)."""
    range_rows: dict[int, int] = field(default_factory=dict)
    """Such rows per range of the first key column, ``(key - low) // width`` (with a ``width``)."""


def read_state(
    table_rs: Any,
    key: list[str],
    low: Any,
    high: Any,
    at_ms: int,
    newest: tuple[Any, ...] | None,
    width: int | None = None,
) -> DeltaState:
    """``table_rs``: the table opened with delta-rs (:func:`cdc_delta.delta.delta_rs.open_table`); with
    ``width``, the rows are counted by range of the first key column too, as the source's."""
    # An empty source (no range): nothing at all may be live in Delta.
    low_high = None if low is None else (ds.field(key[0]) >= low) & (ds.field(key[0]) <= high)
    table = read(table_rs.to_pyarrow_dataset(), [*key, C.DELETED, C.SOURCE_TS, C.OP], low_high)
    existed = _existed(table, at_ms)
    present = None
    if newest is not None:
        same = pa.array([True] * table.num_rows, pa.bool_())
        for name, value in zip(key, newest, strict=True):
            same = pc.and_(same, pc.equal(table[name], pa.scalar(value, table.schema.field(name).type)))
        present = bool(pc.any(pc.and_(same, existed)).as_py())
    by_range: dict[int, int] = {}
    if width is not None and pa.types.is_integer(table.schema.field(key[0]).type):
        keys = pc.filter(table[key[0]], existed).cast(pa.int64())  # the source's keys fit: its low is one
        ranges = pc.divide(pc.subtract(keys, pa.scalar(low, pa.int64())), pa.scalar(width, pa.int64()))
        by_range = {int(c["values"]): int(c["counts"]) for c in pc.value_counts(ranges).to_pylist()}
    return DeltaState(int(pc.sum(pc.cast(existed, pa.int64())).as_py() or 0), present, by_range)


def _existed(table: pa.Table, at_ms: int) -> pa.Array:
    """Live rows, and rows deleted by a change after ``at_ms`` (they existed at that moment); an archived
    row (a purge's, kept) is one the source no longer has, deleted at its ``_cdc_source_ts``."""
    archived = pc.fill_null(pc.equal(table[C.OP], C.ARCHIVE), False)
    deleted = pc.or_(pc.fill_null(table[C.DELETED], False), archived)
    at = pa.scalar(dt.datetime.fromtimestamp(at_ms / 1000, tz=dt.timezone.utc), table.schema.field(C.SOURCE_TS).type)
    later = pc.fill_null(pc.greater(table[C.SOURCE_TS], at), False)
    return pc.or_(pc.invert(deleted), pc.and_(deleted, later))


def has_applied(table_rs: Any, key: list[str], values: dict[str, Any], topic: str, partition: int, offset: int) -> bool:
    """Whether the table holds ``values``' key from the record at ``offset`` or a later one (a row whose
    last change came from another partition counts too)."""
    where = None
    for name in key:
        term = ds.field(name) == values[name] if isinstance(values[name], (int, str)) else None
        if term is not None:
            where = term if where is None else where & term
    cols = [*key, C.TOPIC, C.PARTITION, C.OFFSET]
    table = read(table_rs.to_pyarrow_dataset(), cols, where)
    for row in table.to_pylist():
        if any(str(row[k]) != str(values[k]) for k in key):  # keys other than int and text, compared as text
            continue
        if (row[C.TOPIC], row[C.PARTITION]) != (topic, partition) or row[C.OFFSET] >= offset:
            return True
    return False
