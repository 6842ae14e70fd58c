"""Shared fixtures: the user's own config stays out of tests; one SparkSession per test run."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

# Timestamps read back by PySpark are local-time datetimes; tests compare in UTC.
os.environ["TZ"] = "UTC"
time.tzset()


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("CDC_DELTA__"):
            monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from cdc_delta.config import SparkConfig
    from cdc_delta.spark_session import build_session

    session = build_session(
        SparkConfig(
            master="local[2]", shuffle_partitions=2, app_name="cdc-delta-tests", conf={"spark.ui.enabled": "false"}
        )
    )
    yield session
    session.stop()
