"""The two forms of a changelog row: images landed as Debezium wrote them (made canonical where merged)
and canonical JSON (the reference decoder's, and every row of a changelog written before the first form
existed); and the changes the merge cannot make canonical, which become dead letters there, once."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from pyspark.sql import functions as F

from cdc_delta.changelog.pending import changes
from cdc_delta.changelog.table import changelog_path, schema_id, schemas_path
from cdc_delta.config import parse_config
from cdc_delta.decode.plan import decode_plan
from cdc_delta.demo.batches import kafka_frame
from cdc_delta.demo.generator import Column, SourceTable, envelope
from cdc_delta.events.envelope import decode_record
from cdc_delta.merger.rebuild import rebuild_table
from cdc_delta.merger.resume import resume_table
from cdc_delta.merger.run import Merger
from cdc_delta.stream.batch import BatchProcessor
from tests.delta_rows import read_canonical

pytestmark = pytest.mark.spark

ITEMS = SourceTable("inventory", "items", (Column("id", "int64"), Column("qty", "int32")))
TOPIC = "srv.inventory.items"
OLD_CHANGELOG_DDL = (
    "land_seq bigint, batch_id bigint, epoch string, landed_at timestamp, `table` string, op string, "
    "seq struct<phase:int,gtid:bigint,file:bigint,pos:bigint,row:int,ts_ms:bigint,partition:int,offset:bigint>, "
    "source_ts_ms bigint, source_db string, source_table string, topic string, `partition` int, `offset` bigint, "
    "row_json string, schema_id string"
)
"""The changelog's columns before ``payload`` and ``key``."""


def value(offset: int, row: dict[str, Any]) -> bytes:
    message = envelope(ITEMS, "u", None, row, pos=1000 + offset, server="srv")
    return json.dumps(message, separators=(",", ":")).encode()  # as the JsonConverter writes


def config_for(root: Path) -> Any:
    return parse_config(
        {
            "app_id": "forms",
            "storage": {"root": str(root)},
            "tables": [{"name": "inventory.items", "topics": [TOPIC], "key": ["id"]}],
            "merge": {"max_delay_seconds": 3600},  # merged only when the test says
        }
    )


def test_a_changelog_from_before_gains_the_columns_and_both_forms_merge(spark: Any, tmp_path: Path) -> None:
    config = config_for(tmp_path)
    # A changelog written before: one canonical row, its descriptor stored.
    old = decode_record(TOPIC, 0, 0, value(0, {"id": 1, "qty": 10}), decode_plan(config))
    assert old.row_json is not None and old.schema_json is not None
    old_columns = spark.createDataFrame([], OLD_CHANGELOG_DDL).schema
    DeltaTable.create(spark).location(changelog_path(config)).addColumns(old_columns).execute()
    spark.createDataFrame(
        [(schema_id(old.schema_json), old.schema_json)], "schema_id string, schema_json string"
    ).write.format("delta").mode("append").save(schemas_path(config))
    row = (
        0,
        0,
        None,
        dt.datetime(2026, 1, 1),
        "inventory.items",
        "u",
        tuple(old.seq),
        old.source_ts_ms,
        "inventory",
        "items",
        TOPIC,
        0,
        0,
        old.row_json,
        schema_id(old.schema_json),
    )
    spark.createDataFrame([row], OLD_CHANGELOG_DDL).write.format("delta").mode("append").save(changelog_path(config))

    # A reader (a live view, a rebuild) reads it as it is: it does not alter the changelog.
    pending = changes(spark, config, {"inventory.items": (-1, 10)})
    read = pending.frame.select("_decoded.row_json").collect()
    pending.release()
    assert [r["row_json"] for r in read] == [old.row_json]
    assert "payload" not in spark.read.format("delta").load(changelog_path(config)).columns

    merger = Merger(spark, config)
    processor = BatchProcessor(config, listener=merger)
    processor.process(kafka_frame(spark, [(TOPIC, 0, 1, b"k2", value(1, {"id": 2, "qty": 20}))]), 1)
    landed = spark.read.format("delta").load(changelog_path(config))
    assert {"payload", "key", "kafka_timestamp"} <= set(landed.columns)
    forms = {r["offset"]: (r["row_json"] is None, r["payload"] is not None, r["key"]) for r in landed.collect()}
    assert forms == {0: (False, False, None), 1: (True, True, bytearray(b"k2"))}

    merger.merge_tables(["inventory.items"])
    _, rows = read_canonical(spark, config.table_path("inventory.items"))
    assert sorted((r["id"], r["qty"]) for r in rows) == [(1, 10), (2, 20)]


