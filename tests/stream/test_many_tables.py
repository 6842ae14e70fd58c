"""Property test: 12 tables in one stream, cut into random batches, merged concurrently (four tables at
a time, each in a session of its own), with a replayed batch and late duplicates: every table equals
the source, no table commits a batch twice, and a table's first merge (which made it) is insert-only."""

from __future__ import annotations

import shutil
import tempfile
import zlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc_delta.config import parse_config
from cdc_delta.demo.batches import kafka_frame
from cdc_delta.demo.generator import ORDER_COLUMNS, ChangeGenerator, SourceTable, topic_of
from tests.batches import merging_processor
from tests.delta_rows import landings_per_commit, merges_matching

pytestmark = pytest.mark.spark

TABLES = tuple(SourceTable(f"db{i % 3}", f"t{i:02d}", ORDER_COLUMNS) for i in range(12))


@st.composite
def deliveries(draw: st.DrawFn) -> tuple[ChangeGenerator, list[list[tuple[Any, ...]]]]:
    """Changes over the tables (the generator holds the source's state after them), and their Kafka
    records cut into 2-5 batches, some records of the first batch delivered again in the last."""
    generator = ChangeGenerator(TABLES, seed=draw(st.integers(0, 10_000)), tombstones=True)
    offsets: dict[str, int] = {}
    records = []
    for change in generator.changes(draw(st.integers(150, 350))):
        offset = offsets.get(change.topic, 0)
        offsets[change.topic] = offset + 1
        records.append((change.topic, zlib.crc32(change.key) % 2, offset, change.key, change.value))
    cuts = sorted(draw(st.sets(st.integers(1, len(records) - 1), min_size=1, max_size=4)))
    batches = [records[a:b] for a, b in zip([0, *cuts], [*cuts, len(records)], strict=True)]
    late = draw(st.lists(st.sampled_from(batches[0]), max_size=20))
    batches[-1] = batches[-1] + late
    return generator, batches


@settings(
    max_examples=2,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(delivered=deliveries())
def test_many_tables_merged_concurrently_equal_the_source(spark: Any, delivered: tuple[Any, list[Any]]) -> None:
    source, batches = delivered
    root = tempfile.mkdtemp(prefix="cdc-many-")
    try:
        tables = [{"name": f"{t.db}.{t.table}", "topics": [topic_of(t)], "key": ["id"]} for t in TABLES]
        merge = {"concurrency": 4, "max_delay_seconds": 0}
        config = parse_config({"app_id": "many", "storage": {"root": root}, "merge": merge, "tables": tables})
        processor = merging_processor(spark, config)
        for batch_id, batch in enumerate(batches):
            result = processor.process(kafka_frame(spark, batch), batch_id)
            assert result.dead_lettered == 0 and result.rows_in == len(batch), result.summary()
        replay = processor.process(kafka_frame(spark, batches[-1]), len(batches) - 1)  # after a crash
        assert replay.land_seq is None and replay.merge is None, replay.summary()  # landed once, merged once

        for table in TABLES:
            path = config.storage.table_path(config.table(f"{table.db}.{table.table}"))
            rows = {r["id"]: r for r in spark.read.format("delta").load(path).collect()}
            live = {k for k, r in rows.items() if not r["_cdc_deleted"]}
            assert live == set(source.rows[(table.db, table.table)]), table.table
            assert {k for k, r in rows.items() if r["_cdc_deleted"]} == source.deleted[(table.db, table.table)]
            for key, expected in source.rows[(table.db, table.table)].items():
                assert (rows[key]["amount"], rows[key]["status"]) == (expected["amount"], expected["status"])
            ids = landings_per_commit(spark, path)
            assert ids == sorted(set(ids)), f"a batch was merged twice into {table.table}: {ids}"
            # The first merge made the table, so it inserted (no scan for matches); every later one matched.
            assert merges_matching(spark, path) == [False] + [True] * (len(ids) - 1), table.table
    finally:
        shutil.rmtree(root, ignore_errors=True)
