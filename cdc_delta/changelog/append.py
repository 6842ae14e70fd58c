"""Landing a micro-batch: every change of every table appended to the changelog in one Delta commit,
idempotent per batch, with the batch's Kafka positions in the commit. Its cost does not grow with the
number of tables: one pass over the batch's decoded records, the row images kept as the decoder left
them, new column descriptors stored once each."""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dc_field

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_delta.changelog import table_index
from cdc_delta.changelog.purges import Purges
from cdc_delta.changelog.table import (
    LAND_SEQ,
    TABLE,
    changelog_path,
    ensure_tables,
    latest_version,
    row_group_confs,
    schema_id,
    schemas_path,
    schemas_schema,
)
from cdc_delta.config import AppConfig
from cdc_delta.decode.decoded import field, is_row_event, is_transaction_end, is_truncate
from cdc_delta.delta.commits import StreamCommit, app_commits
from cdc_delta.delta.hold import CHANGELOG, stream_hold, wait_while_held
from cdc_delta.delta.tables import current_version
from cdc_delta.exceptions import ConcurrentStreamError
from cdc_delta.spark_session import session_confs

logger = logging.getLogger(__name__)

EMPTY_COMMITS_RECORDED = {"spark.databricks.delta.skipRecordingEmptyCommits": "false"}
"""For a landing's append: a landing commits even with no row (a batch of tombstones, heartbeats or schema
changes only), its record holding the batch's offsets and source times, and every landing number is a
commit. Delta skips an append that adds no file unless told otherwise."""


@dataclass(frozen=True)
class Landing:
    """What one landing put in the changelog."""

    land_seq: int
    batch_id: int | None
    """None: a replay of dead letters (:mod:`cdc_delta.stream.replay`), no micro-batch."""
    landed_at: dt.datetime
    events_by_table: dict[str, int] = dc_field(default_factory=dict)
    """Changes per table (row events and truncates)."""
    replayed: bool = False
    """The batch had landed already (a batch run again after a crash): nothing was appended."""


def landed_rows(
    decoded: DataFrame, land_seq: int, batch_id: int | None, epoch: str | None, at: dt.datetime
) -> DataFrame:
    """The changelog rows of a decoded batch (its row events, truncates and transaction ENDs), sorted by
    table. A row event's schema id is its Connect schema's reference where its image is as Debezium wrote
    it, else its column descriptor's (:func:`~.table.schema_id`); an END's ``row_json`` is its counts."""
    image = F.when(is_row_event() | is_transaction_end(), field("row_json"))
    payload = F.when(is_row_event(), field("payload"))
    descriptor = F.substring(F.sha2(field("schema_json"), 256), 1, 24)
    schema = F.when(is_row_event(), F.coalesce(field("schema_ref"), descriptor))
    rows = decoded.where(is_row_event() | is_truncate() | is_transaction_end()).select(
        F.lit(land_seq).cast("bigint").alias(LAND_SEQ),
        F.lit(batch_id).cast("bigint").alias("batch_id"),
        F.lit(epoch).cast("string").alias("epoch"),
        F.lit(at).cast("timestamp").alias("landed_at"),
        field("table").alias(TABLE),
        field("op").alias("op"),
        field("seq").alias("seq"),
        field("source_ts_ms").alias("source_ts_ms"),
        field("source_db").alias("source_db"),
        field("source_table").alias("source_table"),
        F.col("topic"),
        F.col("partition").cast("int").alias("partition"),
        F.col("offset"),
        image.alias("row_json"),
        schema.alias("schema_id"),
        payload.alias("payload"),
        F.col("key").cast("binary").alias("key"),
        F.col("timestamp").cast("timestamp").alias("kafka_timestamp"),
        field("txn").alias("txn"),
    )
    return rows.sortWithinPartitions(TABLE, "seq")


