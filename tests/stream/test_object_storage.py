"""The lake on object storage: ``storage.root`` on a real S3-compatible server (SeaweedFS's S3 gateway,
started by scripts/s3.sh), the object store configured once in ``spark.conf`` and the credentials in the
environment. The stream lands in the changelog and merges there, ``maintain`` optimizes and vacuums,
``snapshot`` publishes a Hive partition there, ``status`` reads it all with delta-rs, and nothing of the
lake is written to the local disk but the locks and the embedded metastore, which must be local.

Run with ``make test-object-storage`` (the first run builds SeaweedFS from the Go module proxy)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from pyarrow import fs

from cdc_delta.config import load_config
from cdc_delta.delta.delta_rs import open_table, read
from cdc_delta.demo.batches import DEMO_TABLES
from cdc_delta.demo.generator import ChangeGenerator, topic_of
from cdc_delta.demo.producer import ensure_topics, produce
from cdc_delta.lease import Lease, LeaseHeld, holder_of
from tests.delta_rows import assert_demo_tables_equal_source
from tests.oracle import canonical
from tests.services import ObjectStore, StreamProcess, cdc_delta, write_config

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.object_storage]

SERVER = "objs"
DAY = "2026-01-01"  # the generator's source times


def lake_config(tmp_path: Path, bootstrap: str, store: ObjectStore) -> Path:
    config = write_config(tmp_path, bootstrap, SERVER)
    data = yaml.safe_load(config.read_text())
    data["storage"] = {"root": f"s3a://{store.bucket}/{tmp_path.name}/lake"}
    data["spark"]["conf"].update(store.spark_conf())
    local = tmp_path / "local"  # what cannot live on an object store: locks, the embedded metastore
    data["maintenance"] = {
        "lock_path": str(local / "maintenance.lock"),
        "vacuum_retention_hours": 0,
        "allow_short_retention": True,
        "tombstone_retention_hours": 100_000,  # the generator's deletes are from 2026-01-01: kept
    }
    data["snapshot"] = {
        "lock_path": str(local / "snapshot.lock"),
        "metastore_dir": str(local / "metastore"),
        "idle_grace_minutes": 0,
    }
    config.write_text(yaml.safe_dump(data))
    return config


def table_rows(config_path: Path, name: str) -> list[dict[str, object]]:
    """A table's rows on the store, read by delta-rs as ``status`` and ``check`` read them."""
    config = load_config(config_path, env={})
    table = open_table(config, config.storage.table_path(config.table(name)))
    assert table is not None, name
    dataset = table.to_pyarrow_dataset()
    return list(read(dataset, dataset.schema.names).to_pylist())


def assert_equal_to_source(config: Path, generator: ChangeGenerator) -> None:
    assert_demo_tables_equal_source(lambda name: table_rows(config, name), generator)


