"""Shared fixtures: the user's own config stays out of tests; one SparkSession per test run."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

# The real services (broker, database, Connect worker) and their session fixtures.
pytest_plugins = ["tests.services"]

# Timestamps read back by PySpark are local-time datetimes; tests compare in UTC.
os.environ["TZ"] = "UTC"
time.tzset()


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("CDC_DELTA__"):
            monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from cdc_delta.config import SparkConfig, parse_config
    from cdc_delta.snapshot.hive_publish import metastore_conf
    from cdc_delta.spark_session import build_session

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
    session = build_session(
        SparkConfig(
            master="local[2]", shuffle_partitions=2, app_name="cdc-delta-tests", conf={"spark.ui.enabled": "false"}
        ),
        hive,
    )
    yield session
    session.stop()
