"""Real services for integration tests, one of each per test session: a Kafka broker (testcontainers
where Docker runs, else the project's native KRaft broker from Maven Central jars), a MariaDB server
(Debian's package), a Kafka Connect worker with the Debezium connectors (Maven Central jars); the
commands as separate processes, or run in the tests' own process and JVM."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.registry import StandInRegistry

ROOT = Path(__file__).parents[1]
KAFKA_SCRIPT = ROOT / "scripts" / "kafka.sh"
S3_SCRIPT = ROOT / "scripts" / "s3.sh"


def _docker_running() -> bool:
    if not shutil.which("docker"):
        return False
    return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0


def free_port() -> int:
    """A port free on 127.0.0.1 now (nothing listens there until someone takes it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port_pair() -> int:
    """A port P with P and P+1 free on 127.0.0.1 (the broker and its controller)."""
    return free_port_block(2)


def free_port_block(size: int) -> int:
    """A port P with P..P+size-1 free on 127.0.0.1."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port + size > 65536:
            continue
        try:
            for offset in range(1, size):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port + offset))
        except OSError:
            continue
        return port
    raise RuntimeError(f"no {size} adjacent free ports on 127.0.0.1")


@dataclass
class NativeKafka:
    """A broker started by scripts/kafka.sh; start/stop can be called again (the restart test)."""

    port: int
    folder: Path
    sasl_users: str | None = None
    """``admin:pw,user:pw,...``: a SASL listener with ACLs, PLAIN and SCRAM-SHA-512 (scripts/kafka.sh,
    KAFKA_SASL_USERS)."""
    tls: bool = False
    """A TLS listener (SASL_SSL with users), its certificate signed by :attr:`ca_file` (KAFKA_TLS)."""
    mtls_port: int | None = None
    """A second TLS listener there that requires a client certificate (KAFKA_MTLS_PORT; needs ``tls``):
    :attr:`client_certificate` is user cdc's."""

    @property
    def ca_file(self) -> Path:
        return self.folder / "tls" / "ca.pem"

    @property
    def client_certificate(self) -> tuple[Path, Path]:
        """User cdc's certificate and key (PEM), signed by :attr:`ca_file`."""
        return self.folder / "tls" / "client-cdc.pem", self.folder / "tls" / "client-cdc.key"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _run(self, command: str) -> None:
        env = {**os.environ, "KAFKA_DIR": str(self.folder)}
        if self.sasl_users:
            env["KAFKA_SASL_USERS"] = self.sasl_users
        if self.tls:
            env["KAFKA_TLS"] = "1"
        if self.mtls_port:
            env["KAFKA_MTLS_PORT"] = str(self.mtls_port)
        subprocess.run([str(KAFKA_SCRIPT), command, str(self.port)], check=True, env=env, timeout=180)

    def start(self) -> None:
        self._run("start")

    def stop(self) -> None:
        self._run("stop")


_LAST_USER: dict[str, str] = {}
"""Per session service fixture, the id of the last test of the run that needs it (directly or through
another fixture)."""
_STOPS: dict[str, Callable[[], None]] = {}
"""The stops of the services running now, by fixture name."""


def pytest_collection_finish(session: pytest.Session) -> None:
    """Note each service's last user among the tests that will run (after -m, -k and deselection)."""
    for item in session.items:
        for name in getattr(item, "fixturenames", ()):
            _LAST_USER[name] = item.nodeid


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After a service's last user, stop it: a broker, a Connect worker running the e2e connectors, Trino
    or a metastore left idling to the session's end took CPU from every test after them (the tests late
    in the run took 1.3-1.9 times as long as alone)."""
    yield
    for name in [name for name in reversed(_STOPS) if _LAST_USER.get(name) == item.nodeid]:
        _STOPS.pop(name)()


@contextlib.contextmanager
def stopped_after_last_user(name: str, stop: Callable[[], None]) -> Iterator[None]:
    """Run a session fixture's service (``name``: the fixture's) until its last user's teardown, or the
    session's end, whichever comes first: ``stop`` is called once."""
    done: list[bool] = []

    def once() -> None:
        if not done:
            done.append(True)
            stop()

    _STOPS[name] = once
    try:
        yield
    finally:
        _STOPS.pop(name, None)
        once()


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if _docker_running():
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer().with_kraft() as container:
            yield container.get_bootstrap_server()
        return
    broker = NativeKafka(free_port_pair(), tmp_path_factory.mktemp("kafka"))
    broker.start()
    with stopped_after_last_user("kafka_bootstrap", broker.stop):
        yield broker.bootstrap


