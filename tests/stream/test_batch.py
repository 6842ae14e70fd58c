"""Batch-level behaviour: idempotent replays, empty batches, schema changes, dead letters, truncates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from delta.tables import DeltaTable

from cdc_delta.config import parse_config
from cdc_delta.demo.batches import kafka_frame
from cdc_delta.demo.generator import Column, SourceTable, envelope
from cdc_delta.exceptions import ConcurrentStreamError, ConfigError
from cdc_delta.rows.dedupe import latest_per_key
from cdc_delta.stream.batch import BatchProcessor
from tests.batches import merging_processor
from tests.delta_rows import landings_per_commit, read_canonical

pytestmark = pytest.mark.spark

ITEMS = SourceTable("inventory", "items", (Column("id", "int64"), Column("qty", "int32")))
OTHER = SourceTable("inventory", "other", (Column("id", "int64"), Column("note", "string")))


def make_config(root: Path, **extra: object):
    return parse_config(
        {
            "app_id": "t",
            "storage": {"root": str(root)},
            "tables": [
                {"name": "inventory.items", "topics": ["srv.inventory.items"], "key": ["id"]},
                {"name": "inventory.other", "topics": ["srv.inventory.other"], "key": ["id"]},
            ],
            "merge": {"max_delay_seconds": 0},
            **extra,
        }
    )


def rec(table: SourceTable, offset: int, op: str, values: dict | None, pos: int, **kw: object) -> tuple:
    before, after = (values, None) if op == "d" else (None, values)
    value = envelope(table, op, before, after, pos=pos, server="srv", **kw)
    return (f"srv.{table.db}.{table.table}", 0, offset, b"k", json.dumps(value).encode())


def table_rows(spark, config, name: str) -> list[dict]:
    return read_canonical(spark, config.storage.table_path(config.table(name)))[1]


def test_latest_per_key_keeps_the_greatest_seq(spark) -> None:
    df = spark.createDataFrame(
        [(1, "a", (1, 5)), (1, "b", (1, 7)), (2, "c", (0, 9)), (2, "d", (1, 0)), (1, "e", (1, 6))],
        "id int, v string, _cdc_seq struct<phase:int,pos:int>",
    )
    assert sorted((r.id, r.v) for r in latest_per_key(df, ["id"]).collect()) == [(1, "b"), (2, "d")]
    with pytest.raises(ValueError, match="at least one key column"):
        latest_per_key(df, [])


def test_replaying_a_batch_id_lands_and_commits_nothing(spark, tmp_path: Path) -> None:
    config = make_config(tmp_path)
    processor = merging_processor(spark, config)
    batch = [rec(ITEMS, 0, "c", {"id": 1, "qty": 1}, 100), rec(ITEMS, 1, "u", {"id": 1, "qty": 2}, 200)]
    first = processor.process(kafka_frame(spark, batch), 0)
    path = config.storage.table_path(config.table("inventory.items"))
    changelog = f"{tmp_path}/_cdc_changelog"
    version = DeltaTable.forPath(spark, path).history(1).first()["version"]
    landed = DeltaTable.forPath(spark, changelog).history(1).first()["version"]
    again = processor.process(kafka_frame(spark, batch), 0)
    assert first.land_seq == 1 and again.land_seq is None  # version 0 of the changelog is its creation
    assert first.merge.tables[0].merge.version == version and again.merge is None  # nothing pending
    assert DeltaTable.forPath(spark, path).history(1).first()["version"] == version
    assert DeltaTable.forPath(spark, changelog).history(1).first()["version"] == landed
    assert spark.read.format("delta").load(changelog).count() == 2
    assert landings_per_commit(spark, path) == [1]
    assert [r["qty"] for r in table_rows(spark, config, "inventory.items")] == [2]
    history = DeltaTable.forPath(spark, changelog).history().where("operation = 'WRITE'")
    meta = json.loads(history.first()["userMetadata"])
    assert meta["offsets"] == {"srv.inventory.items": {"0": 1}} and meta["batch_id"] == 0 and meta["land_seq"] == 1


def test_a_batch_with_nothing_to_land_commits_its_record_and_a_restart_numbers_after_every_landing(
    spark, tmp_path: Path
) -> None:
    config = make_config(tmp_path)
    changelog = f"{tmp_path}/_cdc_changelog"
    first = merging_processor(spark, config)
    assert first.process(kafka_frame(spark, [rec(ITEMS, 0, "c", {"id": 1, "qty": 1}, 100)]), 0).land_seq == 1
    tombstone = ("srv.inventory.items", 0, 1, b"k", None)
    only = first.process(kafka_frame(spark, [tombstone]), 1)
    assert (only.landed, only.skipped, only.land_seq) == (0, 1, 2)
    assert first.process(kafka_frame(spark, [rec(ITEMS, 2, "c", {"id": 2, "qty": 2}, 300)]), 2).land_seq == 3
    # A restart (a new process, the same checkpoint): the last batch again lands nothing, the next one is
    # numbered after every landing so far and merged.
    again = merging_processor(spark, config)
    assert again.process(kafka_frame(spark, [rec(ITEMS, 2, "c", {"id": 2, "qty": 2}, 300)]), 2).land_seq is None
    assert again.process(kafka_frame(spark, [rec(ITEMS, 3, "c", {"id": 3, "qty": 3}, 400)]), 3).land_seq == 4
    # A second restart after the table merged through that landing: the next landing is numbered past it
    # (a number the table already merged through would never be merged).
    third = merging_processor(spark, config)
    assert third.process(kafka_frame(spark, [rec(ITEMS, 4, "c", {"id": 4, "qty": 4}, 500)]), 4).land_seq == 5
    landings = [
        json.loads(r["userMetadata"])
        for r in DeltaTable.forPath(spark, changelog).history().where("operation = 'WRITE'").collect()
    ]
    assert sorted((m["batch_id"], m["land_seq"]) for m in landings) == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
    assert next(m for m in landings if m["batch_id"] == 1)["offsets"] == {"srv.inventory.items": {"0": 1}}
    assert [r["id"] for r in table_rows(spark, config, "inventory.items")] == [1, 2, 3, 4]


def test_a_second_stream_of_the_same_app_is_refused_before_it_lands(spark, tmp_path: Path) -> None:
    config = make_config(tmp_path, merge={"max_delay_seconds": 3600})
    first = BatchProcessor(config, epoch="e1")
    first.process(kafka_frame(spark, [rec(ITEMS, 0, "c", {"id": 1, "qty": 1}, 100)]), 0)
    second = BatchProcessor(config, epoch="e2")  # the same app_id and root
    second.process(kafka_frame(spark, [rec(ITEMS, 1, "c", {"id": 2, "qty": 1}, 200)]), 0)  # lands: it is alone
    changelog = f"{tmp_path}/_cdc_changelog"
    landed = DeltaTable.forPath(spark, changelog).history(1).first()["version"]
    with pytest.raises(ConcurrentStreamError) as refused:
        first.process(kafka_frame(spark, [rec(ITEMS, 2, "c", {"id": 3, "qty": 1}, 300)]), 1)
    assert str(refused.value).startswith(
        f"another stream of app_id t lands into the changelog {changelog} (its batch 0 landed as version {landed} at "
    )
    assert "epoch e2): only one stream may run per app_id and storage root" in str(refused.value)
    assert DeltaTable.forPath(spark, changelog).history(1).first()["version"] == landed  # nothing appended
    # The one that goes on numbers its landings after everything the changelog holds.
    result = second.process(kafka_frame(spark, [rec(ITEMS, 3, "c", {"id": 4, "qty": 1}, 400)]), 1)
    seqs = [r["land_seq"] for r in spark.read.format("delta").load(changelog).select("land_seq").collect()]
    assert sorted(seqs) == [1, 2, result.land_seq] and result.land_seq == 3


def test_older_event_in_a_later_batch_changes_nothing(spark, tmp_path: Path) -> None:
    config = make_config(tmp_path)
    processor = merging_processor(spark, config)
    processor.process(kafka_frame(spark, [rec(ITEMS, 5, "u", {"id": 1, "qty": 9}, 900)]), 0)
    processor.process(kafka_frame(spark, [rec(ITEMS, 4, "c", {"id": 1, "qty": 1}, 100)]), 1)
    processor.process(kafka_frame(spark, [rec(ITEMS, 3, "r", {"id": 1, "qty": 0}, 4)]), 2)
    assert [(r["qty"], r["_cdc_op"]) for r in table_rows(spark, config, "inventory.items")] == [(9, "u")]


def test_delete_then_reinsert_revives_and_unknown_delete_is_a_tombstone(spark, tmp_path: Path) -> None:
    config = make_config(tmp_path)
    processor = merging_processor(spark, config)
    processor.process(
        kafka_frame(
            spark, [rec(ITEMS, 0, "c", {"id": 1, "qty": 1}, 100), rec(ITEMS, 1, "d", {"id": 7, "qty": 70}, 150)]
        ),
        0,
    )
    processor.process(kafka_frame(spark, [rec(ITEMS, 2, "d", {"id": 1, "qty": 1}, 200)]), 1)
    rows = {r["id"]: r for r in table_rows(spark, config, "inventory.items")}
    assert rows[1]["_cdc_deleted"] and rows[1]["qty"] == 1  # soft delete keeps the row
    assert rows[7]["_cdc_deleted"] and rows[7]["qty"] == 70  # tombstone for a key only the stock export has
    processor.process(kafka_frame(spark, [rec(ITEMS, 3, "c", {"id": 1, "qty": 5}, 300)]), 2)
    rows = {r["id"]: r for r in table_rows(spark, config, "inventory.items")}
    assert not rows[1]["_cdc_deleted"] and rows[1]["qty"] == 5 and rows[1]["_cdc_op"] == "c"


def test_empty_batch_commits_nothing(spark, tmp_path: Path) -> None:
    config = make_config(tmp_path)
    result = merging_processor(spark, config).process(kafka_frame(spark, []), 0)
    assert result.rows_in == 0 and "empty, nothing landed" in result.summary()
    assert not any(tmp_path.iterdir())


def test_new_column_appears_and_dropped_column_gets_nulls(spark, tmp_path: Path) -> None:
    config = make_config(tmp_path)
    processor = merging_processor(spark, config)
    wide = SourceTable("inventory", "items", (*ITEMS.columns, Column("color", "string")))
    processor.process(kafka_frame(spark, [rec(ITEMS, 0, "c", {"id": 1, "qty": 1}, 100)]), 0)
    processor.process(kafka_frame(spark, [rec(wide, 1, "c", {"id": 2, "qty": 2, "color": "red"}, 200)]), 1)
    processor.process(kafka_frame(spark, [rec(ITEMS, 2, "u", {"id": 2, "qty": 3}, 300)]), 2)
    columns, rows = read_canonical(spark, config.storage.table_path(config.table("inventory.items")))
    assert columns == ["id", "qty", "color"]
    assert [(r["id"], r["qty"], r["color"]) for r in rows] == [(1, 1, None), (2, 3, None)]


def merged(result, name: str):
    """The table's share of the merge round run after a batch."""
    return next(t for t in result.merge.tables if t.table == name)


