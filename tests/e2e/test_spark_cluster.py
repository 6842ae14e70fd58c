"""The README's cluster path, run as written: ``make dist``'s zip and decoder jar, ``spark-submit`` of
``streaming/run_stream.py`` to a Spark standalone master and worker (the executor a JVM of its own,
launched by the worker). The nodes' Python has cdc-delta's dependencies but not cdc-delta (the test
venv's packages without its editable install), so the package comes from ``--py-files`` only. The
generated changes are landed and merged equal to the generator's source state, and the undecodable
records dead-lettered by the Python decoder, which runs on the executor. The hourly maintenance job,
submitted the same way, compacts and vacuums the tables and leaves their rows as they were."""

from __future__ import annotations

import os
import site
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyspark
import pytest
import yaml
from deltalake import DeltaTable

from cdc_delta import columns as C
from cdc_delta.demo.batches import DEMO_TABLES
from cdc_delta.demo.generator import ChangeGenerator
from tests.conftest import QUICK_JVM
from tests.services import NativeKafka, free_port, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).parent
PACKAGES = "io.delta:delta-spark_2.13:4.0.0,org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0"
EVENTS, BAD, SEED = 1500, 2, 42


def nodes_python(folder: Path) -> Path:
    """A venv that sees the test venv's packages (a path in a .pth file) but not the .pth files among them,
    so not cdc-delta's editable install: a node with the dependencies and without cdc-delta."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    (inside,) = (folder / "lib").glob("python3*/site-packages")
    (inside / "dependencies.pth").write_text(site.getsitepackages()[0] + "\n")
    return folder / "bin" / "python"


@contextmanager
def standalone(folder: Path, env: dict[str, str]) -> Iterator[str]:
    """A Spark standalone master and one worker (1 core, its executors JVMs of their own): the master's URL."""
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    daemons = []
    try:
        master_log = folder / "master.log"
        daemons.append(
            subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port)]
                + ["--webui-port", str(free_port())],
                stdout=master_log.open("w"),
                stderr=subprocess.STDOUT,
                env=env,
            )
        )
        wait_for(lambda: "I have been elected leader" in master_log.read_text(errors="replace"), 120, "the master")
        worker_log = folder / "worker.log"
        daemons.append(
            subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "1"]
                + ["--memory", "2g", "--webui-port", str(free_port()), "--work-dir", str(folder / "work")],
                stdout=worker_log.open("w"),
                stderr=subprocess.STDOUT,
                env=env,
            )
        )
        wait_for(lambda: "Successfully registered with master" in worker_log.read_text(errors="replace"), 120, "worker")
        yield url
    finally:
        for daemon in reversed(daemons):
            daemon.terminate()
            try:
                daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                daemon.kill()


# The executors live as long as the job (a minute): C1 alone, as the tests' other short-lived JVMs (conftest).
QUICK_EXECUTORS = f"spark.executor.extraJavaOptions={QUICK_JVM}"


