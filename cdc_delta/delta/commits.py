"""What a stream commit records, and how it commits: the one contract between the stream, which writes
it, and every job that reads positions from the tables (status, readiness, purge, replays).

Every stream commit of a table carries a :class:`StreamCommit` as its Delta ``userMetadata`` (JSON:
app id, epoch, batch id, table, the batch's Kafka offsets and source times) and a Delta transaction id
(:func:`txn_app_id`) with the batch id as version, so that a batch applied again commits nothing.
:func:`app_commits` reads them back from a table's history.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"

Positions = dict[str, dict[str, int]]
"""Per topic, per partition (as text, JSON's key), an offset or a source time in ms."""


@dataclass(frozen=True)
class StreamCommit:
    """What one stream commit records."""

    app_id: str
    batch_id: int
    epoch: str | None = None
    """The checkpoint's epoch (:mod:`cdc_delta.stream.checkpoint`); None before epochs."""
    offsets: Positions = field(default_factory=dict)
    """The batch's highest Kafka offset per partition it read records from."""
    max_source_ts_ms: int | None = None
    partition_max_source_ts_ms: Positions = field(default_factory=dict)
    """How far the stream has read on each partition, in source time (the tombstone purge and the
    snapshot's readiness wait until every partition is past a time)."""
    table: str | None = None
    events: int | None = None
    """The table's events in the batch."""
    table_max_source_ts_ms: int | None = None
    operation: str | None = None
    """``merge`` or ``truncate``: a batch can make several commits to a table."""
    source: str | None = None
    """The source table (``db.table``) of a truncate."""

    def for_table(self, table: str, events: int, max_source_ts_ms: int | None) -> StreamCommit:
        return dataclasses.replace(self, table=table, events=events, table_max_source_ts_ms=max_source_ts_ms)

    def as_operation(self, operation: str, source: str | None = None) -> StreamCommit:
        return dataclasses.replace(self, operation=operation, source=source)

    def same_write(self, other: StreamCommit) -> bool:
        """Whether ``other`` records the same write (app, epoch, batch, table, operation, source)."""
        keys = ("app_id", "epoch", "batch_id", "table", "operation", "source")
        return all(getattr(self, k) == getattr(other, k) for k in keys)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> StreamCommit | None:
        """The record a commit's userMetadata holds; None where it is not a cdc-delta stream commit."""
        try:
            data = json.loads(text or "null")
        except json.JSONDecodeError:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("app_id"), str) or data.get("batch_id") is None:
            return None
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known and v is not None}
        try:
            values["batch_id"] = int(values["batch_id"])
            for name in ("offsets", "partition_max_source_ts_ms"):
                values[name] = {t: {str(p): int(v) for p, v in ps.items()} for t, ps in values.get(name, {}).items()}
        except (TypeError, ValueError, AttributeError):
            return None
        return cls(**values)


def txn_app_id(app_id: str, epoch: str | None, *parts: str) -> str:
    """The Delta transaction id of one stream write: ``<app_id>:<table>[:<operation>]``, and ``@<epoch>``
    for a checkpoint's epoch (:mod:`cdc_delta.stream.checkpoint`); a checkpoint from before epochs writes
    without one, as it always did."""
    name = ":".join((app_id, *parts))
    return f"{name}@{epoch}" if epoch else name


@dataclass(frozen=True)
class Commit:
    """How one Delta DML command of the stream commits: its transaction id and version, and its record."""

    txn_app_id: str
    """:func:`txn_app_id`: app, table, operation where a batch makes several commits to it, epoch."""
    record: StreamCommit
    """Recorded as the commit's userMetadata; its batch id is the transaction version (Delta refuses a
    version not above the last one committed)."""


@contextmanager
def delta_transaction(spark: SparkSession, commit: Commit) -> Iterator[None]:
    """Set the session-wide idempotency and commit-metadata confs around one Delta DML command.

    The confs are session-wide: tables written at once need a session each
    (:mod:`cdc_delta.delta.workers`)."""
    spark.conf.set(TXN_APP_ID, commit.txn_app_id)
    spark.conf.set(TXN_VERSION, str(commit.record.batch_id))
    spark.conf.set(USER_METADATA, commit.record.to_json())
    try:
        yield
    finally:
        for key in (TXN_APP_ID, TXN_VERSION, USER_METADATA):
            spark.conf.unset(key)


@dataclass(frozen=True)
class AppCommit:
    """One commit of a table that carries a :class:`StreamCommit`."""

    version: int
    timestamp: dt.datetime
    operation: str
    record: StreamCommit
    metrics: dict[str, str]

    @property
    def batch_id(self) -> int:
        return self.record.batch_id


def app_commits(table: DeltaTable, app_id: str | None = None, limit: int | None = None) -> Iterator[AppCommit]:
    """Newest first, the stream commits (of ``app_id`` when given) among the last ``limit`` commits of
    the table (all when None)."""
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
    """A history entry as an :class:`AppCommit`; None when it is not a stream commit (of ``app_id``)."""
    record = StreamCommit.from_json(user_metadata)
    if record is None or (app_id is not None and record.app_id != app_id):
        return None
    return AppCommit(version, timestamp, operation, record, {k: str(v) for k, v in (metrics or {}).items()})


def last_stream_commit(spark: SparkSession, path: str, app_id: str) -> StreamCommit | None:
    """What the newest commit this app's stream made to the table records (None if none)."""
    commit = next(app_commits(DeltaTable.forPath(spark, path), app_id, limit=50), None)
    return commit.record if commit else None
