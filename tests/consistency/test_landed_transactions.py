"""Transaction metadata through the stream: every change lands with its transaction, every END lands as
a boundary row, the stream moves the consistent point on after its landings and keeps it in the next
landing's record, and a reader (``status``: delta-rs, no Spark) goes on from there. The boundaries change
no table."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdc_delta.config import load_config, parse_config
from cdc_delta.consistency.cut import consistent_cut
from cdc_delta.consistency.point import Point
from cdc_delta.consistency.read import consistent_point
from cdc_delta.demo.batches import kafka_frame
from cdc_delta.demo.generator import Column, SourceTable, envelope
from cdc_delta.lease import Lease
from cdc_delta.rows.as_of import live_rows
from cdc_delta.snapshot.boundary import boundary_at
from tests.batches import merging_processor
from tests.delta_rows import read_canonical
from tests.services import cdc_delta_here

pytestmark = pytest.mark.spark

ITEMS = SourceTable("inventory", "items", (Column("id", "int64"), Column("qty", "int32")))
LEDGER = SourceTable("inventory", "ledger", (Column("id", "int64"), Column("qty", "int32")))
UNTAKEN = "inventory.audit"  # captured by the connector, not by this lake: never waited for
COMPACT = (",", ":")


def change(table: SourceTable, offset: int, row_id: int, txn: str, order: int, pos: int) -> tuple:
    value = envelope(
        table, "c", None, {"id": row_id, "qty": row_id}, pos=pos, gtid=txn, ts_ms=1_000 * pos, server="srv"
    )
    value["payload"]["transaction"] = {"id": txn, "total_order": order, "data_collection_order": 1}
    # Written as the JsonConverter writes it: the JVM reads the block.
    return (f"srv.{table.db}.{table.table}", 0, offset, b"k", json.dumps(value, separators=COMPACT).encode())


def marker(offset: int, status: str, txn: str, counts: dict[str, int] | None = None) -> tuple:
    value: dict[str, Any] = {"status": status, "id": txn, "ts_ms": 5_000 + offset, "event_count": None}
    if counts is not None:
        value["event_count"] = sum(counts.values())
        value["data_collections"] = [{"data_collection": c, "event_count": n} for c, n in counts.items()]
    return ("srv.transaction", 0, offset, b"k", json.dumps(value).encode())


def at_ms(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)


def live_ids(spark: Any, config: Any, point: Point | None = None) -> dict[str, list[int]]:
    """Per table, the ids of its live rows: now, or at ``point``."""
    cut = None if point is None else consistent_cut(spark, config, point)
    rows = live_rows(spark, config, config.listed_tables, cut=cut)
    return {name: sorted(r["id"] for r in frame.where("NOT _cdc_deleted").collect()) for name, frame in rows.items()}


def test_transactions_land_and_the_point_waits_for_the_whole_of_one(spark: Any, tmp_path: Path) -> None:
    config = parse_config(
        {
            "app_id": "t",
            "storage": {"root": str(tmp_path)},
            "tables": [
                {"name": "inventory.items", "topics": ["srv.inventory.items"], "key": ["id"]},
                {"name": "inventory.ledger", "topics": ["srv.inventory.ledger"], "key": ["id"]},
            ],
            "merge": {"max_delay_seconds": 0},
        }
    )
    processor = merging_processor(spark, config)
    first = processor.process(
        kafka_frame(
            spark,
            [
                change(ITEMS, 0, 1, "0-1-5", 1, 100),
                change(LEDGER, 0, 1, "0-1-5", 2, 110),
                change(ITEMS, 1, 2, "0-1-6", 1, 200),  # the transaction's ledger change is late
                marker(0, "BEGIN", "0-1-5"),
                marker(1, "END", "0-1-5", {"inventory.items": 1, "inventory.ledger": 1, UNTAKEN: 3}),
                marker(2, "BEGIN", "0-1-6"),
                marker(3, "END", "0-1-6", {"inventory.items": 1, "inventory.ledger": 1}),
            ],
        ),
        0,
    )
    assert first.skips == {"transaction marker": 4} and first.landed == 3
    landed = spark.read.format("delta").load(config.changelog.located(config.storage.root))
    rows = {(r["op"], r["table"], r["txn"]["id"], r["txn"]["total_order"]) for r in landed.collect()}
    assert rows == {
        ("c", "inventory.items", "0-1-5", 1),
        ("c", "inventory.ledger", "0-1-5", 2),
        ("c", "inventory.items", "0-1-6", 1),
        ("x", None, "0-1-5", 5),
        ("x", None, "0-1-6", 2),
    }
    ends = landed.where("op = 'x'").select("row_json", "topic", "offset").collect()
    assert sorted((r["offset"], json.loads(r["row_json"])) for r in ends) == [
        (1, {"inventory.audit": 3, "inventory.items": 1, "inventory.ledger": 1}),
        (3, {"inventory.items": 1, "inventory.ledger": 1}),
    ]
    found = first.consistency
    assert found is not None and found.point is not None and found.point.txn_id == "0-1-5"
    assert found.ends_after == 1 and found.waiting is not None
    assert found.waiting.missing == {"inventory.ledger": (0, 1)}
    # Merged and read plainly, the tables hold half of 0-1-6; at the point, neither half: the items table
    # is read from before its merge of landing 0, with 0-1-5's change of it.
    assert live_ids(spark, config) == {"inventory.items": [1, 2], "inventory.ledger": [1]}
    assert live_ids(spark, config, found.point) == {"inventory.items": [1], "inventory.ledger": [1]}
    # What the cut leaves out: 0-1-6's items change (its statement at 200 s), which the tombstone purge
    # must not count as in a snapshot cut there.
    assert consistent_cut(spark, config, found.point).oldest_left_out_ms == {"inventory.items": 200_000}
    # The nightly snapshot's cut (ENDs at 5,001 and 5,003 ms): before the first, at 0-1-5, or waiting for 0-1-6.
    landing = found.point.through
    assert boundary_at(config, at_ms(5_001), landing).point.txn_id is None  # type: ignore[union-attr]
    at_five = boundary_at(config, at_ms(5_003), landing)
    assert at_five.point is not None and at_five.point.txn_id == "0-1-5" and at_five.waiting is None
    held = boundary_at(config, at_ms(5_004), landing)
    assert held.waiting == "transaction 0-1-6 has not landed whole (inventory.ledger 0 of 1 changes landed)"

    second = processor.process(kafka_frame(spark, [change(LEDGER, 1, 2, "0-1-6", 2, 210)]), 1)
    assert second.consistency is not None and second.consistency.point is not None
    assert (second.consistency.point.txn_id, second.consistency.ends_after) == ("0-1-6", 0)
    # A reader with no point of its own goes on from the one landing 1 keeps (the point after landing 0).
    read = consistent_point(config)
    assert read.point == second.consistency.point and read.waiting is None
    assert read.newest_source_ts_ms == 210_000 and read.trails_s() == pytest.approx(210 - 5.003)
    assert live_ids(spark, config, read.point) == {"inventory.items": [1, 2], "inventory.ledger": [1, 2]}
    at_six = boundary_at(config, at_ms(5_004), read.point.through)  # from the point landing 1 keeps
    assert at_six.point == read.point and at_six.waiting is None
    assert boundary_at(config, at_ms(5_003), read.point.through).point.txn_id == "0-1-5"  # type: ignore[union-attr]
    # The boundaries changed no table.
    for name in ("inventory.items", "inventory.ledger"):
        table = read_canonical(spark, config.storage.table_path(config.table(name)))[1]
        assert sorted((r["id"], r["_cdc_deleted"]) for r in table) == [(1, False), (2, False)]


def test_a_dead_lettered_change_holds_the_point_until_its_replay_lands_it(spark: Any, tmp_path: Path) -> None:
    """A transaction's change that is a dead letter (a value its column cannot take) holds the point at the
    transaction before; once the config takes it, ``replay-dead-letters`` lands it in the changelog (with
    the stream stopped, after its landings), the point passes the transaction, and a read at the point
    shows both halves, merged or not. A stream started again knows its own last landing still."""

    def config_file(qty: str) -> Path:
        data = {
            "app_id": "t",
            "storage": {"root": str(tmp_path / "lake")},
            "tables": [
                {"name": "inventory.items", "topics": ["srv.inventory.items"], "key": ["id"]},
                {
                    "name": "inventory.ledger",
                    "topics": ["srv.inventory.ledger"],
                    "key": ["id"],
                    "columns": {"id": "bigint", "qty": qty},
                },
            ],
            "merge": {"max_delay_seconds": 0},
        }
        path = tmp_path / "cdc.yaml"
        path.write_text(yaml.safe_dump(data))
        return path

    strict = load_config(config_file("int"), env={})
    late = envelope(
        LEDGER, "c", None, {"id": 2, "qty": 2}, pos=210, gtid="0-1-6", ts_ms=210_000, server="srv", with_schema=False
    )
    late["after"]["qty"] = 7.5  # not an int
    late["transaction"] = {"id": "0-1-6", "total_order": 2, "data_collection_order": 1}
    batch = [
        change(ITEMS, 0, 1, "0-1-5", 1, 100),
        change(LEDGER, 0, 1, "0-1-5", 2, 110),
        change(ITEMS, 1, 2, "0-1-6", 1, 200),
        ("srv.inventory.ledger", 0, 1, b"k", json.dumps(late).encode()),
        marker(0, "BEGIN", "0-1-5"),
        marker(1, "END", "0-1-5", {"inventory.items": 1, "inventory.ledger": 1}),
        marker(2, "BEGIN", "0-1-6"),
        marker(3, "END", "0-1-6", {"inventory.items": 1, "inventory.ledger": 1}),
    ]
    first = merging_processor(spark, strict).process(kafka_frame(spark, batch), 0)
    assert (first.landed, first.dead_lettered) == (3, 1)
    held = first.consistency
    assert held is not None and held.point is not None and held.point.txn_id == "0-1-5"
    assert held.waiting is not None and held.waiting.missing == {"inventory.ledger": (0, 1)}

    # The config fixed; a merge job runs (it holds the merge lease): the replay lands, and leaves merging to it.
    fixed_path = config_file("double")
    fixed = load_config(fixed_path, env={})
    with Lease(fixed, "merge", "merge"):
        run = cdc_delta_here(fixed_path, "replay-dead-letters")
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    said = run.stdout.splitlines()
    number = int(said[0].split("landed as landing ")[1].split(",")[0])
    assert number > first.land_seq and said == [  # type: ignore[operator]
        f"replay: 1 dead letters, 1 changes landed as landing {number}, 0 dead-lettered again, 0 skipped",
        "not merged here: the merge job that runs merges them (cdc-delta status shows them pending until then)",
    ]
    changelog = spark.read.format("delta").load(fixed.changelog.located(fixed.storage.root))
    replayed = changelog.where(f"land_seq = {number}").collect()
    assert [(r["table"], r["txn"]["id"], r["batch_id"]) for r in replayed] == [("inventory.ledger", "0-1-6", None)]
    read = consistent_point(fixed)
    assert read.point is not None and read.point.txn_id == "0-1-6" and read.waiting is None
    assert read.newest_source_ts_ms == first.max_source_ts_ms  # the stream's newest landing's, not the replay's
    both = {"inventory.items": [1, 2], "inventory.ledger": [1, 2]}
    # Not merged yet, read from the changelog: at the point, and live (pending changes over the table).
    assert live_ids(spark, fixed, read.point) == both and live_ids(spark, fixed) == both
    ledger_path = fixed.storage.table_path(fixed.table("inventory.ledger"))
    assert [r["id"] for r in read_canonical(spark, ledger_path)[1]] == [1]
    merged = cdc_delta_here(fixed_path, "merge", "--until-caught-up")
    assert merged.returncode == 0, merged.stderr[-3000:]
    assert {r["id"]: r["qty"] for r in read_canonical(spark, ledger_path)[1]} == {1: 1.0, 2: 7.5}

    # The stream started again runs its batch 0 again (as after a kill before its checkpoint committed): its
    # newest landing is still known as batch 0's, the replay's being no batch's, and nothing lands twice.
    rows = changelog.count()
    again = merging_processor(spark, fixed).process(kafka_frame(spark, batch), 0)
    assert again.land_seq is None, again.summary()
    assert spark.read.format("delta").load(fixed.changelog.located(fixed.storage.root)).count() == rows