def cluster_config(folder: Path, bootstrap: str) -> Path:
    """The generated demo's config, as a cluster runs it: the cluster's master (spark.master null)."""
    data = yaml.safe_load((ROOT / "streaming" / "demo-config.yaml").read_text())
    data["app_id"] = "cluster-check"
    data["kafka"]["bootstrap_servers"] = bootstrap
    data["spark"]["master"] = None
    data["storage"]["root"] = str(folder / "lake")
    path = folder / "cdc.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_spark_submit_on_a_standalone_cluster_lands_and_merges_with_the_package_from_py_files(
    native_kafka: NativeKafka, tmp_path: Path
) -> None:
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "scripts/dist.py", str(dist)], cwd=ROOT, check=True, capture_output=True)
    python = nodes_python(tmp_path / "nodes")
    for module, found in (("cdc_delta", 1), ("pyspark, pydantic, delta", 0)):  # from a folder without cdc_delta
        run = subprocess.run([python, "-c", f"import {module}"], capture_output=True, cwd=tmp_path)
        assert run.returncode == found, (module, run.stderr)

    generated = subprocess.run(
        [sys.executable, "-m", "cdc_delta.cli", "generate", "--bootstrap", native_kafka.bootstrap]
        + ["--events", str(EVENTS), "--bad", str(BAD), "--seed", str(SEED)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert generated.returncode == 0, generated.stderr[-2000:]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": str(python)}
    env |= {"PYSPARK_DRIVER_PYTHON": str(python), "SPARK_HOME": str(SPARK_HOME)}
    env.pop("PYTHONPATH", None)
    config = cluster_config(tmp_path, native_kafka.bootstrap)
    with standalone(tmp_path, env) as master:
        started = time.monotonic()
        submitted = subprocess.run(
            [str(SPARK_HOME / "bin" / "spark-submit"), "--master", master, "--packages", PACKAGES]
            + ["--jars", str(dist / "cdc-delta-decoder.jar"), "--py-files", str(dist / "cdc_delta.zip")]
            + ["--conf", "spark.executor.memory=1g", "--conf", "spark.ui.enabled=false", "--conf", QUICK_EXECUTORS]
            + [str(ROOT / "streaming" / "run_stream.py"), "--config", str(config), "--until-caught-up"],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp_path,
            env=env,
        )
        log = submitted.stdout + submitted.stderr
        (tmp_path / "submit.log").write_text(log)
        assert submitted.returncode == 0, log[-5000:]
        # The hourly job, submitted the same way: the tables compacted and vacuumed, their rows as they were.
        maintained = subprocess.run(
            [str(SPARK_HOME / "bin" / "spark-submit"), "--master", master, "--packages", PACKAGES]
            + ["--jars", str(dist / "cdc-delta-decoder.jar"), "--py-files", str(dist / "cdc_delta.zip")]
            + ["--conf", "spark.executor.memory=1g", "--conf", "spark.ui.enabled=false", "--conf", QUICK_EXECUTORS]
            + [str(ROOT / "maintenance" / "run_maintenance.py"), "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp_path,
            env=env,
        )
        (tmp_path / "maintain.log").write_text(maintained.stdout + maintained.stderr)
        assert maintained.returncode == 0, (maintained.stdout + maintained.stderr)[-5000:]
    worker_log = (tmp_path / "worker.log").read_text(errors="replace")
    assert "Asked to launch executor" in worker_log, worker_log[-3000:]  # the work ran in the worker's executor
    maintenance = [DeltaTable(str(tmp_path / "lake" / t)).history(3) for t in ("inventory/orders", "shop/orders")]
    assert all({"OPTIMIZE", "VACUUM END"} <= {c["operation"] for c in h} for h in maintenance), maintenance
    executor = sorted((tmp_path / "work").glob("app-*/0"))[0]  # the stream's application, the first
    assert (executor / "cdc_delta.zip").is_file() and (executor / "cdc-delta-decoder.jar").is_file()
    assert "PythonUDFWithNamedArgumentsRunner" in (executor / "stderr").read_text(errors="replace")  # the UDF ran there
    # The undecodable records: decoded by the Python decoder (a UDF, on the executor), dead-lettered.
    assert DeltaTable(str(tmp_path / "lake" / "_cdc_dead_letters")).to_pyarrow_dataset().count_rows() == BAD

    source = ChangeGenerator(DEMO_TABLES, seed=SEED, tombstones=True, live=True)
    for _ in source.changes(EVENTS):
        pass
    lake = tmp_path / "lake"
    orders = DeltaTable(str(lake / "inventory" / "orders")).to_pyarrow_table().to_pylist()
    live = {r["id"]: r for r in orders if not r[C.DELETED]}
    expected = source.rows[("inventory", "orders")]
    assert set(live) == set(expected) and len(expected) > 100
    assert all(live[k]["amount"] == v["amount"] and live[k]["customer"] == v["customer"] for k, v in expected.items())
    shards = DeltaTable(str(lake / "shop" / "orders")).to_pyarrow_table().to_pylist()
    live_shards = {(r[C.SOURCE_DB], r["id"]) for r in shards if not r[C.DELETED]}
    assert live_shards == {(t.db, k) for t in DEMO_TABLES[1:] for k in source.rows[(t.db, t.table)]}
    print(f"cluster run: spark-submit exit 0 in {time.monotonic() - started:.0f}s")
