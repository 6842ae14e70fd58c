"""Avro envelopes (Confluent wire format) decode to exactly what their JSON twins decode to: the real
Debezium records of debezium/mariadb-3.5.0.jsonl re-encoded as Confluent's AvroConverter writes them
(cdc_delta.demo.avro_encoding), and each fault a dead letter with its reason. No Spark, no services."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer

from cdc_delta.config import parse_config
from cdc_delta.decode.plan import decode_plan
from cdc_delta.demo.avro_encoding import AvroEncoder, avro_schema
from cdc_delta.events.avro import AvroEnvelope, UnsupportedSchema, decode_avro, registry_id, unescape_name
from cdc_delta.events.envelope import DEAD, OK, SKIP, TOMBSTONE, decode_record
from tests.events.test_captured_debezium import PLAN, RECORDS

PLAN_ORDERS = decode_plan(
    parse_config(
        {
            "app_id": "avro",
            "storage": {"root": "/tmp/avro"},
            "tables": [{"name": "shop.orders", "topics": ["srv.shop.orders"], "key": ["id"]}],
        }
    )
)


class Registry:
    def __init__(self) -> None:
        self.texts: dict[int, str] = {}

    def register(self, subject: str, text: str) -> int:
        found = [i for i, t in self.texts.items() if t == text]
        if found:
            return found[0]
        self.texts[len(self.texts) + 1] = text
        return len(self.texts)

    def envelopes(self) -> dict[int, AvroEnvelope | str]:
        return {i: AvroEnvelope.from_text(i, t) for i, t in self.texts.items()}


def with_schema(record: dict[str, Any]) -> bool:
    return record["value"] is not None and json.loads(record["value"]).get("schema") is not None


@pytest.fixture(scope="module")
def encoded() -> tuple[Registry, list[tuple[dict[str, Any], bytes | None]]]:
    registry = Registry()
    encoder = AvroEncoder(registry.register)
    out = []
    for r in RECORDS:
        if r["value"] is None or with_schema(r):
            value = None if r["value"] is None else r["value"].encode()
            out.append((r, encoder.encode(r["topic"], value)))
    return registry, out


def test_every_real_record_decodes_as_its_json_twin(encoded: Any) -> None:
    registry, records = encoded
    envelopes = registry.envelopes()
    checked = {OK: 0, SKIP: 0}
    for r, avro in records:
        json_value = None if r["value"] is None else r["value"].encode()
        expected = decode_record(r["topic"], 0, r["offset"], json_value, PLAN)
        assert decode_avro(r["topic"], 0, r["offset"], avro, envelopes, PLAN) == expected, (r["topic"], r["offset"])
        checked[expected.status] = checked.get(expected.status, 0) + 1
    # the wide table's every column type, its schema changes, deletes, tombstones, the control records
    assert checked[OK] >= 15 and checked[SKIP] >= 5, checked
    assert len(registry.texts) >= 4  # wide before and after each ALTER, and the other topics' schemas


def test_the_avro_schema_is_the_one_avro_data_writes(encoded: Any) -> None:
    registry, _ = encoded
    wide = next(
        json.loads(t)
        for t in registry.texts.values()
        if json.loads(t)["name"] == "Envelope" and json.loads(t)["namespace"] == "cap.e2e.wide"
    )
    fields = {f["name"]: f for f in wide["fields"]}
    value = fields["before"]["type"]
    assert value[0] == "null" and value[1]["type"] == "record" and value[1]["connect.name"] == "cap.e2e.wide.Value"
    assert fields["after"]["type"] == ["null", "cap.e2e.wide.Value"]  # a named type is defined once
    columns = {f["name"]: f for f in value[1]["fields"]}
    decimal = columns["c_decimal"]["type"]
    decimal = decimal[1] if isinstance(decimal, list) else decimal
    assert decimal["logicalType"] == "decimal" and decimal["connect.name"] == "org.apache.kafka.connect.data.Decimal"
    tiny = columns["c_tinyint"]["type"]
    assert "int16" in json.dumps(tiny) or "int8" in json.dumps(tiny)


def avro_record(envelope: AvroEnvelope, schema: dict[str, Any], datum: dict[str, Any]) -> bytes:
    import io

    out = io.BytesIO()
    out.write(b"\x00" + envelope.registry_id.to_bytes(4, "big"))
    schemaless_writer(out, parse_schema(schema), datum)
    return out.getvalue()


def test_faults_are_dead_letters_with_their_reason(encoded: Any) -> None:
    registry, records = encoded
    envelopes = registry.envelopes()
    good = next(avro for r, avro in records if r["topic"] == "cap.e2e.wide" and avro is not None)
    known = registry_id(good)
    assert known is not None

    def reason(value: bytes | None, table: dict[int, Any] = envelopes) -> tuple[str, str | None]:
        d = decode_avro("cap.e2e.wide", 0, 1, value, table, PLAN)
        return d.status, d.reason

    assert reason(None) == (SKIP, TOMBSTONE)
    status, why = reason(b'{"schema": null}')
    assert status == DEAD and "not in the Confluent Avro wire format" in (why or "") and "7b 22" in (why or "")
    status, why = reason(b"\x00\x00\x00\x03\xe7" + good[5:])
    assert status == DEAD and why == "Avro schema id 999: not read from the schema registry"
    status, why = reason(good, {**envelopes, known: "unknown to the schema registry at http://r:8081"})
    assert status == DEAD and why == f"Avro schema id {known}: unknown to the schema registry at http://r:8081"
    status, why = reason(good[: len(good) // 2])
    assert status == DEAD and (why or "").startswith(f"the bytes do not match Avro schema id {known}")
    status, why = reason(good + b"\x02")
    assert status == DEAD and "1 bytes left over" in (why or "")


def test_only_unions_of_null_and_one_type_are_read() -> None:
    schema = {"type": "record", "name": "E", "fields": [{"name": "x", "type": ["null", "int", "string"]}]}
    with pytest.raises(UnsupportedSchema, match="unions of null and one type"):
        AvroEnvelope.from_text(1, json.dumps(schema))
    with pytest.raises(UnsupportedSchema, match="an Avro record"):
        AvroEnvelope.from_text(1, '"string"')


def test_avro_unicode_field_names_are_turned_back() -> None:
    assert unescape_name("order_u002did") == "order-id"
    assert unescape_name("a_u005fb") == "a_b"
    connect = {
        "type": "struct",
        "name": "x.Envelope",
        "optional": False,
        "fields": [
            {
                "type": "struct",
                "name": "x.Value",
                "optional": True,
                "field": "after",
                "fields": [{"type": "int32", "optional": False, "field": "order_u002did"}],
            },
            {"type": "string", "optional": False, "field": "op"},
        ],
    }
    envelope = AvroEnvelope.from_text(1, json.dumps(avro_schema(connect)), unescape_names=True)
    value = avro_record(envelope, avro_schema(connect), {"after": {"order_u002did": 5}, "op": "c"})
    assert envelope.connect["fields"][0]["fields"][0]["field"] == "order-id"
    assert envelope.payload(value) == {"after": {"order-id": 5}, "op": "c"}


def test_a_float_reads_as_the_shortest_decimal_java_writes() -> None:
    connect = {
        "type": "struct",
        "name": "x.Envelope",
        "optional": False,
        "fields": [
            {"type": "float", "optional": False, "field": "f"},
            {"type": "bytes", "optional": True, "field": "b"},
        ],
    }
    envelope = AvroEnvelope.from_text(1, json.dumps(avro_schema(connect)))
    value = avro_record(envelope, avro_schema(connect), {"f": 3.14, "b": b"\x00\xff"})
    assert envelope.payload(value) == {"f": 3.14, "b": "AP8="}


def test_a_schema_without_connect_properties_keeps_its_avro_logical_types() -> None:
    value = {
        "type": "record",
        "name": "Value",
        "fields": [
            {"name": "id", "type": "int"},
            {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        ],
    }
    schema = {
        "type": "record",
        "name": "Envelope",
        "namespace": "srv.shop.orders",
        "fields": [
            {"name": "after", "type": ["null", value]},
            {
                "name": "source",
                "type": {
                    "type": "record",
                    "name": "Source",
                    "fields": [{"name": "db", "type": "string"}, {"name": "table", "type": "string"}],
                },
            },
            {"name": "op", "type": "string"},
        ],
    }
    envelope = AvroEnvelope.from_text(1, json.dumps(schema))
    datum = {
        "after": {"id": 7, "amount": b"\x30\x39", "day": 3, "at": 86_400_000},
        "source": {"db": "shop", "table": "orders"},
        "op": "c",
    }
    import io

    from fastavro import parse_schema as parse

    out = io.BytesIO(b"\x00\x00\x00\x00\x01")
    out.seek(5)
    schemaless_writer(out, parse({**schema}), datum)
    decoded = decode_avro("srv.shop.orders", 0, 1, out.getvalue(), {1: envelope}, PLAN_ORDERS)
    assert decoded.status == OK, decoded.reason
    assert json.loads(decoded.schema_json or "") == [
        ["id", "int"],
        ["amount", "decimal(10,2)"],
        ["day", "date"],
        ["at", "timestamp"],
    ]
    assert json.loads(decoded.row_json or "") == {
        "id": 7,
        "amount": "123.45",
        "day": "1970-01-04",
        "at": 86_400_000_000,
    }
