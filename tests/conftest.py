"""Shared fixtures: the user's own config stays out of tests; one SparkSession per test run."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

# The real services (broker, database, Connect worker) and their session fixtures.
pytest_plugins = ["tests.services"]

# The JVMs of the commands the tests start as processes (each lives seconds to a minute) compile with C1
# only: a stream's first batch of ten events took 26 s with both compilers on 2 cores, 19 s so. The
# session's own JVM (below) lives the whole run and is started without it: C2 pays there. C1 alone
# shrinks the code cache to 48 MB, which Spark's generated code filled within a minute ("CodeCache is
# full. Compiler has been disabled", then a MERGE failed with an InternalError): the usual 240 MB.
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
os.environ.setdefault("SPARK_SUBMIT_OPTS", QUICK_JVM)

# Timestamps read back by PySpark are local-time datetimes; tests compare in UTC.
os.environ["TZ"] = "UTC"
time.tzset()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Object-storage tests build and start SeaweedFS: they run when ``-m`` names them, not in ``make test``."""
    if "object_storage" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="object storage: run `make test-object-storage` (builds SeaweedFS on first use)")
    for item in items:
        if "object_storage" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("CDC_DELTA__"):
            monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[object]:
    from cdc_delta.config import SparkConfig, parse_config
    from cdc_delta.spark_session import build_session
    from cdc_delta.views.catalog import metastore_conf
    from tests.services import JVM_STDERR

    # Hive support with an embedded Derby metastore of this test run (the snapshot tests publish to it;
    # each uses its own database).
    hive_root = tmp_path_factory.mktemp("hive")
    hive = metastore_conf(
        parse_config(
            {
                "app_id": "tests",
                "storage": {"root": str(hive_root)},
                "tables": [{"name": "t", "topics": ["t"], "key": ["id"]}],
            }
        )
    )
    quick = os.environ.pop("SPARK_SUBMIT_OPTS", None) if os.environ.get("SPARK_SUBMIT_OPTS") == QUICK_JVM else None
    # The JVM's stderr goes to a file of the run (it keeps the descriptor it starts with), where the
    # commands run in this process (services.cdc_delta_here) read what it printed during each.
    jvm_stderr = tmp_path_factory.mktemp("jvm") / "stderr.log"
    saved = os.dup(2)
    try:
        with jvm_stderr.open("ab") as sink:
            os.dup2(sink.fileno(), 2)
            session = build_session(
                SparkConfig(
                    master="local[2]",
                    shuffle_partitions=2,
                    app_name="cdc-delta-tests",
                    conf={"spark.ui.enabled": "false"},
                ),
                hive,
            )
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        if quick is not None:
            os.environ["SPARK_SUBMIT_OPTS"] = quick
    JVM_STDERR.append(jvm_stderr)
    yield session
    try:
        said = sweep_delta_tables(session, tmp_path_factory.getbasetemp())
        reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
        capture = pytestconfig.pluginmanager.get_plugin("capturemanager")
        if reporter is not None and capture is not None:  # past pytest's capture: the count belongs in the log
            with capture.global_and_fixture_disabled():
                reporter.write_line("\n" + said)
    finally:
        session.stop()
        JVM_STDERR.clear()


def sweep_delta_tables(spark: object, root: Path) -> str:
    """Issue 15's sweep: every Delta table the tests of this run left (replicated tables, dead letters,
    rejects, snapshot logs), read by delta-rs and by Spark: the same rows. Tables with Delta's
    typeWidening feature are the documented opt-in that delta-rs cannot open, and are left out."""
    from deltalake import DeltaTable

    from tests.delta_rows import spark_and_delta_rs_rows

    started = time.monotonic()
    paths = sorted({log.parent for log in root.rglob("_delta_log") if list(log.glob("*.json"))})

    def compare(path: Path) -> str | None:
        """What differs for the table at ``path``; "opt-in" for a typeWidening table; None when alike."""
        try:
            features = DeltaTable(str(path)).protocol().reader_features or []
        except Exception as exc:  # noqa: BLE001 (a table delta-rs cannot open is the finding)
            return f"{path}: delta-rs cannot open it: {exc}"
        if "typeWidening" in features:
            return "opt-in"
        by_spark, by_delta_rs = spark_and_delta_rs_rows(spark, str(path))  # type: ignore[arg-type]
        if by_spark != by_delta_rs:
            return f"{path}: Spark reads {len(by_spark)} rows, delta-rs {len(by_delta_rs)}, not the same"
        return None

    # Most of a table's time is Delta's log replay on the driver and delta-rs's own read, one thread each:
    # three tables at a time keep both cores busy (the sweep took 140-176 s one table at a time).
    with ThreadPoolExecutor(max_workers=3) as pool:
        found = list(pool.map(compare, paths))
    opt_in = [p for p, said in zip(paths, found, strict=True) if said == "opt-in"]
    differ = [said for said in found if said is not None and said != "opt-in"]
    assert not differ, "tables delta-rs reads differently from Spark:\n" + "\n".join(differ)
    return (
        f"delta-rs sweep: {len(paths) - len(opt_in)} Delta tables of this run read alike by Spark and delta-rs "
        f"({len(opt_in)} with the typeWidening opt-in left out) in {time.monotonic() - started:.0f} s"
    )
