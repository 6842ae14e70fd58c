"""Frames checkpointed locally (``DataFrame.localCheckpoint``): computed once into the executors'
block stores, and planned over afterwards as a short lineage instead of the expressions that made them
(the decoded batch; a merge round's pending changes, made canonical by a JVM function)."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame


def release(frame: DataFrame) -> None:
    """Free the blocks of ``frame``, a local checkpoint. They belong to the RDD under its plan, and
    Spark frees them only when that RDD is garbage collected on the driver: here, at once."""
    frame._jdf.queryExecution().logical().rdd().unpersist(False)


@dataclass(frozen=True)
class Held:
    """Rows computed once and held until :meth:`release`: :attr:`frame` is planned over
    :attr:`checkpointed` (a local checkpoint) and :attr:`cached` (rows persisted beside it, usually
    none). Use :attr:`frame` only before the release."""

    frame: DataFrame
    checkpointed: DataFrame
    cached: DataFrame | None = None

    def release(self) -> None:
        """Free the rows, batch by batch, not when the driver collects garbage."""
        if self.cached is not None:
            self.cached.unpersist()
        release(self.checkpointed)
