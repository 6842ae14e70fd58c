"""Turn decoded events of one table into typed rows: the business columns plus the metadata columns."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType, _parse_datatype_string

from cdc_delta import columns as C
from cdc_delta.events import column_types
from cdc_delta.ingest.decoded import field
from cdc_delta.ingest.merge import seq_literal
from cdc_delta.ingest.schema_evolution import descriptor_columns

if TYPE_CHECKING:
    from cdc_delta.ingest.column_defaults import ColumnDefault

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


def typed_literal(value: object, type_name: str) -> Column:
    """A canonical JSON value (see :mod:`cdc_delta.events.logical_types`) as a typed literal."""
    if type_name == "array<string>":
        return F.array(*[F.lit(v) for v in value]).cast(type_name)  # type: ignore[attr-defined]
    return _typed(F.lit(value), type_name)


def _filled(value: Column, name: str, type_name: str, default: ColumnDefault, descriptors: Sequence[str]) -> Column:
    """``value``, or the column's default for events whose image lacks it and that predate its addition
    at the source (see :mod:`cdc_delta.ingest.column_defaults`)."""
    lacking = [d for d in descriptors if name not in descriptor_columns(d)]
    if not lacking:
        return value
    older = field("schema_json").isin(lacking) & (field("seq") < seq_literal(default.since))
    return F.when(older, typed_literal(default.value, type_name)).otherwise(value)


def _parsed_columns(business: Sequence[tuple[str, str]]) -> list[Column]:
    """Each business column as read from an event's canonical JSON (``row_json``), by position: the
    parsed struct is cast to positional names, so no column name is ever resolved (two names that
    differ only in case would be ambiguous to Spark)."""
    types = [_parse_datatype_string(_json_type(type_name)) for _, type_name in business]
    as_read = StructType([StructField(name, t) for (name, _), t in zip(business, types, strict=True)])
    positional = StructType([StructField(f"c{i}", t) for i, t in enumerate(types)])
    parsed = F.from_json(field("row_json"), as_read).cast(positional)
    return [parsed.getField(f"c{i}") for i in range(len(business))]


def typed_rows(
    events: DataFrame,
    business: Sequence[tuple[str, str]],
    ingested_at: dt.datetime,
    defaults: Mapping[str, ColumnDefault] | None = None,
    descriptors: Sequence[str] = (),
) -> DataFrame:
    """One row per decoded row event: every business column of the table (null where the event's image
    lacks it, as for a column dropped at the source; the column's default where it was added at the
    source with one after the event), then the metadata columns.

    ``events`` holds the Kafka columns and the ``_decoded`` struct; ``business`` is the table's
    (column, type) list after schema evolution; ``descriptors`` the batch's distinct ``schema_json``.
    """
    out = []
    for (name, type_name), parsed in zip(business, _parsed_columns(business) if business else [], strict=True):
        value = _typed(parsed, type_name)
        if defaults and name in defaults:
            value = _filled(value, name, type_name, defaults[name], descriptors)
        out.append(value.alias(name))
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
