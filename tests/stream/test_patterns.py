"""One pattern entry for many tables: each source table becomes a table of its own, named from the
event, listed in the changelog's table index; every process finds them there; two topics the entry
names alike are refused, not mixed."""

from __future__ import annotations

import json
import shutil
import tempfile
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cdc_delta.changelog.status import with_pending
from cdc_delta.changelog.table import tables_path
from cdc_delta.changelog.table_index import Made, discovered, discovered_without_spark, indexed, knowing
from cdc_delta.check.topics import NO_TABLE
from cdc_delta.cli.main import main
from cdc_delta.config import parse_config
from cdc_delta.delta.status import table_status
from cdc_delta.demo.batches import kafka_frame
from cdc_delta.demo.generator import ORDER_COLUMNS, ChangeGenerator, SourceTable, topic_of
from cdc_delta.demo.producer import ensure_topics
from cdc_delta.stream.batch import BatchProcessor
from cdc_delta.stream.replay import replay_dead_letters
from tests.batches import LandingsSeen, merging_processor
from tests.delta_rows import landings_per_commit

pytestmark = pytest.mark.spark

PATTERN = {"name": "{db}.{table}", "topic_pattern": r"dbserver1\.(db\d+)\.t\d+", "key": ["id"]}
KEYLESS = {k: v for k, v in PATTERN.items() if k != "key"}
"""Each table's key from its records' Kafka key."""


def records(generator: ChangeGenerator, count: int) -> list[tuple[Any, ...]]:
    offsets: Counter[str] = Counter()
    out = []
    for change in generator.changes(count):
        out.append((change.topic, zlib.crc32(change.key) % 2, offsets[change.topic], change.key, change.value))
        offsets[change.topic] += 1
    return out


def test_one_pattern_entry_replicates_every_table_and_a_listed_one_overrides_it(spark: Any, tmp_path: Path) -> None:
    tables = tuple(SourceTable(f"db{i % 3}", f"t{i:02d}", ORDER_COLUMNS) for i in range(4))
    generator = ChangeGenerator(tables, seed=11, tombstones=True)
    listed = {"name": "db0.t00", "topics": [topic_of(tables[0])], "key": ["id"], "zorder_by": ["customer"]}
    config = parse_config(
        {
            "app_id": "pat",
            "storage": {"root": str(tmp_path)},
            "merge": {"max_delay_seconds": 0, "concurrency": 3},
            "tables": [PATTERN, listed],
        }
    )
    batches = [records(generator, 120), records(generator, 80)]
    processor = merging_processor(spark, config)
    for batch_id, batch in enumerate(batches):
        result = processor.process(kafka_frame(spark, batch), batch_id)
        assert result.dead_lettered == 0 and result.rows_in == len(batch), result.summary()
    replay = processor.process(kafka_frame(spark, batches[-1]), 1)  # the last batch again, after a crash
    assert replay.land_seq is None, replay.summary()

    found = discovered(spark, config)
    made = {f"{t.db}.{t.table}": Made(topic_of(t), t.db, t.table) for t in tables[1:]}
    assert found == made  # the listed table is not in the index; the replay added nothing
    assert spark.read.format("delta").load(tables_path(config)).count() == len(made)
    assert discovered_without_spark(config) == made
    assert [t.name for t in knowing(config, found).tables()] == ["db0.t00", *sorted(made)]
    for table in tables:
        name = f"{table.db}.{table.table}"
        path = config.storage.table_path(config.table(name))
        assert path == f"{tmp_path}/{table.db}/{table.table}"
        rows = {r["id"]: r for r in spark.read.format("delta").load(path).collect()}
        assert {k for k, r in rows.items() if not r["_cdc_deleted"]} == set(generator.rows[(table.db, table.table)])
        assert {k for k, r in rows.items() if r["_cdc_deleted"]} == generator.deleted[(table.db, table.table)]
        for key, expected in generator.rows[(table.db, table.table)].items():
            assert (rows[key]["amount"], rows[key]["status"]) == (expected["amount"], expected["status"]), name
        ids = landings_per_commit(spark, path)
        assert len(ids) == 2 and ids == sorted(set(ids)), f"{name}: each landing merged once, not {ids}"
    assert config.table("db0.t00").zorder_by == ["customer"]  # the listed entry's settings, not the pattern's


