"""The table index: every table a pattern entry made (``name: "{db}.{table}"``), the topic and source
table it comes from and the landing that found it, appended by the stream before the landing that
first holds the table's changes. Every process lists the tables from the config's listed tables and
this index (:meth:`cdc_delta.config.AppConfig.all_tables`); a table's key and settings come from its
entry, which its name alone tells (:meth:`cdc_delta.config.AppConfig.owner`).

One topic per table: a second topic whose events a pattern entry names alike (``{table}`` over two
databases, or two servers with the same schema) would mix two tables' rows, so its events are refused
(dead letters, with the reason) until the entry's name tells the topics apart. A truncate is taken
from the table's topic or, for a DROP TABLE, from the schema-change topic of the connector that
writes it (the table topic's prefix); from elsewhere it is refused too, as it would soft-delete the
rows of the table's own source."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from cdc_delta.changelog.table import TABLE, tables_path, tables_schema
from cdc_delta.config import AppConfig
from cdc_delta.delta.delta_rs import open_table, read

_COLUMNS = [TABLE, "topic", "source_db", "source_table", "found_at"]


class Made(NamedTuple):
    """Where a table a pattern entry made comes from."""

    topic: str
    source_db: str | None
    source_table: str | None


class Origin(NamedTuple):
    """Where some of a batch's changes of one table come from."""

    topic: str
    source_db: str | None
    source_table: str | None
    truncate: bool


def discovered(spark: SparkSession, config: AppConfig) -> dict[str, Made]:
    """The tables the pattern entries made so far, by name (none before a stream ran)."""
    if not config.patterns:
        return {}
    path = tables_path(config)
    if not DeltaTable.isDeltaTable(spark, path):
        return {}
    rows = spark.read.format("delta").load(path).select(*_COLUMNS).orderBy("found_at").collect()
    return _by_name(r.asDict() for r in rows)


def discovered_without_spark(config: AppConfig) -> dict[str, Made]:
    """:func:`discovered`, read with delta-rs (``status``, ``check``)."""
    if not config.patterns:
        return {}
    table = open_table(config, tables_path(config))
    if table is None:
        return {}
    rows = read(table.to_pyarrow_dataset(), _COLUMNS).to_pylist()
    return _by_name(sorted(rows, key=lambda r: r["found_at"]))


def _by_name(oldest_first: Any) -> dict[str, Made]:
    """The first record of each name (a name recorded twice, by the stream and a replay of dead letters
    at the same time, is the first's)."""
    out: dict[str, Made] = {}
    for r in oldest_first:
        out.setdefault(r[TABLE], Made(r["topic"], r["source_db"], r["source_table"]))
    return out


@dataclass
class Claims:
    """A batch's pattern tables: the new ones, and the (table, topic) pairs refused, with the reason."""

    new: dict[str, Made] = field(default_factory=dict)
    refused: dict[tuple[str, str], str] = field(default_factory=dict)


def claim(config: AppConfig, known: Mapping[str, Made], origins: Mapping[str, set[Origin]]) -> Claims:
    """Decide a batch's pattern tables (``origins``: where each table's changes in the batch come from)
    against the index (``known``). A new table belongs to the topic of its row events (of several in one
    batch, the first by name, so that a batch run again decides alike); other topics are refused."""
    claims = Claims()
    for name in sorted(origins):
        entry = config.owner(name)
        if entry is None or not entry.is_pattern:
            continue  # a listed table, fed by whatever its route takes
        rows = sorted(o for o in origins[name] if not o.truncate)
        owner = known.get(name)
        if owner is None and rows:
            owner = claims.new[name] = Made(rows[0].topic, rows[0].source_db, rows[0].source_table)
        if owner is None:
            continue  # only a truncate of a table never seen: nothing to mix it with
        for origin in sorted(origins[name]):
            if origin.topic == owner.topic:
                continue
            if origin.truncate and owner.topic.startswith(origin.topic + "."):
                continue  # a DROP TABLE on the connector's schema-change topic
            what = "a truncate of" if origin.truncate else "rows for"
            claims.refused[(name, origin.topic)] = (
                f"pattern entry {entry.name!r} takes {what} table {name!r} from topic {origin.topic!r}, but the table "
                f"is topic {owner.topic!r}'s: their rows would mix. Give the entry's name a part that tells the "
                "topics apart (a named group of its topic_pattern), or list one of the tables with its own entry"
            )
    return claims


def record(spark: SparkSession, config: AppConfig, new: Mapping[str, Made], land_seq: int, at: dt.datetime) -> None:
    """Append the new tables to the index (before the landing that holds their first changes;
    ``land_seq``: that landing, or the number of a replay of dead letters)."""
    rows = [(name, *made, land_seq, at) for name, made in sorted(new.items())]
    frame = spark.createDataFrame(rows, tables_schema())
    frame.coalesce(1).write.format("delta").mode("append").save(tables_path(config))
