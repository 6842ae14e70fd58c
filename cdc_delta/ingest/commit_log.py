"""The commits this app's stream made to a Delta table, read from the table's history.

Every stream commit carries JSON commit metadata (``userMetadata``): app id, batch id, table, the
Kafka offsets and source times of the batch. This module is the one reader of it.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import SparkSession


@dataclass(frozen=True)
class AppCommit:
    """One commit of the table that carries cdc-delta metadata."""

    version: int
    timestamp: dt.datetime
    operation: str
    metadata: dict[str, Any]
    metrics: dict[str, str]

    @property
    def batch_id(self) -> int | None:
        value = self.metadata.get("batch_id")
        return int(value) if value is not None else None


def app_commits(table: DeltaTable, app_id: str | None = None, limit: int | None = None) -> Iterator[AppCommit]:
    """Newest first, the commits whose metadata is cdc-delta's (of ``app_id`` when given), among
    the last ``limit`` commits of the table (all when None)."""
    history = table.history(limit) if limit else table.history()
    rows = history.select("version", "timestamp", "operation", "userMetadata", "operationMetrics").collect()
    for row in rows:
        commit = parse_commit(
            row["version"], row["timestamp"], row["operation"], row["userMetadata"], row["operationMetrics"], app_id
        )
        if commit is not None:
            yield commit


def parse_commit(
    version: int,
    timestamp: Any,
    operation: str,
    user_metadata: str | None,
    metrics: dict[str, Any] | None,
    app_id: str | None = None,
) -> AppCommit | None:
    """A history entry as an :class:`AppCommit`; None when its metadata is not cdc-delta's (of ``app_id``)."""
    try:
        meta = json.loads(user_metadata or "null")
    except json.JSONDecodeError:
        return None
    if not isinstance(meta, dict) or (app_id is not None and meta.get("app_id") != app_id):
        return None
    return AppCommit(version, timestamp, operation, meta, {k: str(v) for k, v in (metrics or {}).items()})


def last_stream_commit(spark: SparkSession, path: str, app_id: str) -> dict[str, Any] | None:
    """The metadata of the newest commit this app's stream made to the table (None if none)."""
    commit = next(app_commits(DeltaTable.forPath(spark, path), app_id, limit=50), None)
    return commit.metadata if commit else None
