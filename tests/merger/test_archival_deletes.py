"""Archival deletes, by hand-made histories: a purge (one transaction deleting ``min_rows`` rows or more)
stays in the lake, archived, also where it lands over two batches with a merge between them, replayed, or
read through the live rows before it is merged; a single delete, a purge's row that ``where`` does not take,
and a re-insert after the purge are ordinary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cdc_delta.config import parse_config
from cdc_delta.demo.batches import kafka_frame
from cdc_delta.demo.generator import Column, SourceTable, envelope
from cdc_delta.exceptions import ConfigError
from cdc_delta.merger.run import Merger
from cdc_delta.rows.as_of import live_rows
from cdc_delta.stream.batch import BatchProcessor
from tests.batches import merging_processor
from tests.delta_rows import read_canonical

pytestmark = pytest.mark.spark

ITEMS = SourceTable("shop", "items", (Column("id", "int64"), Column("status", "string")))


def config(root: Path, merge_now: bool = True) -> Any:
    return parse_config(
        {
            "app_id": "arch",
            "storage": {"root": str(root)},
            "tables": [
                {
                    "name": "shop.items",
                    "topics": ["srv.shop.items"],
                    "key": ["id"],
                    "archival_deletes": {"min_rows": 3, "where": "status <> 'open'"},
                }
            ],
            "merge": {"max_delay_seconds": 0 if merge_now else 3600},
        }
    )


class Source:
    """Changes as MariaDB logs them: each a transaction of its own (its GTID), or several in one."""

    def __init__(self) -> None:
        self.pos, self.gtid, self.offset = 4, 0, 0

    def changes(self, *changes: tuple[str, int, str | None]) -> list[tuple]:
        """One transaction: (op, id, status) each."""
        self.gtid += 1
        out = []
        for op, key, status in changes:
            self.pos += 100
            values = {"id": key, "status": status}
            before, after = (values, None) if op == "d" else (None, values)
            value = envelope(ITEMS, op, before, after, pos=self.pos, gtid=f"0-1-{self.gtid}", server="srv")
            out.append(("srv.shop.items", 0, self.offset, b"k", json.dumps(value).encode()))
            self.offset += 1
        return out


def rows_by_id(spark: Any, cfg: Any) -> dict[int, tuple[str, bool, str | None]]:
    rows = read_canonical(spark, cfg.storage.table_path(cfg.table("shop.items")))[1]
    return {r["id"]: (r["_cdc_op"], r["_cdc_deleted"], r["status"]) for r in rows}


EXPECTED = {
    1: ("a", False, "closed"),  # purged, kept
    2: ("c", False, "back"),  # purged, then inserted again: ordinary
    3: ("d", True, "open"),  # purged, but where does not take it: deleted
    4: ("a", False, "closed"),  # purged in the second batch
    5: ("d", True, "closed"),  # a delete of one row: deleted
}


def history(source: Source) -> tuple[list[tuple], list[tuple]]:
    """The rows, then a purge of 1-4 that lands over two batches (2 deletes, then 2 more), a single delete
    and a re-insert."""
    rows = [("c", 1, "closed"), ("c", 2, "closed"), ("c", 3, "open"), ("c", 4, "closed"), ("c", 5, "closed")]
    first = source.changes(*rows[:3]) + source.changes(*rows[3:])
    purge = source.changes(("d", 1, "closed"), ("d", 2, "closed"), ("d", 3, "open"), ("d", 4, "closed"))
    later = source.changes(("d", 5, "closed")) + source.changes(("c", 2, "back"))
    return first + purge[:2], purge[2:] + later


def test_a_purge_over_two_batches_merged_between_them_is_kept(spark: Any, tmp_path: Path) -> None:
    cfg = config(tmp_path)
    one, two = history(Source())
    processor = merging_processor(spark, cfg)
    first = processor.process(kafka_frame(spark, one), 0)
    assert not first.archived  # two deletes of one transaction: not yet a purge
    assert rows_by_id(spark, cfg)[1] == ("d", True, "closed")
    second = processor.process(kafka_frame(spark, two), 1)
    # Its two deletes here, and the two of the first batch landed again archived.
    assert second.archived == {"shop.items": 4} and "4 archived (a purge kept)" in second.summary()
    assert rows_by_id(spark, cfg) == EXPECTED
    # The second batch again (replayed from Kafka under a new batch id): nothing changes.
    processor.process(kafka_frame(spark, two), 2)
    assert rows_by_id(spark, cfg) == EXPECTED


def test_the_live_rows_and_a_later_merge_agree(spark: Any, tmp_path: Path) -> None:
    cfg = config(tmp_path, merge_now=False)
    one, two = history(Source())
    merger = Merger(spark, cfg)
    processor = BatchProcessor(cfg, listener=merger)
    processor.process(kafka_frame(spark, one), 0)
    merger.merge_all()  # the first part merged as deletes
    processor.process(kafka_frame(spark, two), 1)
    live = live_rows(spark, cfg, cfg.tables)["shop.items"].collect()
    assert {r["id"]: (r["_cdc_op"], r["_cdc_deleted"], r["status"]) for r in live} == EXPECTED
    merger.merge_all()
    assert rows_by_id(spark, cfg) == EXPECTED


def test_bad_settings_are_refused_in_one_line(spark: Any, tmp_path: Path) -> None:
    table = {"name": "shop.items", "topics": ["srv.shop.items"], "key": ["id"]}
    base = {"app_id": "arch", "storage": {"root": str(tmp_path)}}
    with pytest.raises(ConfigError, match="counts a purge's deletes over the changelog's landings: keep them"):
        parse_config(
            {**base, "tables": [{**table, "archival_deletes": {"min_rows": 3}}], "changelog": {"retention_hours": 0}}
        )
    bad = parse_config({**base, "tables": [{**table, "archival_deletes": {"min_rows": 3, "where": "status <>"}}]})
    with pytest.raises(
        ConfigError, match=r"table shop.items: archival_deletes.where 'status <>' is not a SQL condition"
    ):
        Merger(spark, bad)