def test_two_topics_one_name_the_second_is_dead_lettered_whole(spark: Any, tmp_path: Path) -> None:
    first, second = SourceTable("db1", "t01", ORDER_COLUMNS), SourceTable("db2", "t01", ORDER_COLUMNS)
    generator = ChangeGenerator((first, second), seed=5)
    entry = {**PATTERN, "name": "{table}"}
    config = parse_config(
        {"app_id": "clash", "storage": {"root": str(tmp_path)}, "merge": {"max_delay_seconds": 0}, "tables": [entry]}
    )
    processor = merging_processor(spark, config)
    batches = [records(generator, 60), records(generator, 40)]
    for batch_id, batch in enumerate(batches):
        result = processor.process(kafka_frame(spark, batch), batch_id)
        theirs = [r for r in batch if r[0] == topic_of(second)]
        assert (result.dead_lettered, result.landed) == (len(theirs), len(batch) - len(theirs)), result.summary()
    assert discovered(spark, config) == {"t01": Made(topic_of(first), "db1", "t01")}

    letters = spark.read.format("delta").load(config.storage.dead_letters).collect()
    sent = {(r[0], r[1], r[2]): r[4] for batch in batches for r in batch if r[0] == topic_of(second)}
    assert {(d["topic"], d["partition"], d["offset"]): bytes(d["value"]) for d in letters} == sent  # byte for byte
    assert {d["reason"] for d in letters} == {
        f"pattern entry '{{table}}' takes rows for table 't01' from topic {topic_of(second)!r}, but the table is "
        f"topic {topic_of(first)!r}'s: their rows would mix. Give the entry's name a part that tells the topics "
        "apart (a named group of its topic_pattern), or list one of the tables with its own entry"
    }
    path = config.storage.table_path(config.table("t01"))
    rows = spark.read.format("delta").load(path).collect()
    assert {r["id"] for r in rows if not r["_cdc_deleted"]} == set(generator.rows[("db1", "t01")])

    replayed = replay_dead_letters(spark, config, None, None)  # refused again: never merged into t01
    assert (replayed.dead_lettered, replayed.landed) == (len(sent), 0), replayed.summary()
    assert spark.read.format("delta").load(path).collect() == rows


