"""Frames checkpointed locally (``DataFrame.localCheckpoint``): computed once into the executors'
block stores, and planned over afterwards as a short lineage instead of the expressions that made them
(the decoded batch; a merge round's pending changes, whose expressions grow with the shapes in it)."""

from __future__ import annotations

from pyspark.sql import DataFrame


def release(frame: DataFrame) -> None:
    """Free the blocks of ``frame``, a local checkpoint. They belong to the RDD under its plan, and
    Spark frees them only when that RDD is garbage collected on the driver: here, at once."""
    frame._jdf.queryExecution().logical().rdd().unpersist(False)
