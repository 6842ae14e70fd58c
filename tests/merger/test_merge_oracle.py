"""Property test: for any messy stream cut into any batches, landed and merged in any interleaving (each
table merged after any batch, or later), every Delta table equals the oracle, and so do the live rows
(merged rows overridden by the pending changes) before the last merges, and each table's history (its
versions, SCD type 2; the current ones are the table's live rows); the same generated
histories as JSON and as Avro (Confluent wire format, through the stand-in registry)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc_delta.config import AppConfig, TableConfig, parse_config
from cdc_delta.demo.avro_encoding import AvroEncoder
from cdc_delta.demo.batches import kafka_frame
from cdc_delta.history.append import history_path
from cdc_delta.history.versions import read_versions
from cdc_delta.merger.rebuild import rebuild_table
from cdc_delta.merger.run import Merger
from cdc_delta.rows.as_of import live_rows
from cdc_delta.stream.batch import BatchProcessor
from tests.batches import merging_processor
from tests.delta_rows import COMPARED_METADATA, canonical_rows, landings_per_commit, read_canonical
from tests.oracle import Delivery, Oracle
from tests.registry import StandInRegistry
from tests.streams import ARCHIVAL, CONFIG, KEYS, SHARD_KEYED, delivered_batches

pytestmark = pytest.mark.spark


def records(batch: list[Delivery], encode: Callable[[str, bytes | None], bytes | None] | None = None) -> list[tuple]:
    if encode is None:
        return [(d.topic, d.partition, d.offset, d.key, d.value) for d in batch]
    return [(d.topic, d.partition, d.offset, d.key, avro_value(encode, d)) for d in batch]


def avro_value(encode: Callable[[str, bytes | None], bytes | None], d: Delivery) -> bytes | None:
    """A change event in Avro; a bad record (expected dead) stays as it is: not Avro either."""
    return d.value if d.expect == "dead" else encode(d.topic, d.value)


SETTINGS = settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)


@SETTINGS
@given(batches=delivered_batches(), timing=st.data())
def test_delta_tables_equal_the_oracle(spark, batches: list[list[Delivery]], timing: st.DataObject) -> None:
    assert_equal_the_oracle(spark, batches, timing=timing)


@settings(SETTINGS, max_examples=4)
@given(batches=delivered_batches())
def test_avro_delta_tables_equal_the_oracle(
    spark, schema_registry: StandInRegistry, batches: list[list[Delivery]]
) -> None:
    encode = AvroEncoder(schema_registry.register).encode
    avro = {"kafka": {"value_format": "avro"}, "schema_registry": {"url": schema_registry.url}}
    assert_equal_the_oracle(spark, batches, encode, avro)


@settings(SETTINGS, max_examples=2)
@given(batches=delivered_batches())
def test_tables_rebuilt_from_the_changelog_equal_the_oracle(spark, batches: list[list[Delivery]]) -> None:
    assert_equal_the_oracle(spark, batches, rebuild=True)


def assert_live_rows_equal_the_oracle(spark, config: AppConfig, oracle: Oracle) -> None:
    """The live rows of every table (merged rows overridden by the changes still pending) are the oracle's,
    whichever tables were merged when."""
    live = live_rows(spark, config, config.tables)
    for table in config.tables:
        if table.name not in live:
            assert not any(oracle.tables[table.name].values()), f"{table.name}: no live rows"
            continue
        columns, actual = canonical_rows(live[table.name])
        expected = oracle.rows(table.name, [*columns, *COMPARED_METADATA])
        differ = [(a, e) for a, e in zip(actual, expected, strict=False) if a != e][:3]
        assert actual == expected, (
            f"live {table.name}: {len(actual)} rows vs {len(expected)}; first differences {differ}"
        )


VERSION_METADATA = (
    "_cdc_valid_from_seq",
    "_cdc_valid_to_seq",
    "_cdc_closed_by",
    "_cdc_op",
    "_cdc_seq",
    "_cdc_source_db",
    "_cdc_source_table",
)


def assert_history_equals_the_oracle(
    spark, config: AppConfig, table: TableConfig, oracle: Oracle, rows: list[dict[str, Any]]
) -> None:
    """The table's versions (:mod:`cdc_delta.history.versions`) are the oracle's, and its current versions
    are the table's live rows (``rows``: the table as :func:`read_canonical` reads it)."""
    path = history_path(config, table.name)
    assert table.history is not None
    found = read_versions(spark, path, table.row_key, table.history)
    columns, actual = canonical_rows(found, VERSION_METADATA)
    expected = oracle.versions(table.name, columns)
    differ = [(a, e) for a, e in zip(actual, expected, strict=False) if a != e][:3]
    assert actual == expected, f"history of {table.name}: {len(actual)} versions vs {len(expected)}; first {differ}"
    compared = [*columns, "_cdc_op", "_cdc_seq", "_cdc_source_db", "_cdc_source_table"]
    current = sorted(({c: v[c] for c in compared} for v in actual if v["_cdc_valid_to_seq"] is None), key=repr)
    live = sorted(
        ({c: r[c] for c in compared} for r in rows if not r["_cdc_deleted"]),
        key=repr,
    )
    assert current == live, f"history of {table.name}: its current versions are not the table's live rows"