class Changelog:
    """The stream's side of the changelog: lands batches, numbering them; keeps the descriptors
    stored so far. One per process that lands (the stream): landings are numbered in order."""

    def __init__(self, spark: SparkSession, config: AppConfig, epoch: str | None) -> None:
        self.spark = spark
        self.config = config
        self.epoch = epoch
        self.path = changelog_path(config)
        self.schemas_path = schemas_path(config)
        ensure_tables(spark, config)
        version = latest_version(spark, self.path)
        self._seen = -1 if version is None else version
        """The changelog's version after this lander's last landing (at start: as it found it)."""
        self._newest = self._newest_landing(version)
        """This app's newest landing: read from the log at start, then this lander's own."""
        newest_seq = -1 if self._newest is None or self._newest.land_seq is None else self._newest.land_seq
        # Every landing is one commit, so its number never passes the changelog's version: numbering from
        # past both, a landing number is never given twice.
        self._next_seq = max(self._seen, newest_seq) + 1
        stored = spark.read.format("delta").load(self.schemas_path).select("schema_id").collect()
        self._schemas = {row["schema_id"] for row in stored}
        self._tables = table_index.discovered(spark, config)
        """The tables the pattern entries made so far."""
        self._lock = threading.Lock()
        self._hold = stream_hold(config, CHANGELOG)

    def land(
        self,
        decoded: DataFrame,
        batch_id: int | None,
        at: dt.datetime,
        record: StreamCommit,
        descriptors: set[str],
        connect_schemas: Mapping[str, str],
        events_by_table: dict[str, int],
        new_tables: Mapping[str, table_index.Made] | None = None,
        purges: Purges | None = None,
    ) -> Landing:
        """Append the batch's changes in one commit (none when this checkpoint epoch's batch landed
        before, :meth:`_landing_of`; ``batch_id`` None: a replay of dead letters, which always lands, and
        whose record holds no Kafka position); ``descriptors`` are the batch's
        distinct column descriptors and Connect schema references, stored first where new (a
        reference's text from ``connect_schemas``, the decoder's); ``new_tables``, the tables pattern entries
        made in this batch (:meth:`claim`), are added to the table index first; ``purges``, the batch's
        deletes of purges, land archived (:mod:`.purges`)."""
        held = self._landing_of(batch_id) if batch_id is not None else None
        if held is not None:
            logger.info("batch %d had landed before (a batch run again): nothing appended", batch_id)
            return Landing(held.land_seq if held.land_seq is not None else -1, batch_id, at, {}, replayed=True)
        with self._lock:  # numbered only when it lands: a number given is a commit made
            land_seq = self._next_seq
            self._next_seq += 1
        self._store_schemas(descriptors, connect_schemas)
        if new_tables:
            table_index.record(self.spark, self.config, new_tables, land_seq, at)
            self._tables.update(new_tables)
        record = StreamCommit(**{**record.__dict__, "land_seq": land_seq, "operation": "land"})
        before = latest_version(self.spark, self.path)
        self._alone(before)
        rows = landed_rows(decoded, land_seq, batch_id, self.epoch, at)
        if purges is not None:
            rows = purges.relabeled(rows, self.path, land_seq, batch_id, self.epoch, at)
        if self._hold is not None:  # maintenance may be holding landings so that its DELETE can commit
            wait_while_held(self._hold, "the changelog")
        with session_confs(decoded.sparkSession, {**row_group_confs(self.config), **EMPTY_COMMITS_RECORDED}):
            rows.write.format("delta").mode("append").option("userMetadata", record.to_json()).save(self.path)
        mine = current_version(self.spark, self.path)
        self._alone(mine - 1)  # one that landed between the check above and this commit
        self._seen = mine
        if batch_id is not None:
            self._newest = record
        return Landing(land_seq, batch_id, at, dict(events_by_table))

    def claim(
        self,
        origins: Mapping[str, set[table_index.Origin]],
        keys: table_index.RecordKeys | None = None,
    ) -> table_index.Claims:
        """The batch's new pattern tables and its refused (table, topic) pairs (:func:`.table_index.claim`).
        The index is read again when a table seems new (a replay of dead letters may have recorded it)."""
        if any(name not in self._tables and self.config.pattern_entry(name) for name in origins):
            self._tables = table_index.discovered(self.spark, self.config)
        return table_index.claim(self.config, self._tables, origins, keys)

    def _landing_of(self, batch_id: int) -> StreamCommit | None:
        """The landing that holds this checkpoint epoch's batch ``batch_id``, None when it has not landed: the
        app's newest landing when it has this epoch and a batch id not below it. The stream runs its batches
        one after the other, so a batch run again after a crash is the newest landing. Read from the log
        once per process rather than with a Delta transaction id on the append, whose check reconstructs the
        changelog's state at every landing (three Spark jobs; a landing of ten changes took 1.4 s with it,
        0.4 s without). One lander per app id (:meth:`_alone`) keeps it exact; were two to race anyway, both
        would append the same batch once each, which the ordering guard makes harmless, and :meth:`_alone`
        stops one."""
        newest = self._newest
        if newest is None or newest.epoch != self.epoch or newest.batch_id is None or newest.batch_id < batch_id:
            return None
        return newest

    def _newest_landing(self, version: int | None) -> StreamCommit | None:
        """This app's newest landing of a micro-batch in the changelog's log (at ``version``; a replay of
        dead letters is none): among its newest commits first (maintenance commits between landings, a
        few an hour), then further back."""
        if version is None:
            return None
        table = DeltaTable.forPath(self.spark, self.path)
        for limit in (50, 2_000, None):
            for commit in app_commits(table, self.config.app_id, limit):
                if commit.record.operation == "land" and not commit.record.from_dead_letters:
                    return commit.record
            if limit is None or limit > version:  # that read covered the whole log
                break
        return None

    def _alone(self, through: int | None) -> None:
        """Raise :class:`ConcurrentStreamError` when a landing other than this lander's is among the
        changelog's commits since its last landing, up to version ``through``: two streams numbering
        landings alike would make a merger skip one's changes. (Maintenance's commits are no landings.)"""
        if through is None or through <= self._seen:
            return
        table = DeltaTable.forPath(self.spark, self.path)
        newest = current_version(self.spark, self.path)
        for commit in app_commits(table, self.config.app_id, newest - self._seen):
            if self._seen < commit.version <= through and commit.record.operation == "land":
                raise ConcurrentStreamError(
                    f"another stream of app_id {self.config.app_id} lands into the changelog {self.path} (its batch "
                    f"{commit.record.batch_id} landed as version {commit.version} at {commit.timestamp}, epoch "
                    f"{commit.record.epoch}): only one stream may run per app_id and storage root. Stop the other "
                    "one (or give this one an app_id of its own), then start this one again"
                )
        self._seen = through

    def _store_schemas(self, descriptors: set[str], connect_schemas: Mapping[str, str]) -> None:
        texts = dict(
            (d, connect_schemas[d]) if d in connect_schemas else (schema_id(d), d) for d in sorted(descriptors)
        )
        new = {sid: text for sid, text in texts.items() if sid not in self._schemas}
        if not new:
            return
        frame = self.spark.createDataFrame(sorted(new.items()), schemas_schema())
        frame.coalesce(1).write.format("delta").mode("append").save(self.schemas_path)
        self._schemas.update(new)
