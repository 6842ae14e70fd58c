"""The decoded form of a micro-batch's records: the Kafka columns plus a ``_decoded`` struct with one
field per :class:`~cdc_delta.events.envelope.Decoded` field, whichever decoder produced it."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import StructType, _parse_datatype_string

from cdc_delta.events.envelope import DEAD, OK, SKIP, Decoded
from cdc_delta.events.ordering import SEQ_DDL
from cdc_delta.events.transactions import TXN_DDL, TXN_END

DECODED = "_decoded"
KAFKA_COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value")
_DECODED_DDL = (
    "status string, reason string, table string, op string, source_db string, source_table string, "
    f"seq {SEQ_DDL}, source_ts_ms bigint, row_json string, schema_json string, "
    f"payload string, schema_ref string, redacted string, txn {TXN_DDL}"
)


def decoded_schema() -> StructType:
    """The struct of a decoded record (one field per :class:`~cdc_delta.events.envelope.Decoded` field)."""
    schema = _parse_datatype_string(_DECODED_DDL)
    assert isinstance(schema, StructType) and schema.names == list(Decoded._fields)
    return schema


def field(name: str) -> Column:
    """A field of the decoded struct."""
    return F.col(DECODED).getField(name)


def is_row_event() -> Column:
    return (field("status") == OK) & (field("op") != "t")


def is_truncate() -> Column:
    return (field("status") == OK) & (field("op") == "t")


def is_dead() -> Column:
    return field("status") == DEAD


def is_transaction_end() -> Column:
    """A source transaction's END (skipped as a change; landed as its boundary)."""
    return (field("status") == SKIP) & (field("op") == TXN_END)
