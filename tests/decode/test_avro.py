"""The Avro decoder in Spark (fastavro over Arrow batches) against the stand-in registry over HTTP: the
same decoded records as the JSON decoder on the real connector's records, faults dead-lettered with the
counts reconciling, schemas read once per id, and a registry that is down failing the batch."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from cdc_delta.config import SchemaRegistryConfig, parse_config
from cdc_delta.decode.batch import AvroDecoder, decode_batch
from cdc_delta.decode.decoded import DECODED
from cdc_delta.decode.schema_registry import AvroSchemas
from cdc_delta.demo.avro_encoding import AvroEncoder
from cdc_delta.demo.batches import kafka_frame
from cdc_delta.events.envelope import OK
from cdc_delta.exceptions import SchemaRegistryError
from tests.batches import merging_processor
from tests.events.test_captured_debezium import PLAN, RECORDS
from tests.registry import StandInRegistry

pytestmark = pytest.mark.spark

Record = tuple[str, int, int, bytes | None, bytes | None]


def captured() -> list[Record]:
    out = []
    for r in RECORDS:
        value = None if r["value"] is None else r["value"].encode()
        if value is None or json.loads(value).get("schema") is not None:
            out.append((r["topic"], 0, r["offset"], (r["key"] or "").encode() or None, value))
    return out


def as_avro(registry: StandInRegistry, records: list[Record]) -> list[Record]:
    encoder = AvroEncoder(registry.register)
    return [(t, p, o, k, encoder.encode(t, v)) for t, p, o, k, v in records]


def by_offset(frame: Any) -> dict[tuple[str, int], Any]:
    return {(r["topic"], r["offset"]): r[DECODED].asDict(recursive=True) for r in frame.collect()}


@pytest.fixture
def registry() -> Iterator[StandInRegistry]:
    server = StandInRegistry()
    try:
        yield server
    finally:
        server.close()


def test_avro_batches_decode_as_their_json_twins(spark: Any, registry: StandInRegistry) -> None:
    records = captured()
    json_batch = decode_batch(kafka_frame(spark, records), PLAN)
    decoder = AvroDecoder(PLAN, AvroSchemas(SchemaRegistryConfig(url=registry.url)))
    avro_batch = decoder(kafka_frame(spark, as_avro(registry, records)))
    try:
        expected, actual = by_offset(json_batch.frame), by_offset(avro_batch.frame)
        assert actual == expected
        assert sum(d["status"] == OK for d in actual.values()) >= 15
    finally:
        json_batch.release()
        avro_batch.release()


def test_schemas_are_read_once_per_id_across_batches(spark: Any, registry: StandInRegistry) -> None:
    records = as_avro(registry, captured())
    decoder = AvroDecoder(PLAN, AvroSchemas(SchemaRegistryConfig(url=registry.url)))
    for part in (records[: len(records) // 2], records[len(records) // 2 :], records):
        decoder(kafka_frame(spark, part)).release()
    assert sorted(registry.asked) == sorted(registry.schemas)


CONFIG = {
    "app_id": "avro",
    "kafka": {"value_format": "avro"},
    "tables": [{"name": "e2e.wide", "topics": ["cap.e2e.wide"], "key": ["id"]}],
    "merge": {"max_delay_seconds": 0},
}


def test_bad_records_are_dead_letters_and_the_counts_reconcile(spark: Any, registry: StandInRegistry) -> None:
    wide = [r for r in captured() if r[0] == "cap.e2e.wide"]
    records = as_avro(registry, wide)
    good = next(r for r in records if r[4] is not None)
    last = max(r[2] for r in records)
    bad = [
        ("cap.e2e.wide", 1, 0, None, b'{"op": "c"}'),  # JSON where Avro was expected
        ("cap.e2e.wide", 1, 1, None, b"\x00\x00\x00\x27\x0f" + good[4][5:]),  # schema id 9999: unknown
        ("cap.e2e.wide", 1, 2, None, good[4][:20]),  # cut short
    ]
    root = tempfile.mkdtemp(prefix="cdc-avro-")
    try:
        config = parse_config({**CONFIG, "storage": {"root": root}, "schema_registry": {"url": registry.url}})
        result = merging_processor(spark, config).process(kafka_frame(spark, records + bad), 0)
        assert result.rows_in == len(records) + 3 and last > 0
        assert result.rows_in == result.landed + result.dead_lettered + result.skipped
        assert result.dead_lettered == 3 and result.skipped >= 1, result.summary()
        dead = spark.read.format("delta").load(config.storage.dead_letters).orderBy("offset").collect()
        assert [bytes(r["value"]) for r in dead] == [b[4] for b in bad]
        reasons = [r["reason"] for r in dead]
        assert "not in the Confluent Avro wire format" in reasons[0]
        assert reasons[1].startswith(f"Avro schema id 9999: unknown to the schema registry at {registry.url}")
        assert reasons[2].startswith("the bytes do not match Avro schema id")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_registry_that_is_down_fails_the_batch_and_letters_nothing(spark: Any, registry: StandInRegistry) -> None:
    records = as_avro(registry, [r for r in captured() if r[0] == "cap.e2e.wide"])
    registry.down = True
    root = tempfile.mkdtemp(prefix="cdc-avro-")
    try:
        settings = {"url": registry.url, "retry_seconds": 1}
        config = parse_config({**CONFIG, "storage": {"root": root}, "schema_registry": settings})
        with pytest.raises(SchemaRegistryError, match=f"schema registry at {registry.url}"):
            merging_processor(spark, config).process(kafka_frame(spark, records), 0)
        import os

        assert not os.path.exists(config.storage.dead_letters)
    finally:
        shutil.rmtree(root, ignore_errors=True)
