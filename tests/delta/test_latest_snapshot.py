"""A table's snapshot read from a worker thread, as the maintenance job's workers read it, while another
writer commits: always up to date with the log, and never failing for want of an active SparkSession
(Delta falls back on the calling JVM thread's, which a worker thread does not have by itself)."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable as RsTable
from deltalake import write_deltalake

from cdc_delta.delta.tables import latest_snapshot
from cdc_delta.maintenance.commands import table_size

READS = 8


def test_latest_snapshot_from_a_worker_thread_beside_another_writer(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    spark.range(3).write.format("delta").save(path)
    jvm_session = getattr(spark.sparkContext._jvm, "org.apache.spark.sql.classic.SparkSession")
    stop, first_commit = threading.Event(), threading.Event()
    appended: list[int] = []

    def append() -> None:  # another engine, so the JVM learns of each commit only from the log
        while not stop.is_set():
            write_deltalake(path, pa.table({"id": pa.array([len(appended)], pa.int64())}), mode="append")
            appended.append(1)
            first_commit.set()
            stop.wait(0.1)

    seen: list[int] = []
    outcome: dict[str, object] = {}

    def read() -> None:  # a fresh thread with no active session, as a maintenance worker starts
        try:
            jvm_session.clearActiveSession()
            first_commit.wait(timeout=120)
            for _ in range(READS):
                seen.append(int(latest_snapshot(spark, path).version()))
                stop.wait(0.1)
            outcome["active"] = bool(jvm_session.getActiveSession().isDefined())
        except Exception as e:  # noqa: BLE001 - reported by the assertion below
            outcome["error"] = e

    writer = threading.Thread(target=append)
    writer.start()
    try:
        reader = threading.Thread(target=read)
        reader.start()
        reader.join(timeout=300)
    finally:
        stop.set()
        writer.join(timeout=60)

    assert "error" not in outcome, outcome.get("error")
    assert outcome["active"] is True  # what Delta needs when its snapshot refresh falls back on the session
    assert len(seen) == READS and seen == sorted(seen) and len(set(seen)) > 1  # it followed the other writer
    final = RsTable(path)
    assert int(latest_snapshot(spark, path).version()) == final.version()
    assert table_size(spark, path) == (
        len(final.file_uris()),
        sum(final.get_add_actions(flatten=True)["size_bytes"].to_pylist()),
    )
