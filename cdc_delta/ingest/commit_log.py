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
        try:
            meta = json.loads(row["userMetadata"] or "null")
        except json.JSONDecodeError:
            continue
        if not isinstance(meta, dict) or (app_id is not None and meta.get("app_id") != app_id):
            continue
        yield AppCommit(row["version"], row["timestamp"], row["operation"], meta, dict(row["operationMetrics"] or {}))
