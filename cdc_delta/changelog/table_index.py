"""The table index: every table a pattern entry made (``name: "{db}.{table}"``), the topic and source
table it comes from and the landing that found it, appended by the stream before the landing that
first holds the table's changes. Every process lists the tables from the config's listed tables and
this index (:func:`indexed`, a :class:`~cdc_delta.catalog.TableCatalog`); a table's settings come from
its entry, which its name alone tells (:meth:`cdc_delta.config.AppConfig.owner`), and so does its key,
unless the entry has none: then the key is the one Debezium's record key named when the table was found
(its primary key), kept here. A table whose records carry no key (no primary key) is refused, and so
are its records once their key names other columns than the index's (a changed primary key), each with
the reason.

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

from cdc_delta.catalog import TableCatalog
from cdc_delta.changelog.table import TABLE, tables_path, tables_schema
from cdc_delta.config import AppConfig
from cdc_delta.delta.delta_rs import open_table, read
from cdc_delta.kafka.applied import reads_topic

_COLUMNS = [TABLE, "topic", "source_db", "source_table", "found_at"]
_KEY = "key"


class Made(NamedTuple):
    """Where a table a pattern entry made comes from, and its key where its entry has none."""

    topic: str
    source_db: str | None
    source_table: str | None
    key: tuple[str, ...] = ()


RecordKeys = Mapping[tuple[str, str], set[tuple[str, ...]]]
"""Per (table, topic), the key columns its records name (Debezium's record key)."""


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
    index = spark.read.format("delta").load(path)
    rows = index.select(*_COLUMNS, *([_KEY] if _KEY in index.columns else [])).orderBy("found_at").collect()
    return _by_name(r.asDict() for r in rows)


def indexed(spark: SparkSession, config: AppConfig) -> TableCatalog:
    """The tables known now: the config's, and those the pattern entries made so far, with their keys."""
    return knowing(config, discovered(spark, config))


def indexed_without_spark(config: AppConfig) -> TableCatalog:
    """:func:`indexed`, read with delta-rs (``status``, ``check``)."""
    return knowing(config, discovered_without_spark(config))


def knowing(config: AppConfig, made: Mapping[str, Made]) -> TableCatalog:
    """The config's tables and the tables ``made``."""
    return TableCatalog(config, {name: m.key for name, m in made.items()})


def discovered_without_spark(config: AppConfig) -> dict[str, Made]:
    """:func:`discovered`, read with delta-rs (``status``, ``check``)."""
    if not config.patterns:
        return {}
    table = open_table(config, tables_path(config))
    if table is None:
        return {}
    dataset = table.to_pyarrow_dataset()
    rows = read(dataset, _COLUMNS + [_KEY] if _KEY in dataset.schema.names else _COLUMNS).to_pylist()
    return _by_name(sorted(rows, key=lambda r: r["found_at"]))


def _by_name(oldest_first: Any) -> dict[str, Made]:
    """The first record of each name (a name recorded twice, by the stream and a replay of dead letters
    at the same time, is the first's)."""
    out: dict[str, Made] = {}
    for r in oldest_first:
        made, key = out.get(r[TABLE]), tuple(r.get(_KEY) or ())
        if made is None:
            out[r[TABLE]] = Made(r["topic"], r["source_db"], r["source_table"], key)
        elif key and not made.key:  # the key a table made while its entry named one got later (:func:`claim`)
            out[r[TABLE]] = made._replace(key=key)
    return out


@dataclass
class Claims:
    """A batch's pattern tables: the new ones (and those whose key is recorded now), and the (table, topic)
    pairs refused, with the reason."""

    new: dict[str, Made] = field(default_factory=dict)
    refused: dict[tuple[str, str], str] = field(default_factory=dict)


def claim(
    config: AppConfig,
    known: Mapping[str, Made],
    origins: Mapping[str, set[Origin]],
    keys: RecordKeys | None = None,
) -> Claims:
    """Decide a batch's pattern tables (``origins``: where each table's changes in the batch come from)
    against the index (``known``). A new table belongs to the topic of its row events (of several in one
    batch, the first by name, so that a batch run again decides alike); other topics are refused. Where
    the entry has no key, ``keys`` holds the key columns the records of each (table, topic) name
    (:mod:`cdc_delta.events.record_keys`, JSON or Avro): a new table takes them as its key (and so does one
    made while its entry named a key, recorded again with it), and the batch's rows of a (table, topic)
    whose records name other columns than the table's key, or none, are refused, all of them (``keys``
    None: keys are not judged, as where no record was read)."""
    judged = keys is not None
    keys = keys or {}
    claims = Claims()
    for name in sorted(origins):
        entry = config.owner(name)
        if entry is None or not entry.is_pattern:
            continue  # a listed table, fed by whatever its route takes
        rows = sorted(o for o in origins[name] if not o.truncate)
        owner = known.get(name)
        if owner is None and rows:
            first = rows[0]
            key = () if entry.key else _one_key(keys.get((name, first.topic), set()))
            if not entry.key and not key and judged:
                for origin in origins[name]:
                    claims.refused[(name, origin.topic)] = _keyless(entry.name, name, origin.topic, keys)
                continue
            owner = claims.new[name] = Made(first.topic, first.source_db, first.source_table, key)
        if owner is None:
            continue  # only a truncate of a table never seen: nothing to mix it with
        seen = keys.get((name, owner.topic), set())
        if not entry.key and judged and not owner.key and name not in claims.new and seen:
            adopted = _one_key(seen)
            if adopted:  # made while the entry named its key: its records name it now
                owner = claims.new[name] = owner._replace(key=adopted)
            else:
                claims.refused[(name, owner.topic)] = _keyless(entry.name, name, owner.topic, keys)
        elif not entry.key and judged and seen - {owner.key}:
            claims.refused[(name, owner.topic)] = _key_changed(name, owner, seen)
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


def _one_key(seen: set[tuple[str, ...]]) -> tuple[str, ...]:
    """The key all of ``seen`` name, or none."""
    return next(iter(seen)) if len(seen) == 1 else ()


def _keyless(entry: str, name: str, topic: str, keys: RecordKeys) -> str:
    seen = sorted(k for k in keys.get((name, topic), set()) if k)
    if len(seen) > 1:
        what = f"its records' keys name different columns ({', '.join(map(str, map(list, seen)))})"
    else:
        what = "its records have no key (the source table has no primary key), or none in JSON or Avro"
    return (
        f"pattern entry {entry!r} takes each table's key from Debezium's record key, and table {name!r} (topic "
        f"{topic!r}) has none: {what}. List the table with its own entry and key, or set the connector's "
        "message.key.columns for it"
    )


def _key_changed(name: str, owner: Made, seen: set[tuple[str, ...]]) -> str:
    now = sorted(list(k) for k in seen if k != owner.key)
    return (
        f"table {name!r} has key {list(owner.key)} (its primary key when it was found), but records of topic "
        f"{owner.topic!r} now have key {now[0] if len(now) == 1 else now}: its primary key changed. List the table "
        "with its own entry and its new key, then replay these dead letters (rows merged under the old key stay "
        "as they are: compare the table with cdc-delta check)"
    )


def record(spark: SparkSession, config: AppConfig, new: Mapping[str, Made], land_seq: int, at: dt.datetime) -> None:
    """Append the new tables to the index (before the landing that holds their first changes;
    ``land_seq``: that landing, or the number of a replay of dead letters)."""
    rows = [
        (name, made.topic, made.source_db, made.source_table, land_seq, at, list(made.key) or None)
        for name, made in sorted(new.items())
    ]
    frame = spark.createDataFrame(rows, tables_schema())
    # mergeSchema: an index written before keys were recorded gets the column.
    frame.coalesce(1).write.format("delta").mode("append").option("mergeSchema", "true").save(tables_path(config))


def tables_of_topics(config: AppConfig, made: Mapping[str, Made], topics: list[str]) -> dict[str, list[str]]:
    """Per topic, the tables its records feed: the listed tables that route it, and those the pattern
    entries made from it (as far as the index knows them)."""
    out = {}
    for topic in topics:
        names = {t.name for t in config.listed_tables if reads_topic(config, t, topic)}
        names |= {name for name, m in made.items() if m.topic == topic}
        out[topic] = sorted(names)
    return out