def test_incompatible_type_change_stops_only_that_table(spark, tmp_path: Path) -> None:
    from cdc_delta.changelog.status import pending_changes

    config = make_config(tmp_path)
    processor = merging_processor(spark, config)
    processor.process(kafka_frame(spark, [rec(ITEMS, 0, "c", {"id": 1, "qty": 1}, 100)]), 0)
    changed = SourceTable("inventory", "items", (Column("id", "int64"), Column("qty", "string")))
    batch = [rec(changed, 1, "u", {"id": 1, "qty": "lots"}, 200), rec(OTHER, 0, "c", {"id": 5, "note": "hi"}, 210)]
    result = processor.process(kafka_frame(spark, batch), 1)
    assert result.dead_lettered == 0 and result.landed == 2
    assert (
        "table inventory.items: column 'qty' changed type from int to string" in merged(result, "inventory.items").error
    )
    assert merged(result, "inventory.other").error is None
    assert [r["note"] for r in table_rows(spark, config, "inventory.other")] == ["hi"]
    assert [r["qty"] for r in table_rows(spark, config, "inventory.items")] == [1]
    # Later changes of the stopped table stay pending too, even compatible ones; nothing is dropped.
    later = processor.process(kafka_frame(spark, [rec(ITEMS, 2, "u", {"id": 1, "qty": 2}, 300)]), 2)
    assert later.landed == 1 and later.merge is None  # the stopped table is not merged
    path = config.storage.table_path(config.table("inventory.items"))
    assert landings_per_commit(spark, path) == [1]
    assert pending_changes(config, {"inventory.items": 1})["inventory.items"]["pending"] == 2
    assert not DeltaTable.isDeltaTable(spark, config.storage.dead_letters)