@dataclass
class ObjectStore:
    """An S3-compatible store (SeaweedFS's S3 gateway) started by scripts/s3.sh, with one bucket and one
    identity; its S3 API on ``port``, weed's own servers on the seven ports after it."""

    port: int
    folder: Path
    bucket: str = "cdc-delta"
    access_key: str = "cdc-delta-test"
    secret_key: str = "cdc-delta-test-secret"

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self, command: str) -> None:
        env = {
            **os.environ,
            "S3_DIR": str(self.folder),
            "S3_BUCKET": self.bucket,
            "S3_ACCESS_KEY": self.access_key,
            "S3_SECRET_KEY": self.secret_key,
        }
        # The first start builds weed from the Go module proxy: minutes on 2 cores.
        subprocess.run([str(S3_SCRIPT), command, str(self.port)], check=True, env=env, timeout=1800)

    def spark_conf(self) -> dict[str, str]:
        """Spark's S3A settings for this store (the credentials come from the environment: :meth:`credentials`)."""
        return {
            "spark.hadoop.fs.s3a.endpoint": self.endpoint,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
        }

    def credentials(self) -> dict[str, str]:
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key}

    def filesystem(self) -> Any:
        """The store as a pyarrow file system (a reader that is neither Spark nor delta-rs)."""
        from pyarrow import fs

        return fs.S3FileSystem(
            access_key=self.access_key,
            secret_key=self.secret_key,
            endpoint_override=self.endpoint,
            scheme="http",
            region="us-east-1",
        )


@pytest.fixture(scope="session")
def object_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObjectStore]:
    store = ObjectStore(free_port_block(8), tmp_path_factory.mktemp("s3"))
    store._run("start")
    try:
        yield store
    finally:
        store._run("stop")


@dataclass(frozen=True)
class MariaDB:
    """A running MariaDB server of the test session (scripts/mariadb.sh)."""

    port: int
    folder: Path

    @property
    def capture_secrets(self) -> Path:
        """The capture user's password file (``password=...``), as Kafka Connect's FileConfigProvider reads it."""
        return self.folder / "cdc.properties"

    def connect(self, database: str | None = None) -> Any:
        """A pymysql connection as root through the socket (utf8mb4, autocommit)."""
        import pymysql

        return pymysql.connect(
            unix_socket=str(self.folder / "mariadb.sock"),
            user="root",
            database=database,
            charset="utf8mb4",
            autocommit=True,
        )

    def sql(self, statement: str) -> str:
        env = {**os.environ, "MARIADB_DIR": str(self.folder), "MARIADB_PORT": str(self.port)}
        done = subprocess.run(
            [str(ROOT / "scripts" / "mariadb.sh"), "sql", statement], env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout


@pytest.fixture(scope="session")
def mariadb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDB]:
    """A real MariaDB server (Debian's package, installed by the script when missing)."""
    server = MariaDB(free_port_pair(), tmp_path_factory.mktemp("mariadb"))
    env = {**os.environ, "MARIADB_DIR": str(server.folder)}
    script = str(ROOT / "scripts" / "mariadb.sh")
    subprocess.run([script, "start", str(server.port)], env=env, check=True)
    with stopped_after_last_user(
        "mariadb", lambda: subprocess.run([script, "stop", str(server.port)], env=env, check=False)
    ):
        yield server


@dataclass
class ConnectWorker:
    """A Kafka Connect worker started by scripts/connect.sh; restart() for the tests that need one."""

    port: int
    folder: Path
    bootstrap: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self, command: str) -> None:
        env = {
            **os.environ,
            "CONNECT_DIR": str(self.folder),
            "CONNECT_BOOTSTRAP": self.bootstrap,
            "CONNECT_GROUP": f"it-connect-{self.port}",
        }
        subprocess.run(
            [str(ROOT / "scripts" / "connect.sh"), command, str(self.port)], check=True, env=env, timeout=300
        )

    def start(self) -> None:
        self._run("start")

    def stop(self) -> None:
        self._run("stop")


@pytest.fixture(scope="session")
def connect_worker(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectWorker]:
    """A real Kafka Connect worker with the Debezium MariaDB and MySQL connectors on its plugin.path."""
    worker = ConnectWorker(free_port_pair(), tmp_path_factory.mktemp("connect"), kafka_bootstrap)
    worker.start()
    with stopped_after_last_user("connect_worker", worker.stop):
        yield worker


