"""Names of the metadata columns every replicated table carries (and of the dead-letter table's column that
two rooms read), and identifier quoting."""

from __future__ import annotations

PREFIX = "_cdc_"
OP = "_cdc_op"
"""The op of the event applied last: c, u, d, r, t (a truncate soft-deleted the row), or a (a purge deleted
the row at the source, and the lake keeps it: :data:`ARCHIVE`)."""
ARCHIVE = "a"
"""The op of a purge's delete that the lake keeps (a table's ``archival_deletes``): the row stays live."""
DELETED = "_cdc_deleted"
"""True for a soft-deleted row (a tombstone kept for the retention period)."""
SEQ = "_cdc_seq"
"""The ordering key of the event applied last (see :mod:`cdc_delta.events.ordering`)."""
SOURCE_TS = "_cdc_source_ts"
"""When the change happened at the source."""
INGESTED_AT = "_cdc_ingested_at"
"""When the micro-batch that applied it started."""
SOURCE_DB = "_cdc_source_db"
SOURCE_TABLE = "_cdc_source_table"
"""The physical shard (database and table) the event came from."""
TOPIC = "_cdc_topic"
PARTITION = "_cdc_partition"
OFFSET = "_cdc_offset"
"""The Kafka record the applied event came from."""

REPLAYED_AT = "replayed_at"
"""The dead-letter table's: when ``replay-dead-letters`` applied the record again (or dead-lettered it again,
as a new row); NULL: still to do. Dead-letter tables written before it get the column at their next write."""

METADATA_DDL = (
    (OP, "string"),
    (DELETED, "boolean"),
    (SEQ, None),  # the struct from cdc_delta.events.ordering.SEQ_DDL
    (SOURCE_TS, "timestamp"),
    (INGESTED_AT, "timestamp"),
    (SOURCE_DB, "string"),
    (SOURCE_TABLE, "string"),
    (TOPIC, "string"),
    (PARTITION, "int"),
    (OFFSET, "bigint"),
)
METADATA = tuple(name for name, _ in METADATA_DDL)
SHARD_KEY = (SOURCE_DB, SOURCE_TABLE)


def quote(identifier: str) -> str:
    """Backtick-quote an identifier for Spark SQL (a backtick inside is doubled)."""
    return "`" + identifier.replace("`", "``") + "`"


def string_literal(text: str) -> str:
    """A Spark SQL string literal of ``text`` (for table properties; data values never go into SQL)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def delta_path_identifier(path: str) -> str:
    """The SQL identifier of the Delta table at ``path``: delta.`path`."""
    return "delta." + quote(path)