def assert_equal_the_oracle(
    spark,
    batches: list[list[Delivery]],
    encode: Callable[[str, bytes | None], bytes | None] | None = None,
    overrides: dict[str, Any] | None = None,
    timing: st.DataObject | None = None,
    rebuild: bool = False,
) -> None:
    """``timing``: draws which tables are merged after each batch (the rest wait); without it, every
    table is merged after every batch (``max_delay_seconds: 0``). ``rebuild``: then every table is
    rebuilt from the changelog (``cdc-delta rebuild``) and compared again."""
    root = tempfile.mkdtemp(prefix="cdc-prop-")
    try:
        merge = {"max_delay_seconds": 0 if timing is None else 3600}
        config = parse_config({**CONFIG, **(overrides or {}), "storage": {"root": root}, "merge": merge})
        merger = Merger(spark, config) if timing is not None else None
        processor = BatchProcessor(config, listener=merger) if merger is not None else merging_processor(spark, config)
        names = sorted(t.name for t in config.tables)
        # Drawn before anything runs, so that a failure part-way does not change what is drawn.
        merged_after = [sorted(timing.draw(st.sets(st.sampled_from(names)))) for _ in batches] if timing else []
        oracle = Oracle(KEYS, SHARD_KEYED, ARCHIVAL)
        dead_total = 0
        for batch_id, batch in enumerate(batches):
            result = processor.process(kafka_frame(spark, records(batch, encode)), batch_id)
            if merger is not None:
                merger.merge_tables(merged_after[batch_id])
            oracle.apply_batch(batch)
            expected = {s: sum(d.expect == s for d in batch) for s in ("ok", "dead", "skip")}
            assert (result.rows_in, result.landed, result.dead_lettered, result.skipped) == (
                len(batch),
                expected["ok"],
                expected["dead"],
                expected["skip"],
            ), result.summary()
            dead_total += expected["dead"]
        if merger is not None:
            assert_live_rows_equal_the_oracle(spark, config, oracle)
            merger.merge_all()
        for table in config.tables:
            path = config.storage.table_path(table)
            if not any(oracle.tables[table.name].values()) and not os.path.exists(path):
                continue
            if rebuild:
                rebuilt = rebuild_table(spark, config, table.name)
                assert rebuilt.replaced is not None and os.path.exists(rebuilt.replaced)
            columns, actual = read_canonical(spark, path)
            expected = oracle.rows(table.name, [*columns, *COMPARED_METADATA])
            differ = [(a, e) for a, e in zip(actual, expected, strict=False) if a != e][:3]
            assert actual == expected, (
                f"{table.name}: {len(actual)} rows vs {len(expected)}; first differences {differ}"
            )
            if not rebuild:  # a rebuild replaces the table, not its history
                assert_history_equals_the_oracle(spark, config, table, oracle, actual)
            ids = landings_per_commit(spark, path)
            assert ids == sorted(set(ids)), f"a batch was merged twice into {table.name}: {ids}"
        if dead_total:
            dead = spark.read.format("delta").load(config.storage.dead_letters)
            assert dead.count() == dead_total
            assert dead.where("reason IS NULL OR value IS NULL").count() == 0
    finally:
        shutil.rmtree(root, ignore_errors=True)