class Trino:
    """A Trino server started by scripts/trino.sh (a Delta Lake catalog ``delta`` on the local file system,
    a Hive catalog ``hive`` on :attr:`metastore_uri`), queried over its HTTP protocol (``requests``; no
    client library)."""

    def __init__(self, port: int, folder: Path, metastore_uri: str) -> None:
        self.port, self.folder, self.metastore_uri = port, folder, metastore_uri
        self.url = f"http://127.0.0.1:{port}"

    def _run(self, command: str) -> None:
        env = {**os.environ, "TRINO_DIR": str(self.folder), "TRINO_HIVE_METASTORE": self.metastore_uri}
        subprocess.run([str(ROOT / "scripts" / "trino.sh"), command, str(self.port)], check=True, env=env, timeout=600)

    def answers(self, sql: str) -> bool:
        try:
            self.query(sql)
        except AssertionError as refused:
            if "No nodes available" in str(refused):
                return False
            raise
        return True

    def query(self, sql: str) -> list[list[Any]]:
        """The rows of ``sql`` (values as Trino's JSON gives them), or AssertionError with Trino's message."""
        import requests

        page = requests.post(
            f"{self.url}/v1/statement", data=sql.encode(), headers={"X-Trino-User": "tests"}, timeout=60
        )
        reply, rows = page.json(), []
        while True:
            assert "error" not in reply, f"Trino: {reply['error']['message']} ({sql})"
            rows += reply.get("data", [])
            if "nextUri" not in reply:
                return rows
            reply = requests.get(reply["nextUri"], timeout=60).json()


@pytest.fixture(scope="session")
def hive_metastore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Hive metastore (Thrift, from pyspark's Hive jars: scripts/hive-metastore.sh) for the session: its URI."""
    port, folder = free_port(), tmp_path_factory.mktemp("hive-metastore")

    def run(command: str) -> None:
        env = {**os.environ, "HMS_DIR": str(folder)}
        script = ROOT / "scripts" / "hive-metastore.sh"
        subprocess.run([str(script), command, str(port)], check=True, env=env, timeout=180)

    with stopped_after_last_user("hive_metastore", lambda: run("stop")):  # also after a failed start
        run("start")
        yield f"thrift://127.0.0.1:{port}"


@pytest.fixture(scope="session")
def trino(tmp_path_factory: pytest.TempPathFactory, hive_metastore: str) -> Iterator[Trino]:
    """One Trino server for the session (trino-server 476, downloaded once per machine into the cache),
    its Hive catalog on the session's metastore."""
    server = Trino(free_port(), tmp_path_factory.mktemp("trino"), hive_metastore)
    with stopped_after_last_user("trino", lambda: server._run("stop")):
        server._run("start")
        # Ready says the coordinator has started; its worker (itself) is announced a moment later.
        wait_for(lambda: server.answers("SELECT 1"), 60, "Trino's worker")
        yield server


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[StandInRegistry]:
    """The stand-in schema registry (tests/registry.py: why no real one runs here)."""
    registry = StandInRegistry()
    try:
        yield registry
    finally:
        registry.close()


@pytest.fixture
def native_kafka(tmp_path: Path) -> Iterator[NativeKafka]:
    """A broker of the test's own, for tests that stop and restart it."""
    broker = NativeKafka(free_port_pair(), tmp_path / "kafka")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


class StreamProcess:
    """``cdc-delta stream`` (or another long-running ``command``, ``merge``) as a separate process, with
    its log in a file."""

    def __init__(self, config: Path, log: Path, command: str = "stream") -> None:
        self.config = config
        self.log = log
        self.command = command
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *extra: str, own_group: bool = False) -> subprocess.Popen[bytes]:
        """Start it; ``own_group``: in a process group of its own, which a test may signal as a whole."""
        out = self.log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cdc_delta.cli", self.command, "--config", str(self.config), *extra],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            start_new_session=own_group,
        )
        return self.proc

    def run_until_caught_up(self, timeout: float = 300) -> int:
        proc = self.start("--until-caught-up")
        return proc.wait(timeout=timeout)

    def caught_up_but_for(self, *stopped: str, timeout: float = 300) -> str:
        """Run ``--until-caught-up`` where the tables ``stopped`` are stopped: it must exit 1 naming
        exactly them, each on a ``stopped: <table>: <why>`` line. Returns the run's log."""
        before = self.log.read_text(errors="replace") if self.log.exists() else ""
        code = self.run_until_caught_up(timeout)
        log = self.log.read_text(errors="replace")[len(before) :]
        assert_caught_up_but_for(code, log, *stopped)
        return log

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def batch_lines(self) -> list[str]:
        if not self.log.exists():
            return []
        lines = self.log.read_text(errors="replace").splitlines()
        return [line for line in lines if "cdc_delta.stream.query: batch" in line]


