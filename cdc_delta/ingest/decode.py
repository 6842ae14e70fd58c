"""Run the envelope decoder over a Kafka micro-batch, on the executors, as a Python UDF."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType, _parse_datatype_string

from cdc_delta.events.envelope import DEAD, OK, Decoded, DecodePlan, decode_record
from cdc_delta.events.ordering import SEQ_DDL

DECODED = "_decoded"
KAFKA_COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value")
_DECODED_DDL = (
    "status string, reason string, table string, op string, source_db string, source_table string, "
    f"seq {SEQ_DDL}, source_ts_ms bigint, row_json string, schema_json string"
)


def decoded_schema() -> StructType:
    """The struct the decoder UDF returns (one field per :class:`~cdc_delta.envelope.Decoded` field)."""
    schema = _parse_datatype_string(_DECODED_DDL)
    assert isinstance(schema, StructType) and schema.names == list(Decoded._fields)
    return schema


def decode_batch(batch: DataFrame, plan: DecodePlan) -> DataFrame:
    """The Kafka columns of ``batch`` plus a ``_decoded`` struct per record. Lazy; runs on executors."""

    def decode(topic: str, partition: int, offset: int, value: Any) -> Decoded:
        return decode_record(topic, partition, offset, None if value is None else bytes(value), plan)

    udf = F.udf(decode, decoded_schema())
    return batch.select(*KAFKA_COLUMNS, udf("topic", "partition", "offset", "value").alias(DECODED))


def field(name: str) -> Column:
    """A field of the decoded struct."""
    return F.col(DECODED).getField(name)


def is_row_event() -> Column:
    return (field("status") == OK) & (field("op") != "t")


def is_truncate() -> Column:
    return (field("status") == OK) & (field("op") == "t")


def is_dead() -> Column:
    return field("status") == DEAD