def test_widening_follows_int_to_bigint(spark, tmp_path: Path) -> None:
    config = make_config(tmp_path)
    processor = merging_processor(spark, config)
    processor.process(kafka_frame(spark, [rec(ITEMS, 0, "c", {"id": 1, "qty": 1}, 100)]), 0)
    wider = SourceTable("inventory", "items", (Column("id", "int64"), Column("qty", "int64")))
    processor.process(kafka_frame(spark, [rec(wider, 1, "c", {"id": 2, "qty": 2**40}, 200)]), 1)
    path = config.storage.table_path(config.table("inventory.items"))
    assert dict(spark.read.format("delta").load(path).dtypes)["qty"] == "bigint"
    assert sorted(r["qty"] for r in table_rows(spark, config, "inventory.items")) == [1, 2**40]


def test_truncate_soft_deletes_older_rows_of_that_source(spark, tmp_path: Path) -> None:
    config = make_config(tmp_path)
    processor = merging_processor(spark, config)
    processor.process(
        kafka_frame(
            spark,
            [
                rec(ITEMS, 0, "c", {"id": 1, "qty": 1}, 100),
                rec(ITEMS, 1, "c", {"id": 2, "qty": 2}, 110),
                rec(OTHER, 0, "c", {"id": 1, "note": "keep"}, 120),
            ],
        ),
        0,
    )
    result = processor.process(
        kafka_frame(spark, [rec(ITEMS, 2, "t", None, 200), rec(ITEMS, 3, "c", {"id": 2, "qty": 20}, 300)]), 1
    )
    assert merged(result, "inventory.items").truncated == 1
    rows = {r["id"]: r for r in table_rows(spark, config, "inventory.items")}
    assert rows[1]["_cdc_deleted"] and rows[1]["_cdc_op"] == "t"
    assert not rows[2]["_cdc_deleted"] and rows[2]["qty"] == 20
    assert not table_rows(spark, config, "inventory.other")[0]["_cdc_deleted"]