def assert_caught_up_but_for(code: int, log: str, *stopped: str) -> None:
    """A run ``--until-caught-up`` (exit ``code``, its ``log``) that ended with the tables ``stopped``
    stopped: exit 1, naming exactly them, each on a ``stopped: <table>: <why>`` line."""
    named = sorted(re.findall(r"^stopped: (\S+): ", log, re.MULTILINE))
    assert (code, named) == (1, sorted(stopped)), log[-3000:]


def cdc_delta(
    config: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``cdc-delta <args> --config <config>`` as a process, its output captured; ``env`` adds variables."""
    return subprocess.run(
        [sys.executable, "-m", "cdc_delta.cli", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


JVM_STDERR: list[Path] = []
"""The file the tests' JVM writes its stderr to (set by the ``spark`` fixture, which starts the JVM with
it): what a command run by :func:`cdc_delta_here` makes Spark, log4j or a Python worker print there."""


def cdc_delta_here(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``cdc-delta <args> --config <config>`` run by the command line's ``main`` in this process, where
    it joins the tests' SparkSession: its exit code, and its stdout and stderr as the process would have
    written them: log lines (at INFO, the command's format), after what the JVM wrote to its stderr
    meanwhile (:data:`JVM_STDERR`), so that the command's last line stays last. It starts as a restart
    would, with no Delta table state cached in the JVM, and must leave none of its threads running. A
    command in a process of its own starts a JVM and runs its first batch on cold code, about 20 s on 2
    cores; here a few seconds. What only a process has (signals, kill -9, the interpreter's exit) is
    tested with :func:`cdc_delta` and :class:`StreamProcess`."""
    from pyspark.sql import SparkSession

    from cdc_delta.cli.main import LOG_FORMAT, main

    spark = SparkSession.getActiveSession()
    assert spark is not None and JVM_STDERR, "cdc_delta_here runs where the spark fixture started the JVM"
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # type: ignore[union-attr]
    jvm_said = JVM_STDERR[0].stat().st_size
    threads = set(threading.enumerate())
    out, err = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([*args, "--config", str(config)])
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    left = [t.name for t in set(threading.enumerate()) - threads if t.name.startswith("cdc-")]
    assert not left, f"cdc-delta {args[0]} left threads running: {left}"
    with JVM_STDERR[0].open("rb") as jvm:
        jvm.seek(jvm_said)
        stderr = jvm.read().decode(errors="replace") + err.getvalue()
    return subprocess.CompletedProcess(["cdc-delta", *args], code, out.getvalue(), stderr)


def caught_up_here(config: Path, *stopped: str) -> str:
    """``cdc-delta stream --until-caught-up`` run by :func:`cdc_delta_here`, which must end caught up but
    for the tables ``stopped`` (:func:`assert_caught_up_but_for`). Returns what it wrote."""
    run = cdc_delta_here(config, "stream", "--until-caught-up")
    log = run.stdout + run.stderr
    if stopped:
        assert_caught_up_but_for(run.returncode, log, *stopped)
    else:
        assert run.returncode == 0, log[-3000:]
    return log


def write_config(folder: Path, bootstrap: str, server: str, max_per_batch: int | None = None) -> Path:
    """A config for the demo tables under ``folder``, reading the topics of ``server``."""
    from cdc_delta.demo.batches import demo_tables

    data = {
        "app_id": f"it-{server}",
        "kafka": {
            "bootstrap_servers": bootstrap,
            "topic_pattern": "^" + server + r"\..*",
            "starting_offsets": "earliest",
            "max_offsets_per_trigger": max_per_batch,
        },
        "spark": {"master": "local[2]", "shuffle_partitions": 2, "conf": {"spark.ui.enabled": "false"}},
        "storage": {"root": str(folder / "lake")},
        "trigger_interval": "1 second",
        "tables": demo_tables(server),
    }
    path = folder / "cdc.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def wait_for(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
