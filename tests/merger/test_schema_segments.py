"""Schema changes among a table's pending changes (issue 26): landings merged together give what merging
them one by one gives, across a truncate and a column added between them; a type change the table
cannot follow stops the table after the landings before it are merged, and the live view shows what the
table then holds. The landings go through the stream's batch function into a real changelog; the merges
are the merger's, in the tests' Spark session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable

from cdc_delta.changelog.status import pending_changes
from cdc_delta.config import AppConfig, parse_config
from cdc_delta.delta.commits import app_commits
from cdc_delta.delta.tables import STOPPED_REASON_PROPERTY
from cdc_delta.demo.batches import kafka_frame
from cdc_delta.demo.generator import Column, SourceTable, envelope
from cdc_delta.merger.rebuild import RebuildError, rebuild_table
from cdc_delta.merger.run import Merger
from cdc_delta.rows.as_of import live_rows
from cdc_delta.stream.batch import BatchProcessor
from cdc_delta.views import fresh
from tests.delta_rows import canonical_rows, read_canonical

pytestmark = pytest.mark.spark

NAME, TOPIC = "inventory.items", "srv.inventory.items"
V1 = SourceTable("inventory", "items", (Column("id", "int64"), Column("qty", "int32")))
V2 = SourceTable("inventory", "items", (*V1.columns, Column("note", "string")))  # a column added
V3 = SourceTable("inventory", "items", (Column("id", "int64"), Column("qty", "string"), Column("note", "string")))
"""``qty`` became text at the source: an int column cannot follow."""


Landings = list[list[tuple[SourceTable, str, dict[str, Any] | None]]]


def landings() -> Landings:
    """Five landings of one table (landing numbers 1-5): rows; a truncate and a row after it; the added
    column; the type change the table cannot follow; a change after it."""
    return [
        [(V1, "c", {"id": 1, "qty": 10}), (V1, "c", {"id": 2, "qty": 20}), (V1, "c", {"id": 3, "qty": 30})],
        [(V1, "t", None), (V1, "c", {"id": 4, "qty": 40})],
        [(V2, "u", {"id": 1, "qty": 11, "note": "a"}), (V2, "c", {"id": 5, "qty": 50, "note": "b"})],
        [(V3, "u", {"id": 4, "qty": "forty", "note": "c"})],
        [(V2, "u", {"id": 5, "qty": 51, "note": "d"})],
    ]


AGELESS = {"tombstone_retention_hours": 10_000_000}
"""A tombstone retention longer than the source times here are old (1970): a fresh view reads their changes."""


def by_key(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: r["id"])


def config_for(root: Path, **more: Any) -> AppConfig:
    return parse_config(
        {
            "app_id": "segments",
            "storage": {"root": str(root)},
            "tables": [{"name": NAME, "topics": [TOPIC], "key": ["id"]}],
            "merge": {"max_delay_seconds": 3600},  # merged only when the test says
            **more,
        }
    )


def land(
    config: AppConfig,
    merger: Merger,
    spark: Any,
    upto: int,
    merge_each: bool,
    start: int = 0,
    batches: Landings | None = None,
    clock_ms: int = 0,
) -> None:
    """The landings from ``start`` up to before ``upto`` through the batch function (one batch each, offsets
    going on, the n-th change at source time ``clock_ms`` + 100 + 100 n seconds); with ``merge_each``, the
    table merged after each."""
    processor = BatchProcessor(config, listener=merger)
    offset, pos = 0, 100
    for batch_id, landing in enumerate((batches or landings())[:upto]):
        if batch_id < start:
            offset, pos = offset + len(landing), pos + 100 * len(landing)
            continue
        records = []
        for table, op, row in landing:
            pos += 100
            before, after = (row, None) if op == "d" else (None, row)
            image = envelope(table, op, before, after, pos=pos, ts_ms=clock_ms + pos * 1000, server="srv")
            key = None if row is None else json.dumps({"id": row["id"]}).encode()
            records.append((TOPIC, 0, offset, key, json.dumps(image, separators=(",", ":")).encode()))
            offset += 1
        assert processor.process(kafka_frame(spark, records), batch_id).landed == len(records)
        if merge_each:
            done = merger.merge_tables([NAME])
            assert done is not None and [t.error for t in done.tables] == [None]


@pytest.fixture(scope="module")
def one_by_one(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[dict[str, Any]]]:
    """(columns, rows) of the table with the three landings before the type change merged one by one."""
    config = config_for(tmp_path_factory.mktemp("one-by-one"))
    merger = Merger(spark, config)
    land(config, merger, spark, 3, merge_each=True)
    merger.close()
    columns, rows = read_canonical(spark, config.table_path(NAME))
    return columns, by_key(rows)


def test_landings_merged_together_equal_landings_merged_one_by_one(
    spark: Any, tmp_path: Path, one_by_one: tuple[list[str], list[dict[str, Any]]]
) -> None:
    config = config_for(tmp_path)
    merger = Merger(spark, config)
    land(config, merger, spark, 3, merge_each=False)
    live = live_rows(spark, config, [config.table(NAME)])[NAME]
    done = merger.merge_tables([NAME])
    assert done is not None and [t.error for t in done.tables] == [None]
    merger.close()
    columns, rows = read_canonical(spark, config.table_path(NAME))
    assert (columns, by_key(rows)) == one_by_one
    assert columns == ["id", "qty", "note"]
    by_id = {r["id"]: (r["qty"], r["note"], r["_cdc_deleted"]) for r in rows}
    assert by_id == {
        1: (11, "a", False),
        2: (20, None, True),
        3: (30, None, True),
        4: (40, None, False),
        5: (50, "b", False),
    }
    # The live view before the merge showed the same rows.
    assert by_key(canonical_rows(live)[1]) == by_key(rows)


def test_a_type_change_the_table_cannot_follow_stops_it_after_the_landings_before_it(
    spark: Any, tmp_path: Path, one_by_one: tuple[list[str], list[dict[str, Any]]]
) -> None:
    config = config_for(tmp_path)
    merger = Merger(spark, config)
    land(config, merger, spark, 5, merge_each=False)  # landings 1-5: the type change in landing 4
    # Before any merge, the live view already shows what the merger will leave: landings 1-3.
    before = live_rows(spark, config, [config.table(NAME)])[NAME]
    assert by_key(canonical_rows(before)[1]) == one_by_one[1]
    done = merger.merge_tables([NAME])
    merger.close()
    assert done is not None
    [result] = done.tables
    assert result.error is not None and (result.merged_through, result.merged_events, result.events) == (3, 7, 2)
    assert result.error.startswith(
        f"table {NAME}: column 'qty' changed type from int to string, which the Delta table cannot follow"
    ), result.error
    assert result.error.endswith("Its changes landed before that change are merged (through landing 3)."), result.error
    assert f"{NAME}: stopped, 2 changes left pending" in done.summary()
    columns, merged = read_canonical(spark, config.table_path(NAME))
    assert (columns, by_key(merged)) == one_by_one
    # Its last merge records what it holds: the 7 changes of landings 1-3, the newest at 800 s (not the
    # round's 9 changes and 1,000 s, which `status` would show as fresher than the table is).
    [last, *_] = app_commits(DeltaTable.forPath(spark, config.table_path(NAME)), config.app_id)
    record = last.record
    assert (record.operation, record.land_seq, record.events, record.table_max_source_ts_ms) == ("merge", 3, 7, 800_000)
    # A rebuild meets the same change: refused, and the table is as it was.
    with pytest.raises(RebuildError) as refused:
        rebuild_table(spark, config, NAME)
    assert str(refused.value).startswith(
        f"cannot rebuild {NAME}: its changes after landing 3 cannot be merged. The rebuilt table was discarded "
        f"and {NAME} is as it was; the stream stops it at the same change, where the merge said: table {NAME}: "
        "column 'qty' changed type from int to string, which the Delta table cannot follow."
    ), refused.value
    assert "(through landing 3)" not in str(refused.value)
    assert read_canonical(spark, config.table_path(NAME)) == (columns, merged)
    properties = spark.sql(f"SHOW TBLPROPERTIES delta.`{config.table_path(NAME)}`").collect()
    assert result.error in {r["key"]: r["value"] for r in properties}[STOPPED_REASON_PROPERTY]
    # Landings 4 and 5 stay pending; the live view shows what the table holds, as the merger left it.
    assert pending_changes(config, {NAME: 3})[NAME]["pending"] == 2
    live = live_rows(spark, config, [config.table(NAME)])[NAME]
    assert by_key(canonical_rows(live)[1]) == by_key(merged)


def test_a_fresh_view_reads_pending_changes_up_to_what_its_text_cannot_type(spark: Any, tmp_path: Path) -> None:
    """A fresh view (the metastore's, SQL text) stops before a truncate and before a schema the table does
    not hold yet, showing the table as merged from there: stale, never wrong; registered again after the
    merge, it reads past them up to the type change the table cannot follow."""
    config = config_for(tmp_path, fresh_views={"database": "fresh_segments"}, maintenance=AGELESS)
    merger = Merger(spark, config)
    land(config, merger, spark, 1, merge_each=True)  # landing 1 merged
    land(config, merger, spark, 5, merge_each=False, start=1)  # landings 2-5 pending: a truncate first
    table = config.table(NAME)

    def view_rows() -> list[dict[str, Any]]:
        return by_key(canonical_rows(spark.table("fresh_segments.inventory_items_all"))[1])

    [view] = fresh.register(spark, config)
    assert view.after == 1
    assert view_rows() == by_key(canonical_rows(live_rows(spark, config, [table], through=1)[NAME])[1])
    assert [r["id"] for r in view_rows()] == [1, 2, 3]
    done = merger.merge_tables([NAME])  # landings 2 and 3 merged; stopped at the type change of landing 4
    merger.close()
    assert done is not None and done.tables[0].merged_through == 3
    _, merged = read_canonical(spark, config.table_path(NAME))
    # Not registered since: the table as merged, in the columns the view had (note is added by the next).
    assert view_rows() == [{k: v for k, v in r.items() if k != "note"} for r in by_key(merged)]
    [view] = fresh.register(spark, config)
    assert view.after == 3
    assert view_rows() == by_key(merged)  # landing 4 cannot be typed: it and landing 5 are left out
    assert by_key(canonical_rows(live_rows(spark, config, [table])[NAME])[1]) == by_key(merged)


def test_a_fresh_view_reads_a_column_the_merger_widened_after_it_was_made_as_wide(spark: Any, tmp_path: Path) -> None:
    """Made while ``qty`` was an int; a later merge widens it to bigint: the view reads the wide values
    (a view that kept its old types would cast them back, and fail or round)."""
    wide = SourceTable("inventory", "items", (Column("id", "int64"), Column("qty", "int64")))
    batches: Landings = [
        [(V1, "c", {"id": 1, "qty": 10}), (V1, "c", {"id": 2, "qty": 20})],
        [(wide, "u", {"id": 1, "qty": 5_000_000_000})],
    ]
    config = config_for(tmp_path, fresh_views={"database": "fresh_widened"}, maintenance=AGELESS)
    merger = Merger(spark, config)
    land(config, merger, spark, 1, merge_each=True, batches=batches)
    fresh.register(spark, config)
    land(config, merger, spark, 2, merge_each=True, start=1, batches=batches)  # merged: qty is bigint now
    merger.close()
    rows = spark.table("fresh_widened.inventory_items").select("id", "qty")
    assert rows.schema["qty"].dataType.simpleString() == "bigint"
    assert sorted(tuple(r) for r in rows.collect()) == [(1, 5_000_000_000), (2, 20)]


def test_a_fresh_view_reads_no_change_the_purge_could_outlive(spark: Any, tmp_path: Path) -> None:
    """Two hours ago, key 1 was updated (landing 2) and deleted (landing 4), past a schema the view made
    after landing 1 cannot type (landing 3). Merged, its tombstone is older than the retention (an hour)
    and purged: the view, which reads landing 2, does not show the update as live (it reads no change as
    old as what the purge may remove). Changes of now it shows before they are merged."""
    import time

    from cdc_delta.maintenance.run import run_maintenance

    batches: Landings = [
        [(V1, "c", {"id": 1, "qty": 1}), (V1, "c", {"id": 2, "qty": 2})],
        [(V1, "u", {"id": 1, "qty": 11})],
        [(V2, "u", {"id": 2, "qty": 22, "note": "x"})],
        [(V2, "d", {"id": 1, "qty": 11, "note": None})],
        [(V2, "c", {"id": 3, "qty": 3, "note": "y"})],
        [(V2, "u", {"id": 3, "qty": 33, "note": "z"})],
    ]
    now_ms = int(time.time() * 1000)
    old = now_ms - 2 * 3_600_000
    config = config_for(tmp_path, fresh_views={"database": "fresh_purge"}, maintenance={"tombstone_retention_hours": 1})
    merger = Merger(spark, config)
    land(config, merger, spark, 1, merge_each=True, batches=batches, clock_ms=old)
    fresh.register(spark, config)
    land(config, merger, spark, 4, merge_each=False, start=1, batches=batches, clock_ms=old)
    land(config, merger, spark, 5, merge_each=False, start=4, batches=batches, clock_ms=now_ms)
    assert merger.merge_tables([NAME]) is not None

    def live() -> dict[int, int]:
        return {r["id"]: r["qty"] for r in spark.table("fresh_purge.inventory_items").collect()}

    assert live() == {2: 22, 3: 3}
    [table] = run_maintenance(spark, config).tables
    assert table.rows_purged == 1, table.summary()  # key 1's tombstone
    assert live() == {2: 22, 3: 3}
    fresh.register(spark, config)  # past landing 5
    land(config, merger, spark, 6, merge_each=False, start=5, batches=batches, clock_ms=now_ms)
    merger.close()
    assert live() == {2: 22, 3: 33}  # pending, and young: shown