def test_a_change_the_merge_cannot_read_is_a_dead_letter_once_with_its_record(spark: Any, tmp_path: Path) -> None:
    config = config_for(tmp_path)
    good = value(0, {"id": 1, "qty": 10})
    bad = value(1, {"id": 2, "qty": 10}).replace(b'"qty":10}', b'"qty":"ten"}')  # a string where the schema says int32
    merger = Merger(spark, config)
    processor = BatchProcessor(config, listener=merger)
    result = processor.process(kafka_frame(spark, [(TOPIC, 0, 0, b"k1", good), (TOPIC, 0, 1, b"k2", bad)]), 0)
    assert (result.landed, result.dead_lettered) == (2, 0)  # both land: the image is read where merged

    first = merger.merge_tables(["inventory.items"])
    assert first is not None and first.dead == 1
    reference = decode_record(TOPIC, 0, 1, bad, decode_plan(config))
    letters = spark.read.format("delta").load(config.storage.dead_letters)
    found = [(bytes(r["value"]), bytes(r["key"]), r["reason"], r["table"], r["batch_id"]) for r in letters.collect()]
    assert found == [(bad, b"k2", reference.reason, "inventory.items", 0)]
    assert letters.where(F.col("kafka_timestamp").isNull()).count() == 0  # landed with its record
    _, rows = read_canonical(spark, config.table_path("inventory.items"))
    assert [(r["id"], r["qty"]) for r in rows] == [(1, 10)]

    # Another landing merged, then the table rebuilt from every change in the changelog (the refused
    # one read again): the dead letter is not written twice.
    processor.process(kafka_frame(spark, [(TOPIC, 0, 2, b"k1", value(2, {"id": 1, "qty": 11}))]), 1)
    merger.merge_tables(["inventory.items"])
    rebuild_table(spark, config, "inventory.items")
    assert spark.read.format("delta").load(config.storage.dead_letters).where(F.col("offset") == 1).count() == 1
    _, rows = read_canonical(spark, config.table_path("inventory.items"))
    assert [(r["id"], r["qty"]) for r in rows] == [(1, 11)]


ORDERS = SourceTable("inventory", "orders", (Column("id", "int64"), Column("note", "string")))
ORDERS_TOPIC = "srv.inventory.orders"


def test_a_table_whose_schema_is_missing_stops_alone_and_merges_once_it_is_restored(spark: Any, tmp_path: Path) -> None:
    config = parse_config(
        {
            "app_id": "forms",
            "storage": {"root": str(tmp_path)},
            "tables": [
                {"name": "inventory.items", "topics": [TOPIC], "key": ["id"]},
                {"name": "inventory.orders", "topics": [ORDERS_TOPIC], "key": ["id"]},
            ],
            "merge": {"max_delay_seconds": 3600},  # merged only when the test says
        }
    )
    order = envelope(ORDERS, "c", None, {"id": 7, "note": "n7"}, pos=900, server="srv")
    records = [
        (TOPIC, 0, 0, b"k1", value(0, {"id": 1, "qty": 10})),
        (ORDERS_TOPIC, 0, 0, b"k7", json.dumps(order, separators=(",", ":")).encode()),
    ]
    merger = Merger(spark, config)
    assert BatchProcessor(config, listener=merger).process(kafka_frame(spark, records), 0).landed == 2
    # The schema of the items' changes is lost from the schemas table (a bad restore, a hand-made DELETE).
    landed = spark.read.format("delta").load(changelog_path(config))
    [ref] = [r[0] for r in landed.where(F.col("table") == "inventory.items").select("schema_id").distinct().collect()]
    schemas = DeltaTable.forPath(spark, schemas_path(config))
    kept = schemas.toDF().where(F.col("schema_id") == ref).collect()
    assert len(kept) == 1
    schemas.delete(F.col("schema_id") == ref)

    result = merger.merge_tables(["inventory.items", "inventory.orders"])
    assert result is not None
    outcome = {t.table: t.error for t in result.tables}
    assert outcome["inventory.orders"] is None  # the other table is merged
    assert outcome["inventory.items"] == (
        f"table inventory.items: the Connect schema(s) {ref} of its landed changes are not in the changelog's "
        "schemas table, so their images cannot be read. The table is stopped and its changes stay pending in "
        "the changelog; restore the schemas table (<changelog>_schemas) from a backup, then `cdc-delta "
        "resume-table --table inventory.items` and restart the stream: it merges them"
    )
    assert "inventory.items: stopped, 1 changes left pending" in result.summary()
    _, orders = read_canonical(spark, config.table_path("inventory.orders"))
    assert [(r["id"], r["note"]) for r in orders] == [(7, "n7")]
    assert merger.merge_tables(["inventory.items"]) is None  # stopped: not merged again in this process
    merger.close()

    # Restored as the message says: the schema back, the table resumed, a new process merges its change.
    spark.createDataFrame(kept, schemas.toDF().schema).write.format("delta").mode("append").save(schemas_path(config))
    assert resume_table(spark, config, "inventory.items")
    again = Merger(spark, config)
    done = again.merge_tables(["inventory.items"])
    assert done is not None and [t.error for t in done.tables] == [None]
    _, items = read_canonical(spark, config.table_path("inventory.items"))
    assert [(r["id"], r["qty"]) for r in items] == [(1, 10)]
    again.close()
