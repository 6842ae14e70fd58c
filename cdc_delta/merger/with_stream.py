"""The merger in the stream's process, as the stream's :class:`~cdc_delta.stream.batch.LandingListener`:
after each landing, the batch waiting for it (``merge.max_delay_seconds: 0``: every table merged every
batch), or in a thread of its own beside the ingest, a round whenever a table is due. The command that
runs the stream makes one (:func:`merging_for`) and hands it to the stream; the stream knows only the
listener."""

from __future__ import annotations

import logging
import threading
from contextlib import AbstractContextManager, nullcontext

from pyspark.sql import SparkSession

from cdc_delta.changelog.append import Landing
from cdc_delta.config import AppConfig
from cdc_delta.merger.results import RoundResult
from cdc_delta.merger.run import Merger, RoundObserver

logger = logging.getLogger(__name__)


class MergeAfterLandings:
    """The merger run right after each landing, in the batch: the batch's result holds its round."""

    def __init__(self, merger: Merger) -> None:
        self.merger = merger
        self._landed = False

    def landing(self) -> AbstractContextManager[object]:
        return nullcontext()

    def landed(self, landing: Landing | None) -> RoundResult | None:
        """Merge the due tables now (every table with changes pending where ``max_delay_seconds`` is 0);
        after a batch with nothing to land too, once this process has landed."""
        if landing is not None:
            self.merger.landed(landing)
            self._landed = True
        elif not self._landed:
            return None
        return self.merger.round(bounded=self.merger.config.merge.max_delay_seconds > 0)

    def start(self) -> None:
        """Nothing runs apart from the batches."""

    def check(self) -> None:
        """Nothing runs apart from the batches."""

    def finish(self, merge_pending: bool) -> list[RoundResult]:
        """After the stream ended: with ``merge_pending``, merge every change still pending
        (``--until-caught-up`` ends with every table merged)."""
        return self.merger.merge_all() if merge_pending else []

    def stopped_tables(self) -> dict[str, str]:
        """The tables found stopped in this run (their changes stay pending), with why."""
        return self.merger.applier.stopped_tables()

    def close(self) -> None:
        self.merger.close()


class BackgroundMerging(MergeAfterLandings):
    """The merger in a thread of its own beside the ingest (:meth:`Merger.run_until`), woken by each
    landing; its merges give way to landings. A failure of the process (Spark stopped, memory) ends the
    thread and is raised by :meth:`check`."""

    def __init__(self, merger: Merger, observer: RoundObserver | None = None) -> None:
        super().__init__(merger)
        self.observer = observer
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="cdc-merger", daemon=True)

    def landing(self) -> AbstractContextManager[object]:
        return self.merger.landing()

    def landed(self, landing: Landing | None) -> RoundResult | None:
        self.merger.landed(landing)
        self._wake.set()
        return None

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            self.merger.run_until(self._stop, wake=self._wake, observer=self.observer)
        except BaseException as exc:  # noqa: BLE001 (raised on the stream's thread by check())
            self._error = exc
            logger.error("the merger stopped: %s", exc)

    def check(self) -> None:
        """Raise the error that ended the merger's thread, if one did."""
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        """Stop after the running round."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()

    def finish(self, merge_pending: bool) -> list[RoundResult]:
        self.stop()
        self.check()
        return super().finish(merge_pending)

    def close(self) -> None:
        self.stop()
        super().close()


def merging_for(
    spark: SparkSession, config: AppConfig, observer: RoundObserver | None = None
) -> MergeAfterLandings | None:
    """The merger of a stream with this config: after each landing (``merge.max_delay_seconds: 0``),
    beside it (otherwise), or None (``merge.in_stream: false``: ``cdc-delta merge`` merges apart).
    ``observer`` is told of the rounds run beside the stream (those after a landing are in the batch's
    result)."""
    if not config.merge.in_stream:
        return None
    merger = Merger(spark, config)
    if config.merge.max_delay_seconds == 0:
        return MergeAfterLandings(merger)
    return BackgroundMerging(merger, observer)