def test_replaying_dead_letters_after_a_config_fix(spark, tmp_path: Path) -> None:
    from cdc_delta.delta.status import dead_letter_count
    from cdc_delta.stream.replay import replay_dead_letters

    def config_with(qty_type: str):
        return parse_config(
            {
                "app_id": "t",
                "storage": {"root": str(tmp_path)},
                "tables": [
                    {
                        "name": "inventory.items",
                        "topics": ["srv.inventory.items"],
                        "key": ["id"],
                        "columns": {"id": "bigint", "qty": qty_type},
                    }
                ],
                "merge": {"max_delay_seconds": 0},
            }
        )

    value = json.dumps({"op": "c", "after": {"id": 1, "qty": 7.5}, "source": {"file": "b.000001", "pos": 9}})
    records = [
        ("srv.inventory.items", 0, 0, b"k", value.encode()),
        rec(ITEMS, 1, "c", {"id": 2, "qty": 3}, 20, with_schema=False),
        ("srv.inventory.items", 0, 2, b"k", b"not json"),  # no fix helps this one
    ]
    first = merging_processor(spark, config_with("int")).process(kafka_frame(spark, records), 0)
    assert (first.landed, first.dead_lettered) == (1, 2)
    fixed = config_with("double")
    assert dead_letter_count(fixed) == 2
    with pytest.raises(ConfigError, match="no table named 'nope'"):
        replay_dead_letters(spark, fixed, "nope", None)
    again = replay_dead_letters(spark, fixed, None, None)
    assert (again.rows_in, again.landed, again.dead_lettered) == (2, 1, 1)
    assert again.land_seq is not None and first.land_seq is not None and again.land_seq > first.land_seq
    rows = {r["id"]: r["qty"] for r in table_rows(spark, fixed, "inventory.items")}
    assert rows == {1: 7.5, 2: 3.0}  # the int column was widened to double to take the fix
    # Both are marked replayed; the one dead again is a new row, still to do: the count falls to 1.
    letters = spark.read.format("delta").load(fixed.storage.dead_letters).collect()
    done = sorted((r["offset"], r["replayed_at"] is not None) for r in letters)
    assert done == [(0, True), (2, False), (2, True)], done
    assert dead_letter_count(fixed) == 1
    # A second replay reads only what is left (it is dead again), and changes no table.
    second = replay_dead_letters(spark, fixed, None, None)
    assert (second.rows_in, second.landed, second.dead_lettered) == (1, 0, 1)
    assert dead_letter_count(fixed) == 1
    assert {r["id"]: r["qty"] for r in table_rows(spark, fixed, "inventory.items")} == rows
