"""Turn decoded events of one table into typed rows: the business columns plus the metadata columns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType, _parse_datatype_string

from cdc_delta import columns as C
from cdc_delta.decode.decoded import field
from cdc_delta.rows.column_defaults import ColumnDefault
from cdc_delta.rows.schema_evolution import descriptor_columns
from cdc_delta.rows.truncates import seq_literal
from cdc_delta.rows.typed import json_type, typed, typed_literal


def _filled(value: Column, name: str, type_name: str, default: ColumnDefault, descriptors: Sequence[str]) -> Column:
    """``value``, or the column's default for events whose image lacks it and that predate its addition
    at the source (see :mod:`cdc_delta.rows.column_defaults`)."""
    lacking = [d for d in descriptors if name not in descriptor_columns(d)]
    if not lacking:
        return value
    older = field("schema_json").isin(lacking) & (field("seq") < seq_literal(default.since))
    return F.when(older, typed_literal(default.value, type_name)).otherwise(value)


def _parsed_columns(business: Sequence[tuple[str, str]]) -> list[Column]:
    """Each business column as read from an event's canonical JSON (``row_json``), by position: the
    parsed struct is cast to positional names, so no column name is ever resolved (two names that
    differ only in case would be ambiguous to Spark)."""
    types = [_parse_datatype_string(json_type(type_name)) for _, type_name in business]
    as_read = StructType([StructField(name, t) for (name, _), t in zip(business, types, strict=True)])
    positional = StructType([StructField(f"c{i}", t) for i, t in enumerate(types)])
    parsed = F.from_json(field("row_json"), as_read).cast(positional)
    return [parsed.getField(f"c{i}") for i in range(len(business))]


def typed_rows(
    events: DataFrame,
    business: Sequence[tuple[str, str]],
    ingested_at: Column,
    defaults: Mapping[str, ColumnDefault] | None = None,
    descriptors: Sequence[str] = (),
) -> DataFrame:
    """One row per decoded row event: every business column of the table (null where the event's image
    lacks it, as for a column dropped at the source; the column's default where it was added at the
    source with one after the event), then the metadata columns.

    ``events`` holds the Kafka columns and the ``_decoded`` struct; ``business`` is the table's
    (column, type) list after schema evolution; ``descriptors`` the distinct ``schema_json`` of the
    changes; ``ingested_at`` when each landed.
    """
    out = []
    for (name, type_name), parsed in zip(business, _parsed_columns(business) if business else [], strict=True):
        value = typed(parsed, type_name)
        if defaults and name in defaults:
            value = _filled(value, name, type_name, defaults[name], descriptors)
        out.append(value.alias(name))
    out += [
        field("op").alias(C.OP),
        (field("op") == "d").alias(C.DELETED),
        field("seq").alias(C.SEQ),
        F.timestamp_millis(field("source_ts_ms")).alias(C.SOURCE_TS),
        ingested_at.cast("timestamp").alias(C.INGESTED_AT),
        field("source_db").alias(C.SOURCE_DB),
        field("source_table").alias(C.SOURCE_TABLE),
        F.col("topic").alias(C.TOPIC),
        F.col("partition").cast("int").alias(C.PARTITION),
        F.col("offset").alias(C.OFFSET),
    ]
    return events.select(*out)
