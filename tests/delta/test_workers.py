"""The table workers: a session of its own per worker thread (session-wide confs do not leak between
tables merged at once), results in the order of the items, an error raised after the rest finished, a
stop (a signal's exception) at once."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from cdc_delta.delta.workers import TableWorkers, each_table

pytestmark = pytest.mark.spark


def test_each_worker_has_a_session_of_its_own_and_confs_do_not_leak(spark: Any) -> None:
    seen: dict[str, tuple[int, str]] = {}

    def work(session: Any, item: str) -> str:
        session.conf.set("spark.databricks.delta.write.txnAppId", f"app:{item}")
        time.sleep(0.05)  # the others set theirs meanwhile
        seen[item] = (id(session), threading.current_thread().name)
        return str(session.conf.get("spark.databricks.delta.write.txnAppId"))

    items = [f"t{i}" for i in range(8)]
    assert each_table(spark, 3, work, items) == [f"app:{i}" for i in items]
    assert len({session for session, _ in seen.values()}) == 3
    assert all(name.startswith("cdc-table") for _, name in seen.values())
    assert spark.conf.get("spark.databricks.delta.write.txnAppId", None) is None


def test_one_worker_runs_in_the_callers_session(spark: Any) -> None:
    assert each_table(spark, 1, lambda session, item: (session is spark, item), ["a", "b"]) == [
        (True, "a"),
        (True, "b"),
    ]


def test_the_first_error_is_raised_once_every_table_is_done(spark: Any) -> None:
    done: list[str] = []

    def work(session: Any, item: str) -> str:
        if item == "bad":
            raise RuntimeError("table bad failed")
        time.sleep(0.1)
        done.append(item)
        return item

    workers = TableWorkers(spark, 2)
    try:
        with pytest.raises(RuntimeError, match="table bad failed"):
            workers.map(work, ["bad", "a", "b", "c"])
        assert sorted(done) == ["a", "b", "c"]
    finally:
        workers.close()


class _Stop(BaseException):
    """What a stop signal raises (cdc_delta.cli.main.Stopped): not an Exception."""


def test_a_stop_is_raised_at_once_and_the_tables_not_started_are_not_started(spark: Any) -> None:
    started: list[str] = []

    def work(session: Any, item: str) -> str:
        started.append(item)
        if item == "stop":
            raise _Stop
        time.sleep(0.5)
        return item

    workers = TableWorkers(spark, 2)
    try:
        with pytest.raises(_Stop):
            workers.map(work, ["stop", "a", "b", "c", "d", "e"])
    finally:
        workers.close()
    # The other worker had taken one or two items by then; the rest were never run.
    assert "stop" in started and len(started) <= 3, started
