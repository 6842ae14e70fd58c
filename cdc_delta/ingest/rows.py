"""Turn decoded events of one table into typed rows: the business columns plus the metadata columns."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.events import column_types
from cdc_delta.ingest.decode import field

# Column types whose canonical JSON form is not what from_json would read directly.
_JSON_FORM = {"date": "string", "timestamp": "bigint", "binary": "string"}


def _json_type(type_name: str) -> str:
    if column_types.parse_decimal(type_name) is not None:
        return "string"  # exact decimal text; from_json would go through a double
    return _JSON_FORM.get(type_name, type_name)


def _typed(value: Column, type_name: str) -> Column:
    if type_name == "date":
        return F.to_date(value)
    if type_name == "timestamp":
        return F.timestamp_micros(value)
    if type_name == "binary":
        return F.unbase64(value)
    return value.cast(type_name)


def json_ddl(business: Sequence[tuple[str, str]]) -> str:
    """The from_json schema that reads the canonical JSON of these columns."""
    return ", ".join(f"{C.quote(name)} {_json_type(type_name)}" for name, type_name in business)


def typed_rows(events: DataFrame, business: Sequence[tuple[str, str]], ingested_at: dt.datetime) -> DataFrame:
    """One row per decoded row event: every business column of the table (null where the event's image
    lacks it, as for a column dropped at the source), then the metadata columns.

    ``events`` holds the Kafka columns and the ``_decoded`` struct; ``business`` is the table's
    (column, type) list after schema evolution.
    """
    parsed = F.from_json(field("row_json"), json_ddl(business)) if business else None
    out = [
        _typed(parsed.getField(name), type_name).alias(name)  # type: ignore[union-attr]
        for name, type_name in business
    ]
    out += [
        field("op").alias(C.OP),
        (field("op") == "d").alias(C.DELETED),
        field("seq").alias(C.SEQ),
        F.timestamp_millis(field("source_ts_ms")).alias(C.SOURCE_TS),
        F.lit(ingested_at).cast("timestamp").alias(C.INGESTED_AT),
        field("source_db").alias(C.SOURCE_DB),
        field("source_table").alias(C.SOURCE_TABLE),
        F.col("topic").alias(C.TOPIC),
        F.col("partition").cast("int").alias(C.PARTITION),
        F.col("offset").alias(C.OFFSET),
    ]
    return events.select(*out)
