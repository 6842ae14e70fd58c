"""104 tables in one stream, most of them merged rarely (issue 26's "100+ tables in one stream with some
tables merged rarely"). Four busy tables pass ``merge.min_events`` in every batch and are merged after
each; the 100 quiet ones take a few changes a batch, stay below it and are never due (``max_delay_seconds``
an hour). The generators are the reference: after each of two batches and rounds, each busy table equals its
source, nothing of a quiet table is merged, and its pending count is the changes it was sent; every
busy table's live rows (the merged table overridden by the changelog) and those of five quiet ones equal the
source. Then ten quiet tables are merged: they equal the source, and the other ninety are still
pending and still read fresh."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cdc_delta import columns as C
from cdc_delta.config import AppConfig, parse_config
from cdc_delta.demo.batches import kafka_frame
from cdc_delta.demo.generator import ORDER_COLUMNS, ChangeGenerator, SourceTable, topic_of
from cdc_delta.merger.run import Merger
from cdc_delta.rows.as_of import live_rows
from cdc_delta.stream.batch import BatchProcessor

pytestmark = pytest.mark.spark

BUSY = tuple(SourceTable("busy", f"t{i}", ORDER_COLUMNS) for i in range(4))
QUIET = tuple(SourceTable(f"quiet{i % 4}", f"t{i:03d}", ORDER_COLUMNS) for i in range(100))
MIN_EVENTS = 40
BUSY_PER_BATCH = 240  # about 60 a table, each past MIN_EVENTS
QUIET_PER_BATCH = 150  # one or two a table, a handful at most
SAMPLED = QUIET[5::20]
"""The quiet tables whose live rows are read after each round (five: a query each)."""


def name(table: SourceTable) -> str:
    return f"{table.db}.{table.table}"


def described(rows: list[dict[str, Any]]) -> dict[int, tuple[Any, ...]]:
    """Key -> (deleted, customer, amount, status): what is compared with the source."""
    return {r["id"]: (r[C.DELETED], r["customer"], r["amount"], r["status"]) for r in rows}


def expected(generator: ChangeGenerator, table: SourceTable) -> dict[int, tuple[Any, ...]]:
    """The source's rows as the lake must hold them: live rows with their values, every deleted key a
    soft-deleted row (its values are not compared)."""
    source = (table.db, table.table)
    out: dict[int, tuple[Any, ...]] = {k: (True, None, None, None) for k in generator.deleted[source]}
    out.update({k: (False, v["customer"], v["amount"], v["status"]) for k, v in generator.rows[source].items()})
    return out


def comparable(rows: dict[int, tuple[Any, ...]]) -> dict[int, tuple[Any, ...]]:
    """Soft-deleted rows compared by key only."""
    return {k: (True, None, None, None) if v[0] else v for k, v in rows.items()}


def delta_rows(spark: Any, config: AppConfig, table: SourceTable) -> dict[int, tuple[Any, ...]]:
    path = config.storage.table_path(config.table(name(table)))
    return comparable(described([r.asDict() for r in spark.read.format("delta").load(path).collect()]))


def live_rows_of(
    spark: Any, config: AppConfig, tables: tuple[SourceTable, ...]
) -> dict[str, dict[int, tuple[Any, ...]]]:
    """The live rows of ``tables`` (soft-deleted ones included), a query each: one query over a hundred
    tables' live rows plans a hundred unions of the changelog's reading, past a test's heap."""
    frames = live_rows(spark, config, [config.table(name(t)) for t in tables])
    columns = ["id", C.DELETED, "customer", "amount", "status"]
    return {t: comparable(described([r.asDict() for r in df.select(*columns).collect()])) for t, df in frames.items()}


def test_a_hundred_quiet_tables_stay_pending_and_fresh_while_busy_ones_merge(spark: Any, tmp_path: Path) -> None:
    tables = [{"name": name(t), "topics": [topic_of(t)], "key": ["id"]} for t in BUSY + QUIET]
    config = parse_config(
        {
            "app_id": "rare",
            "storage": {"root": str(tmp_path / "lake")},
            "merge": {"min_events": MIN_EVENTS, "max_delay_seconds": 3600},
            "tables": tables,
        }
    )
    merger = Merger(spark, config)
    merger.start()  # before the first landing, as the stream's merger thread does
    processor = BatchProcessor(config, listener=merger)
    busy, quiet = ChangeGenerator(BUSY, seed=11), ChangeGenerator(QUIET, seed=12)
    offsets: Counter[str] = Counter()
    sent: Counter[str] = Counter()  # per quiet table, its changes so far
    try:
        for batch_id in range(2):
            records = []
            for change in itertools.chain(busy.changes(BUSY_PER_BATCH), quiet.changes(QUIET_PER_BATCH)):
                records.append((change.topic, 0, offsets[change.topic], change.key, change.value))
                offsets[change.topic] += 1
                sent[change.topic] += 1
            landed = processor.process(kafka_frame(spark, records), batch_id)
            assert landed.rows_in == len(records) and landed.dead_lettered == 0, landed.summary()

            merged = merger.round()
            assert merged is not None and not any(t.error for t in merged.tables), merged.summary()
            assert {t.table for t in merged.tables} == {name(t) for t in BUSY}, merged.summary()
            for table in BUSY:
                assert delta_rows(spark, config, table) == expected(busy, table), name(table)
            assert {n: p.events for n, p in merged.pending.items()} == {
                name(t): sent[topic_of(t)] for t in QUIET if sent[topic_of(t)]
            }
            for table in QUIET:
                path = Path(config.storage.table_path(config.table(name(table))))
                assert not (path / "_delta_log").exists(), f"{name(table)} was merged"

            live = live_rows_of(spark, config, BUSY + SAMPLED)
            for table, generator in [(t, busy) for t in BUSY] + [(t, quiet) for t in SAMPLED]:
                assert live.get(name(table), {}) == expected(generator, table), name(table)

        rare = QUIET[:10]
        result = merger.merge_tables([name(t) for t in rare])
        assert result is not None and not any(t.error for t in result.tables), result

        for table in rare:
            assert delta_rows(spark, config, table) == expected(quiet, table), name(table)
        assert set(result.pending) == {name(t) for t in QUIET[10:] if sent[topic_of(t)]}
        live = live_rows_of(spark, config, SAMPLED + rare)
        for table in SAMPLED + rare:
            assert live.get(name(table), {}) == expected(quiet, table), name(table)
    finally:
        merger.close()