def test_200_tables_of_one_pattern_land_in_one_commit_and_status_lists_each(spark: Any) -> None:
    """Merges are left to a later round (the merger is told of the landing, not run): the landing, the
    index and ``status`` (delta-rs) are what grows with the number of tables."""
    tables = tuple(SourceTable(f"db{i % 4}", f"t{i:03d}", ORDER_COLUMNS) for i in range(200))
    generator = ChangeGenerator(tables, seed=3)
    root = tempfile.mkdtemp(prefix="cdc-200-")
    try:
        config = parse_config({"app_id": "wide", "storage": {"root": root}, "tables": [KEYLESS]})
        landings = LandingsSeen()
        batch = records(generator, 1_500)
        result = BatchProcessor(config, listener=landings).process(kafka_frame(spark, batch), 0)
        assert (result.landed, result.dead_lettered) == (len(batch), 0), result.summary()
        sent = Counter(f"{t.split('.')[1]}.{t.split('.')[2]}" for t, *_ in batch)
        assert landings[0].events_by_table == dict(sent)
        assert len(sent) == 200

        found = discovered_without_spark(config)
        assert found == {f"{t.db}.{t.table}": Made(topic_of(t), t.db, t.table, ("id",)) for t in tables}
        status = with_pending(config, table_status(config, knowing(config, found).tables()))
        assert {s.table: s.pending for s in status} == dict(sent)
        assert all(s.rows is None and s.merged_seq is None for s in status)  # none merged yet
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_tables_key_is_its_records_key_and_a_table_without_one_or_a_changed_one_is_refused(
    spark: Any, tmp_path: Path
) -> None:
    """A pattern entry without ``key``: each table's key is the one its records' Kafka key names, kept in the
    index; a table whose records have no key (no primary key) and rows whose key changed are dead letters."""
    keyed, keyless = SourceTable("db1", "t01", ORDER_COLUMNS), SourceTable("db1", "t02", ORDER_COLUMNS)
    generator = ChangeGenerator((keyed, keyless), seed=7)
    config = parse_config(
        {"app_id": "keys", "storage": {"root": str(tmp_path)}, "merge": {"max_delay_seconds": 0}, "tables": [KEYLESS]}
    )
    processor = merging_processor(spark, config)

    def without_keys(batch: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        return [(*r[:3], None, r[4]) if r[0] == topic_of(keyless) else r for r in batch]

    first = without_keys(records(generator, 80))
    after_first = dict(generator.rows[("db1", "t01")])
    result = processor.process(kafka_frame(spark, first), 0)
    theirs = sum(r[0] == topic_of(keyless) for r in first)
    assert (result.dead_lettered, result.landed) == (theirs, len(first) - theirs), result.summary()
    assert discovered(spark, config) == {"db1.t01": Made(topic_of(keyed), "db1", "t01", ("id",))}

    # The source's primary key changed to (id, customer): its rows are refused, the table stays as it was.
    second = [
        (*r[:3], json.dumps({**json.loads(r[3]), "customer": "c"}).encode(), r[4]) if r[0] == topic_of(keyed) else r
        for r in without_keys(records(generator, 40))
    ]
    result = processor.process(kafka_frame(spark, second), 1)
    assert (result.dead_lettered, result.landed) == (len(second), 0), result.summary()

    path = config.table_path("db1.t01")
    rows = {r["id"]: r for r in spark.read.format("delta").load(path).collect()}
    assert {k for k, r in rows.items() if not r["_cdc_deleted"]} == set(after_first)
    assert all(rows[k]["amount"] == v["amount"] for k, v in after_first.items())
    letters = spark.read.format("delta").load(config.storage.dead_letters)
    reasons = {r["reason"] for r in letters.select("reason").distinct().collect()}
    assert reasons == {
        "pattern entry '{db}.{table}' takes each table's key from Debezium's record key, and table 'db1.t02' (topic "
        "'dbserver1.db1.t02') has none: its records have no key (the source table has no primary key), or none in "
        "JSON or Avro. List the table with its own entry and key, or set the connector's message.key.columns for it",
        "table 'db1.t01' has key ['id'] (its primary key when it was found), but records of topic "
        "'dbserver1.db1.t01' now have key ['id', 'customer']: its primary key changed. List the table with its own "
        "entry and its new key, then replay these dead letters (rows merged under the old key stay as they are: "
        "compare the table with cdc-delta check)",
    }
    assert letters.count() == theirs + len(second)


def test_an_index_from_before_keys_takes_them_when_the_entry_drops_its_key(spark: Any, tmp_path: Path) -> None:
    """An index written before keys were recorded (no ``key`` column), tables made while the entry named
    its key: once the entry has none, each table is left out of the listings until its next change, which
    records the key its records name (the index gets the column)."""
    table = SourceTable("db1", "t01", ORDER_COLUMNS)
    generator = ChangeGenerator((table,), seed=9)
    settings = {"app_id": "upg", "storage": {"root": str(tmp_path)}, "merge": {"max_delay_seconds": 0}}
    keyed = parse_config({**settings, "tables": [PATTERN]})
    merging_processor(spark, keyed).process(kafka_frame(spark, records(generator, 30)), 0)
    index = spark.read.format("delta").load(tables_path(keyed)).drop("key")
    index.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(tables_path(keyed))

    keyless = parse_config({**settings, "tables": [KEYLESS]})
    assert indexed(spark, keyless).tables() == []  # its key is not known yet
    result = merging_processor(spark, keyless).process(kafka_frame(spark, records(generator, 30)), 1)
    assert (result.dead_lettered, result.landed) == (0, 30), result.summary()
    assert discovered(spark, keyless) == {"db1.t01": Made(topic_of(table), "db1", "t01", ("id",))}
    rows = spark.read.format("delta").load(keyless.table_path("db1.t01")).where("NOT _cdc_deleted").collect()
    assert {r["id"] for r in rows} == set(generator.rows[("db1", "t01")])


def test_a_pattern_table_is_named_in_its_dead_letters_reason_when_its_name_is_not_a_name(
    spark: Any, tmp_path: Path
) -> None:
    bad = SourceTable("db1", "t-1", ORDER_COLUMNS)
    config = parse_config(
        {"app_id": "bad", "storage": {"root": str(tmp_path)}, "tables": [{**PATTERN, "topic_pattern": r".+"}]}
    )
    batch = records(ChangeGenerator((bad,), seed=1), 5)
    result = BatchProcessor(config).process(kafka_frame(spark, batch), 0)
    assert result.dead_lettered == 5, result.summary()
    letters = spark.read.format("delta").load(config.storage.dead_letters).collect()
    assert {d["reason"] for d in letters} == {
        "pattern entry '{db}.{table}' makes the name 'db1.t-1' for topic 'dbserver1.db1.t-1', not a table name "
        "(letters, digits and _, not starting with a digit): list that table with its own entry and a name"
    }
    assert json.loads(bytes(letters[0]["value"]))["payload"]["source"]["table"] == "t-1"


def test_a_drop_table_on_the_schema_change_topic_does_not_claim_the_table(spark: Any, tmp_path: Path) -> None:
    """A DROP TABLE (a truncate of the table) comes on the connector's schema-change topic (``cap``, a
    real Debezium's record): the table is still its own topic's."""
    capture = Path(__file__).parents[1] / "events" / "debezium" / "mariadb-3.5.0.jsonl"
    captured = [json.loads(line) for line in capture.read_text().splitlines()]
    drop = [r for r in captured if r["topic"] == "cap" and '"DROP"' in (r["value"] or "")][-1]
    temp = SourceTable("e2e", "temp", ORDER_COLUMNS)
    rows = records(ChangeGenerator((temp,), seed=2, server="cap"), 4)
    entry = {"name": "{db}.{table}", "topic_pattern": r"cap\.e2e\.[^.]+", "key": ["id"]}
    config = parse_config({"app_id": "drop", "storage": {"root": str(tmp_path)}, "tables": [entry]})
    batch = [("cap", 0, drop["offset"], (drop["key"] or "").encode() or None, drop["value"].encode()), *rows]
    result = BatchProcessor(config).process(kafka_frame(spark, batch), 0)
    assert (result.landed, result.dead_lettered) == (5, 0), result.summary()
    assert discovered(spark, config) == {"e2e.temp": Made("cap.e2e.temp", "e2e", "temp")}


def test_check_config_discover_asks_the_broker_what_each_topic_becomes(
    kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topics = ["disc", "disc.shop.orders", "disc.shop.items", "disc.crm.items", "disc.crm.bad-name", "other.x.y"]
    ensure_topics(kafka_bootstrap, topics, partitions=1)
    path = tmp_path / "cdc.yaml"
    data = {
        "app_id": "disc",
        "storage": {"root": str(tmp_path / "lake")},
        "kafka": {"bootstrap_servers": kafka_bootstrap, "topic_pattern": r"^disc(\..*)?$"},
        "tables": [
            {"name": "{table}", "topic_pattern": r"disc\.[^.]+\.[^.]+", "key": ["id"]},
            {"name": "shop.orders", "topics": ["disc.shop.orders"], "key": ["order_id"]},
        ],
    }
    path.write_text(json.dumps(data))  # YAML reads JSON
    assert main(["check-config", "--config", str(path), "--discover"]) == 1  # some would be dead letters
    out = capsys.readouterr().out.splitlines()
    assert out[-6:] == [
        f"  disc -> {NO_TABLE}",
        "  disc.crm.bad-name -> dead letters: pattern entry '{table}' makes the name 'bad-name' for topic "
        "'disc.crm.bad-name', not a table name (letters, digits and _, not starting with a digit): list that "
        "table with its own entry and a name",
        "  disc.crm.items -> items (made by '{table}', key ['id'])",
        "  disc.shop.items -> dead letters: pattern entry '{table}' takes rows for table 'items' from topic "
        "'disc.shop.items', but the table is topic 'disc.crm.items''s: their rows would mix. Give the entry's "
        "name a part that tells the topics apart (a named group of its topic_pattern), or list one of the "
        "tables with its own entry",
        "  disc.shop.orders -> shop.orders (listed, key ['order_id'])",
        "discover: 5 topics: 2 tables (1 made by pattern entries), 2 topics to the dead letters, 1 without a table",
    ]
