"""The snapshot's rows: the base (previous snapshot or stock export) with the Delta table's changes.

Per key the Delta row wins over the base row; keys whose final state in Delta is deleted are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.exceptions import SnapshotError


def _aligned(base: DataFrame, delta: DataFrame | None) -> DataFrame:
    """``base`` with the Delta side's columns and types (columns only the base has stay, at the end)."""
    if delta is None:
        return base
    types = {f.name.lower(): f.dataType for f in delta.schema.fields}
    have = {f.name.lower(): f.name for f in base.schema.fields}
    cols = []
    for f in delta.schema.fields:
        name = have.get(f.name.lower())
        cols.append((F.col(C.quote(name)).cast(f.dataType) if name else F.lit(None).cast(f.dataType)).alias(f.name))
    extra = [F.col(C.quote(f.name)) for f in base.schema.fields if f.name.lower() not in types]
    return base.select(*cols, *extra)


@dataclass(frozen=True)
class Union:
    """The snapshot's rows, and what the pass that writes them counts (read after the write)."""

    rows: DataFrame
    counted: Observation
    """``rows``: the snapshot's row count."""
    base_counted: Observation | None = None
    """``base_rows`` and ``deletes_applied``, where there is a base and a Delta side."""

    def count(self, name: str) -> int:
        if name == "rows":
            return int(self.counted.get["rows"])
        return int(self.base_counted.get[name]) if self.base_counted else 0


_DELTA_DELETED = "_cdc_delta_deleted"


def union_rows(base: DataFrame | None, delta: DataFrame | None, key: list[str]) -> Union:
    """Per key the Delta row wins over the base row; keys deleted in Delta are dropped.

    ``delta`` holds the business columns and ``_cdc_deleted``; the result has the business columns.
    The counts come from the same pass that writes the rows: no extra scan of the base.
    """
    counted = Observation("snapshot_rows")
    rows_count = F.count(F.lit(1)).alias("rows")
    if delta is None:
        if base is None:
            raise SnapshotError("nothing to union: no base and no Delta table")
        return Union(base.observe(counted, rows_count), counted)
    live = delta.where(~F.col(C.DELETED)).drop(C.DELETED)
    if base is None:
        return Union(live.observe(counted, rows_count), counted)
    marks = delta.select(*key, F.col(C.DELETED).alias(_DELTA_DELETED))
    in_delta = F.col(_DELTA_DELETED).isNotNull()
    base_counted = Observation("snapshot_base")
    joined = (
        _aligned(base, live)
        .join(marks, on=key, how="left")
        .observe(
            base_counted,
            F.count(F.lit(1)).alias("base_rows"),
            F.count(F.when(in_delta & F.col(_DELTA_DELETED), 1)).alias("deletes_applied"),
        )
    )
    kept = joined.where(~in_delta).drop(_DELTA_DELETED)
    union = kept.unionByName(live, allowMissingColumns=True)
    return Union(union.observe(counted, rows_count), counted, base_counted)
