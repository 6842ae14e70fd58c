"""The table index: every table a pattern entry made (``name: "{db}.{table}"``), the topic it comes
from and the landing that found it, appended by the stream before the landing that first holds the
table's changes. Every process enumerates the tables from the config's listed tables and this index
(:meth:`cdc_delta.config.AppConfig.all_tables`); a table's key and settings come from its entry, which
its name alone tells (:meth:`cdc_delta.config.AppConfig.owner`).

One topic per table: a second topic whose events a pattern entry gives the same name (``{table}`` over
two databases) would mix two tables' rows, so its events are refused (dead letters with the reason)
until the entry's name tells the topics apart."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from cdc_delta.changelog.table import TABLE, tables_path, tables_schema
from cdc_delta.config import AppConfig
from cdc_delta.delta.delta_rs import open_table, read


def discovered(spark: SparkSession, config: AppConfig) -> dict[str, str]:
    """The tables the pattern entries made so far: name -> topic (none before a stream ran)."""
    if not config.patterns:
        return {}
    path = tables_path(config)
    if not DeltaTable.isDeltaTable(spark, path):
        return {}
    return {r[TABLE]: r["topic"] for r in spark.read.format("delta").load(path).select(TABLE, "topic").collect()}


def discovered_without_spark(config: AppConfig) -> dict[str, str]:
    """:func:`discovered`, read with delta-rs (``status``, ``check``)."""
    if not config.patterns:
        return {}
    table = open_table(config, tables_path(config))
    if table is None:
        return {}
    rows = read(table.to_pyarrow_dataset(), [TABLE, "topic"]).to_pylist()
    return {r[TABLE]: r["topic"] for r in rows}


@dataclass
class Claims:
    """What a batch's pattern tables are: the new ones (name -> topic) and the (table, topic) pairs
    refused, with the reason."""

    new: dict[str, str] = field(default_factory=dict)
    refused: dict[tuple[str, str], str] = field(default_factory=dict)


def claim(config: AppConfig, known: Mapping[str, str], origins: Mapping[str, set[str]]) -> Claims:
    """Decide a batch's pattern tables (``origins``: each table the batch routed, with its topics) against
    the index (``known``). A new table belongs to its topic (of several in one batch, the first by
    name, so that a batch run again decides alike); another topic naming it is refused."""
    claims = Claims()
    for name in sorted(origins):
        entry = config.owner(name)
        if entry is None or not entry.is_pattern:
            continue  # a listed table, fed by whatever its route takes
        topics = sorted(origins[name])
        owner = known.get(name)
        if owner is None:
            owner = claims.new[name] = topics[0]
        for topic in topics:
            if topic != owner:
                claims.refused[(name, topic)] = (
                    f"pattern entry {entry.name!r} names topic {topic!r} {name!r}, the table of topic {owner!r}: their "
                    "rows would mix. Give the entry's name a part that tells the topics apart (a named group of its "
                    "topic_pattern), or list one of the tables with its own entry"
                )
    return claims


def record(spark: SparkSession, config: AppConfig, new: Mapping[str, str], land_seq: int, at: dt.datetime) -> None:
    """Append the new tables to the index (before the landing that holds their first changes)."""
    rows = [(name, topic, land_seq, at) for name, topic in sorted(new.items())]
    frame = spark.createDataFrame(rows, tables_schema())
    frame.coalesce(1).write.format("delta").mode("append").save(tables_path(config))
