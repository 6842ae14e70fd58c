"""What a stream commit records, and how it commits: the one contract between the stream and the merger,
which write it, and every job that reads positions (status, readiness, purge, check).

Two kinds of commits carry a :class:`StreamCommit` as their Delta ``userMetadata`` (JSON):

- a *landing*, the changelog's commit of one micro-batch: app id, epoch, batch id, its landing number
  (``land_seq``) and the batch's Kafka offsets and source times; a batch that the app's newest landing
  holds already (same epoch, batch id not below) appends nothing
  (:meth:`cdc_delta.changelog.append.Changelog.land`); a replay of dead letters lands with no batch id
  and no position (:attr:`StreamCommit.from_dead_letters`);
- a *merge*, a table's commit of its pending changes: app id, table, the landing it holds up to
  (``land_seq``), its changes and newest source time; its transaction id ``<app_id>:<table>:merge``
  has that landing number as version (:func:`merged_through` reads it back).

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

from cdc_delta.delta.tables import latest_snapshot

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"

Positions = dict[str, dict[str, int]]
"""Per topic, per partition (as text, JSON's key), an offset or a source time in ms."""


@dataclass(frozen=True)
class StreamCommit:
    """What one stream commit records."""

    app_id: str
    batch_id: int | None = None
    """The micro-batch of a landing (None in a merge: it holds many)."""
    land_seq: int | None = None
    """A landing's number; in a merge, the newest landing the table holds after it."""
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
    """``land`` (the changelog), ``merge``, or another write of the stream's to a table."""
    source: str | None = None
    """The source table (``db.table``) of a truncate."""
    consistent: dict[str, Any] | None = None
    """A landing's: the consistent point the stream computed after its previous landing
    (:class:`cdc_delta.consistency.point.Point`), where a reader goes on from."""

    @property
    def from_dead_letters(self) -> bool:
        """A landing of a replay of dead letters (:mod:`cdc_delta.stream.replay`): no micro-batch, no Kafka
        position; whoever reads how far the stream has read passes over it."""
        return self.operation == "land" and self.batch_id is None

    def for_table(self, table: str, events: int, max_source_ts_ms: int | None) -> StreamCommit:
        return dataclasses.replace(self, table=table, events=events, table_max_source_ts_ms=max_source_ts_ms)

    def as_operation(self, operation: str, source: str | None = None) -> StreamCommit:
        return dataclasses.replace(self, operation=operation, source=source)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> StreamCommit | None:
        """The record a commit's userMetadata holds; None where it is not a cdc-delta stream commit."""
        try:
            data = json.loads(text or "null")
        except json.JSONDecodeError:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("app_id"), str):
            return None
        if data.get("batch_id") is None and data.get("land_seq") is None:
            return None
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known and v is not None}
        try:
            for name in ("batch_id", "land_seq"):
                if name in values:
                    values[name] = int(values[name])
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
    """:func:`txn_app_id` or :func:`merge_txn_app_id`."""
    version: int
    """The transaction version: Delta skips a commit whose version is not above the last one committed
    under its transaction id (a landing's batch id, a merge's landing number)."""
    record: StreamCommit
    """Recorded as the commit's userMetadata."""


@contextmanager
def delta_transaction(spark: SparkSession, commit: Commit) -> Iterator[None]:
    """Set the session-wide idempotency and commit-metadata confs around one Delta DML command.

    The confs are session-wide: tables written at once need a session each
    (:mod:`cdc_delta.delta.workers`)."""
    spark.conf.set(TXN_APP_ID, commit.txn_app_id)
    spark.conf.set(TXN_VERSION, str(commit.version))
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
    def batch_id(self) -> int | None:
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


def merge_txn_app_id(app_id: str, table: str) -> str:
    """The transaction id of a table's merges; its version is the newest landing the table holds."""
    return f"{app_id}:{table}:merge"


def merged_through(spark: SparkSession, path: str, app_id: str, table: str) -> int:
    """The newest landing the table at ``path`` holds (-1: none), from its Delta state now."""
    return txn_version(spark, path, merge_txn_app_id(app_id, table))


def txn_version(spark: SparkSession, path: str, txn_id: str) -> int:
    """The newest version the Delta table at ``path`` recorded for transaction id ``txn_id`` (-1: none,
    or no table), from its Delta state now."""
    if not DeltaTable.isDeltaTable(spark, path):
        return -1
    found = latest_snapshot(spark, path).transactions().get(txn_id)
    return int(found.get()) if found.isDefined() else -1
