"""The batch function as the tests drive it, without a streaming query."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

from pyspark.sql import SparkSession

from cdc_delta.changelog.append import Landing
from cdc_delta.config import AppConfig
from cdc_delta.merger.results import RoundResult
from cdc_delta.merger.run import Merger
from cdc_delta.merger.with_stream import MergeAfterLandings
from cdc_delta.stream.batch import BatchProcessor


def merging_processor(spark: SparkSession, config: AppConfig, epoch: str | None = None) -> BatchProcessor:
    """A batch function that merges the due tables after each landing, the batch waiting for it (as the
    stream does with ``merge.max_delay_seconds: 0``; with a longer delay, only the tables due)."""
    return BatchProcessor(config, epoch, MergeAfterLandings(Merger(spark, config)))


class LandingsSeen(list[Landing]):
    """A listener that only keeps the landings it is told of (nothing merges)."""

    def landing(self) -> AbstractContextManager[object]:
        return nullcontext()

    def landed(self, landing: Landing | None) -> RoundResult | None:
        if landing is not None:
            self.append(landing)
        return None

    def check(self) -> None:
        """Nothing runs apart."""