def test_stream_maintenance_snapshot_and_status_with_the_lake_on_object_storage(
    kafka_bootstrap: str, object_store: ObjectStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in object_store.credentials().items():
        monkeypatch.setenv(name, value)  # for every process started here: S3A and delta-rs read them
    generator = ChangeGenerator(DEMO_TABLES, seed=41, tombstones=True, server=SERVER)
    ensure_topics(kafka_bootstrap, [topic_of(t, SERVER) for t in DEMO_TABLES], 2)
    produce(kafka_bootstrap, generator.changes(800))
    config = lake_config(tmp_path, kafka_bootstrap, object_store)

    stream = StreamProcess(config, tmp_path / "stream.log")
    assert stream.run_until_caught_up() == 0, stream.log.read_text()[-3000:]
    assert_equal_to_source(config, generator)
    # The lake is on the store: the changelog, its schemas, the checkpoint, the tables, the registry.
    s3 = object_store.filesystem()
    prefix = f"{object_store.bucket}/{tmp_path.name}/lake"
    names = {Path(info.path).name for info in s3.get_file_info(fs.FileSelector(prefix))}
    assert {"_cdc_changelog", "_cdc_checkpoints", "inventory", "shop"} <= names, names
    assert not (tmp_path / "lake").exists()

    # More changes, a second run from the checkpoint on the store: nothing lost, nothing twice.
    produce(kafka_bootstrap, generator.changes(400))
    assert stream.run_until_caught_up() == 0, stream.log.read_text()[-3000:]
    assert_equal_to_source(config, generator)

    # The snapshot before maintenance: it reads the version that holds the day, whose files a VACUUM
    # with no retention (as here, to prove deletes on the store) removes.
    published = cdc_delta(config, "snapshot", "--date", DAY)
    assert published.returncode == 0, published.stderr[-3000:]
    assert f"snapshot {DAY} published" in published.stdout, published.stdout
    # The partition's Parquet files on the store, read by pyarrow (neither Spark nor delta-rs).
    location = f"{object_store.bucket}/{tmp_path.name}/lake/_cdc_warehouse/ods.db/orders/dt={DAY}"
    got = pq.read_table(location, filesystem=s3, use_threads=False).to_pylist()
    expected = [{k: canonical(v) for k, v in row.items()} for row in generator.rows[("inventory", "orders")].values()]
    got_rows = [{k: canonical(v) for k, v in row.items() if k in expected[0]} for row in got]
    assert sorted(got_rows, key=repr) == sorted(expected, key=repr)

    maintained = cdc_delta(config, "maintain")
    assert maintained.returncode == 0, maintained.stderr[-3000:]
    assert "maintenance done in" in maintained.stdout, maintained.stdout
    assert "single-driver log store" in maintained.stderr  # run here with the stream stopped, as it says
    cfg = load_config(config, env={})
    for name in ("inventory.orders", "shop.orders"):
        line = next(line for line in maintained.stdout.splitlines() if line.startswith(f"{name}: files"))
        assert int(re.search(r"(\d+) files vacuumed", line)[1]) > 0, line  # type: ignore[index]
        # What is left on the store is what the table's version lists: OPTIMIZE's inputs are gone.
        table = open_table(cfg, cfg.storage.table_path(cfg.table(name)))
        assert "OPTIMIZE" in {entry["operation"] for entry in table.history(20)}
        folder = f"{object_store.bucket}/{tmp_path.name}/lake/{name.replace('.', '/')}"
        stored = {
            Path(info.path).name
            for info in s3.get_file_info(fs.FileSelector(folder, recursive=True))
            if info.path.endswith(".parquet") and "/_delta_log/" not in info.path
        }
        assert stored == {Path(uri).name for uri in table.file_uris()}, name
    assert_equal_to_source(config, generator)  # the files VACUUM left are the ones the tables need

    status = cdc_delta(config, "status")
    assert status.returncode == 0, status.stdout + status.stderr
    for name in ("inventory.orders", "shop.orders"):
        line = next(line for line in status.stdout.splitlines() if line.startswith(name))
        assert line.split()[-2] == str(len(table_rows(config, name))), line
    printed = status.stdout + status.stderr + maintained.stdout + maintained.stderr + stream.log.read_text()
    assert object_store.secret_key not in printed


def test_the_lease_on_object_storage_refuses_a_second_stream_and_status_names_the_holder(
    kafka_bootstrap: str, object_store: ObjectStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lease file lives on the store beside the lake (written through delta-rs' object store): a
    second stream is refused naming the holder, ``status`` names it, and a released lease is free."""
    for name, value in object_store.credentials().items():
        monkeypatch.setenv(name, value)
    config = lake_config(tmp_path, kafka_bootstrap, object_store)
    cfg = load_config(config)
    with Lease(cfg, "stream", "stream") as held:
        assert held.location.startswith(f"s3a://{object_store.bucket}/{tmp_path.name}/lake/_cdc_leases/"), held.location
        second = cdc_delta(config, "stream")
        assert second.returncode == 2 and second.stderr.count("\n") == 1, second.stderr[-2000:]
        assert f"already runs on this lake: stream pid {os.getpid()} on " in second.stderr, second.stderr
        status = cdc_delta(config, "status")
        assert f"stream: running: stream pid {os.getpid()} on " in status.stdout, status.stdout[-2000:]
        with pytest.raises(LeaseHeld):
            Lease(cfg, "stream", "another").take()
    assert holder_of(cfg, "stream") is None
    Lease(cfg, "stream", "after").take().release()
