"""Shared fixtures: the user's own config stays out of tests; one SparkSession per test run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
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


_BORN: dict[int, str] = {}
"""Per thread of this process (its native id), the test during which it started."""


@pytest.fixture(autouse=True)
def _threads_born(request: pytest.FixtureRequest) -> Iterator[None]:
    before = set(os.listdir("/proc/self/task"))
    yield
    for tid in set(os.listdir("/proc/self/task")) - before:
        _BORN.setdefault(int(tid), request.node.nodeid)


def _thread_cpu_s() -> dict[int, float]:
    """CPU seconds used so far by each thread of this process, by native id."""
    ticks = os.sysconf("SC_CLK_TCK")
    used = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        used[int(tid)] = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return used


def busy_threads(window_s: float = 2.0, min_share: float = 0.25) -> list[str]:
    """The threads of this process but the main one busy now (``min_share`` of a core or more over
    ``window_s``), each with the test it started in and, for a Python thread, where it is: a thread a test
    left busy slows every test after it (one took a core for the last 35 minutes of a run)."""
    import threading
    import traceback

    before = _thread_cpu_s()
    time.sleep(window_s)
    after = _thread_cpu_s()
    frames = sys._current_frames()
    python = {t.native_id: t for t in threading.enumerate()}
    found = []
    for tid, cpu in sorted(after.items()):
        share = (cpu - before.get(tid, 0.0)) / window_s
        if tid == os.getpid() or share < min_share:
            continue
        thread = python.get(tid)
        where = ""
        if thread is not None and thread.ident in frames:
            stack = traceback.extract_stack(frames[thread.ident])[-4:]
            where = "; at " + " < ".join(
                f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} {f.name}" for f in reversed(stack)
            )
        name = thread.name if thread is not None else "not a Python thread"
        born = _BORN.get(tid, "the session start")
        found.append(f"busy thread {tid} ({name}), started during {born}: {share:.0%} of a core{where}")
    return found


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("CDC_DELTA__"):
            monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[object]:
    from cdc_delta.config import SparkConfig, parse_config
    from cdc_delta.metastore import metastore_conf
    from cdc_delta.spark_session import build_session
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
                    # Spark's default heap (1 GB) is what a 50-minute run's caches of every table it opened
                    # (Delta's logs and snapshots) live in; the machine has 24.
                    conf={"spark.ui.enabled": "false", "spark.driver.memory": "2g"},
                ),
                hive,
            )
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        if quick is not None:
            os.environ["SPARK_SUBMIT_OPTS"] = quick
    JVM_STDERR.append(jvm_stderr)
    watcher = SweepWatcher(tmp_path_factory.getbasetemp())
    yield session
    busy = busy_threads()
    session.stop()
    JVM_STDERR.clear()
    said = sweep_delta_tables(tmp_path_factory.getbasetemp(), watcher.finish())
    reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    capture = pytestconfig.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:  # past pytest's capture: the count belongs in the log
        with capture.global_and_fixture_disabled():
            reporter.write_line("\n" + "\n".join([*busy, said]))


def _sweep_env() -> dict[str, str]:
    """The sweep's environment: its JVM compiled with both compilers (it reads hundreds of tables)."""
    return {k: v for k, v in os.environ.items() if not (k == "SPARK_SUBMIT_OPTS" and v == QUICK_JVM)}


class SweepWatcher:
    """:mod:`tests.delta_rs_sweep` ``--watch`` over the run's tables while the tests run, at the lowest CPU
    priority; :meth:`finish` stops it and returns the state file the sweep at the end reads."""

    def __init__(self, root: Path) -> None:
        self.state = root / "delta-rs-sweep.state.jsonl"
        self.stop = root / "delta-rs-sweep.stop"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.delta_rs_sweep", "--watch", str(root), str(self.state), str(self.stop)],
            env=_sweep_env(),
            cwd=Path(__file__).resolve().parents[1],
            stdout=subprocess.DEVNULL,
            stderr=(root / "delta-rs-sweep.watch.log").open("ab"),
            preexec_fn=lambda: os.nice(19),  # the child has started no thread before exec
        )

    def finish(self) -> Path:
        """Stop it (it ends the group of tables it is reading) and return its state."""
        self.stop.touch()
        try:
            self.proc.wait(timeout=600)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.state


def sweep_delta_tables(root: Path, state: Path | None = None) -> str:
    """Run :mod:`tests.delta_rs_sweep` over the Delta tables under ``root`` in a process of its own (a
    fresh JVM, compiled with both compilers), passing over those ``state`` (:class:`SweepWatcher`'s) read
    alike while the tests ran and unchanged since; its summary line, or the test run fails with what
    differs."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.delta_rs_sweep", str(root), *(["--state", str(state)] if state else [])],
        env=_sweep_env(),
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    if done.returncode != 0:
        pytest.fail(f"the delta-rs sweep exited {done.returncode}:\n{done.stderr[-20000:]}", pytrace=False)
    return done.stdout.strip().splitlines()[-1]
