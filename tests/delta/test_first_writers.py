"""Tables that more than one writer may create: the changelog's (a stream and a merger starting at once),
a replicated table (a merger and a rebuild, say) and the dead letters (the stream's batch and the merges
beside it). Writers racing to an empty directory
all succeed, and what they wrote is there once."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable
from typing import Any

import pytest

from cdc_delta.changelog.table import changelog_path, ensure_tables, schemas_path, tables_path
from cdc_delta.config import parse_config
from cdc_delta.decode.decoded import DECODED
from cdc_delta.delta.dead_letters import dead_letter_rows, write_dead_letters
from cdc_delta.delta.tables import MANIFEST_PROPERTY, create_table
from tests.streams import CONFIG

pytestmark = pytest.mark.spark

WRITERS = 3


def at_once(spark: Any, action: Callable[[int], None]) -> None:
    """``action(i)`` for each writer i, in threads released together; each error raised here."""
    barrier = threading.Barrier(WRITERS)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            action(i)
        except BaseException as exc:  # noqa: BLE001 (raised below, in the test's thread)
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, [str(e).splitlines()[:2] for e in errors]


@pytest.mark.parametrize("attempt", range(3))  # a race: each attempt in a lake of its own
def test_the_changelog_tables_created_at_once_are_created_once(spark: Any, tmp_path: Any, attempt: int) -> None:
    config = parse_config({**CONFIG, "storage": {"root": str(tmp_path)}})
    at_once(spark, lambda _: ensure_tables(spark, config))
    for path in (changelog_path(config), schemas_path(config), tables_path(config)):
        history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
        assert [row["operation"] for row in history] == ["CREATE TABLE"], path


@pytest.mark.parametrize("attempt", range(3))
def test_a_replicated_table_created_at_once_is_created_once_with_its_properties(
    spark: Any, tmp_path: Any, attempt: int
) -> None:
    path = str(tmp_path / "orders")
    ids: list[str] = []
    at_once(spark, lambda _: ids.append(create_table(spark, path, (("id", "bigint"), ("note", "string")), True)))
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    assert [row["operation"] for row in history] == ["CREATE TABLE"]
    assert len(set(ids)) == 1
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert detail is not None and detail["properties"].get(MANIFEST_PROPERTY) == "true"
    assert spark.read.format("delta").load(path).columns[:2] == ["id", "note"]


def test_dead_letters_appended_at_once_to_no_table_are_all_kept_once(spark: Any, tmp_path: Any) -> None:
    path = str(tmp_path / "_cdc_dead_letters")
    at = dt.datetime(2026, 11, 29, tzinfo=dt.timezone.utc)

    def append(i: int) -> None:
        records = spark.createDataFrame(
            [("srv.db.t", 0, i, None, b"k", b"not json", "db.t", f"writer {i}")],
            "topic string, partition int, offset long, timestamp timestamp, key binary, value binary, "
            "`table` string, reason string",
        ).selectExpr("*", "named_struct('table', `table`, 'reason', reason) AS " + DECODED)
        rows = dead_letter_rows(records, "app", i, at, records["reason"])
        write_dead_letters(rows, path, f"writer-{i}", 7)
        write_dead_letters(rows, path, f"writer-{i}", 7)  # a batch written again appends nothing

    at_once(spark, append)
    kept = spark.read.format("delta").load(path).select("offset", "reason").collect()
    assert sorted((r["offset"], r["reason"]) for r in kept) == [(i, f"writer {i}") for i in range(WRITERS)]
