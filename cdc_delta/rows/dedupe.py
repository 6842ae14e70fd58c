"""Reduce a batch to the latest event per key: a Delta MERGE must never see two source rows per key."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.rows.archival import archived_first

_RANK = "_cdc_rank"


def latest_per_key(rows: DataFrame, key: Sequence[str], order_by: str = C.SEQ) -> DataFrame:
    """Keep, for each distinct ``key``, the one row with the greatest ``order_by`` value.

    The ordering key is a total order (it ends in the Kafka partition and offset), so the survivor
    is the same whatever the row order or partitioning of the input.
    """
    if not key:
        raise ValueError("latest_per_key needs at least one key column")
    order = [F.col(C.quote(order_by)).desc()]
    if order_by == C.SEQ and C.OP in rows.columns:
        order.append(archived_first())  # a purge's delete landed again archived wins at its ordering key
    window = Window.partitionBy(*[F.col(C.quote(k)) for k in key]).orderBy(*order)
    return rows.withColumn(_RANK, F.row_number().over(window)).where(F.col(_RANK) == 1).drop(_RANK)
