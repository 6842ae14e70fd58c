"""Every Delta table the stream writes opens in delta-rs (``deltalake``, the reader behind Polars and
DuckDB's Python paths) with the rows Spark reads: the real connector's wide table (every MySQL type, a
column added with a default, TRUNCATE, the key widened INT -> BIGINT) merged batch by batch, a table
with timestamps at 0001-01-01 and 9999-12-31, and the dead-letter table."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import tempfile
from typing import Any

import pytest

from cdc_delta.config import parse_config
from cdc_delta.demo.batches import kafka_frame
from cdc_delta.demo.generator import ORDER_COLUMNS, SourceTable, envelope
from cdc_delta.rows.target import table_state
from tests.batches import merging_processor
from tests.decode.test_avro import captured
from tests.delta_rows import spark_and_delta_rs_rows

pytestmark = pytest.mark.spark

ORDERS = SourceTable("shop", "orders", ORDER_COLUMNS)


def edge_times() -> list[tuple[str, int, int, bytes | None, bytes | None]]:
    out = []
    for key, when in ((1, dt.datetime(1, 1, 1)), (2, dt.datetime(9999, 12, 31, 23, 59, 59, 999999))):
        row = {
            "id": key,
            "customer": "c",
            "amount": "1.00",
            "status": "new",
            "order_date": when.date(),
            "updated_at": when,
        }
        value = json.dumps(envelope(ORDERS, "c", None, row, pos=4 + key, ts_ms=1_700_000_000_000)).encode()
        out.append(("dbserver1.shop.orders", 0, key, None, value))
    return out


def test_every_table_the_stream_writes_opens_in_delta_rs_with_sparks_rows(spark: Any) -> None:
    from deltalake import DeltaTable

    root = tempfile.mkdtemp(prefix="cdc-delta-rs-")
    try:
        config = parse_config(
            {
                "app_id": "delta-rs",
                "storage": {"root": root},
                "merge": {"max_delay_seconds": 0},
                "tables": [
                    {"name": "e2e.wide", "topics": ["cap.e2e.wide"], "key": ["id"]},
                    {"name": "shop.orders", "topics": ["dbserver1.shop.orders"], "key": ["id"]},
                ],
            }
        )
        processor = merging_processor(spark, config)
        wide = [r for r in captured() if r[0] == "cap.e2e.wide"]
        batches = [wide[i : i + 6] for i in range(0, len(wide), 6)]
        batches[0] = batches[0] + edge_times() + [("cap.e2e.wide", 1, 0, None, b"{not json")]
        for batch_id, batch in enumerate(batches):
            processor.process(kafka_frame(spark, batch), batch_id)
        wide_path = config.storage.table_path(config.table("e2e.wide"))
        assert dict(table_state(spark, wide_path).business)["id"] == "bigint"  # widened by the stream
        assert table_state(spark, wide_path).defaults, "the column defaults survived the rewrite"
        paths = [wide_path, config.storage.table_path(config.table("shop.orders")), config.storage.dead_letters]
        for path in paths:
            protocol = DeltaTable(path).protocol()
            assert not protocol.reader_features and protocol.min_reader_version == 1, (path, protocol)
            by_spark, by_delta_rs = spark_and_delta_rs_rows(spark, path)
            assert by_delta_rs == by_spark and by_spark, path
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_type_widening_with_delta_s_feature_is_the_opt_in_that_delta_rs_cannot_read(spark: Any) -> None:
    from deltalake import DeltaTable

    from cdc_delta.demo.generator import Column

    root = tempfile.mkdtemp(prefix="cdc-widen-")
    try:
        config = parse_config(
            {
                "app_id": "widen",
                "storage": {"root": root},
                "merge": {"max_delay_seconds": 0},
                "type_widening": "delta_feature",
                "tables": [{"name": "shop.orders", "topics": ["dbserver1.shop.orders"], "key": ["id"]}],
            }
        )
        processor = merging_processor(spark, config)
        for batch_id, id_type in enumerate(("int32", "int64")):
            table = SourceTable("shop", "orders", (Column("id", id_type), Column("customer", "string")))
            value = envelope(table, "c", None, {"id": batch_id, "customer": "c"}, pos=10 + batch_id)
            processor.process(
                kafka_frame(spark, [("dbserver1.shop.orders", 0, batch_id, None, json.dumps(value).encode())]), batch_id
            )
        path = config.storage.table_path(config.table("shop.orders"))
        assert dict(table_state(spark, path).business)["id"] == "bigint"
        assert spark.read.format("delta").load(path).count() == 2
        assert "typeWidening" in (DeltaTable(path).protocol().reader_features or [])
    finally:
        shutil.rmtree(root, ignore_errors=True)
