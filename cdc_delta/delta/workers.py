"""Run one piece of work per table concurrently, each worker thread with a Spark session of its own.

A Delta MERGE commits with the transaction id and commit metadata of the session it runs in (the
session-wide confs of :func:`cdc_delta.merger.merge.delta_transaction`), so two tables merged at once
need two sessions: ``spark.newSession()`` shares the SparkContext, the cached data and the Delta log
cache, not the SQL conf. Each worker's jobs go to a scheduler pool of their own, so that with Spark's
FAIR scheduler one table's large job does not queue the others' small ones. Much of a MERGE's time is
the driver's (planning, reading the log, committing), which threads overlap even on 2 cores.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from pyspark.sql import SparkSession

from cdc_delta.retry import is_conflict

_PROCESS_FAILURES = (
    "SparkContext was shut down",
    "SparkContext has been shutdown",
    "Cannot call methods on a stopped SparkContext",
    "cancelled",
    "canceled",
    "InterruptedException",
    "java.lang.OutOfMemoryError",
    # The JVM itself is broken (seen: its code cache full, the compiler disabled, then every MERGE failing
    # with "InternalError: no such method: java.lang.invoke.MethodHandle.linkToStatic"): not the table's.
    "java.lang.InternalError",
)


def fails_the_batch(spark: SparkSession, exc: BaseException) -> bool:
    """Whether ``exc`` fails the batch rather than one table: Spark stopped or its jobs cancelled (a
    stop of the stream), the JVM gone or broken, memory exhausted, or a write race lost to maintenance more often
    than :func:`~cdc_delta.retry.retry_on_conflict` tries (transient: the batch runs again on restart,
    idempotently). Any other error stays with the table it happened to, which stops."""
    if isinstance(exc, (MemoryError, ConnectionError)) or type(exc).__name__.startswith("Py4JNetwork"):
        return True
    try:
        if spark.sparkContext._jsc is None or spark.sparkContext._jsc.sc().isStopped():  # type: ignore[union-attr]
            return True
    except Exception:  # noqa: BLE001 (a JVM that cannot answer is a process failure)
        return True
    text = str(exc)
    return is_conflict(exc) or any(marker in text for marker in _PROCESS_FAILURES)


W = TypeVar("W")
R = TypeVar("R")


class TableWorkers:
    """A bounded pool of worker threads, each holding its own session of ``spark``'s context; with one
    worker, the work runs in ``spark`` itself, one item after the other."""

    def __init__(
        self, spark: SparkSession, workers: int, setup: Callable[[SparkSession], None] = lambda session: None
    ) -> None:
        """``setup`` is applied to each worker's session when it is made (settings the work needs)."""
        self.spark = spark
        self.workers = workers
        self._setup = setup
        self._local = threading.local()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cdc-table") if workers > 1 else None
        self._count = 0
        self._lock = threading.Lock()

    def _session(self) -> SparkSession:
        session: SparkSession | None = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = self.spark.newSession()
            with self._lock:
                self._count += 1
                pool = f"cdc-table-{self._count}"
            session.sparkContext.setLocalProperty("spark.scheduler.pool", pool)
            self._setup(session)
        return session

    def map(self, action: Callable[[SparkSession, W], R], items: Sequence[W]) -> list[R]:
        """``action(session, item)`` for every item, in order of ``items``; the first error is raised
        once every item has finished (the others' commits stand: each is idempotent per batch). The
        stream's table work catches its own table's errors: what reaches here fails the batch. A stop
        (a signal's exception, not an :class:`Exception`) is raised at once: the items not started are
        not started, those running finish in the pool (their commits are whole or nothing)."""
        if self._pool is None or len(items) < 2:
            return [action(self.spark, item) for item in items]

        def run(item: W) -> R:
            return action(self._session(), item)

        futures = [self._pool.submit(run, item) for item in items]
        results, error = [], None
        for future in futures:
            try:
                results.append(future.result())
            except Exception as exc:  # noqa: BLE001 (re-raised below, after the other tables are done)
                error = error or exc
            except BaseException:
                for waiting in futures:
                    waiting.cancel()
                raise
        if error is not None:
            raise error
        return results

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


def each_table(
    spark: SparkSession,
    workers: int,
    action: Callable[[SparkSession, W], R],
    items: Sequence[W],
    setup: Callable[[SparkSession], None] = lambda session: None,
) -> list[R]:
    """One pool for one job run: ``action`` over ``items`` with at most ``workers`` at once."""
    pool = TableWorkers(spark, workers, setup)
    try:
        return pool.map(action, items)
    finally:
        pool.close()
