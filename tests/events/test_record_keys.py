"""A table's primary-key columns read from Debezium's record key (JSON with and without schemas, Avro)."""

from __future__ import annotations

import json

from cdc_delta.events.record_keys import NO_KEY, avro_key_columns, json_key_columns
from tests.events.test_captured_debezium import RECORDS


def test_the_key_of_a_real_debezium_record_names_the_primary_key() -> None:
    keys = {json_key_columns(r["key"].encode()) for r in RECORDS if r["topic"] == "cap.e2e.wide" and r["key"]}
    assert keys == {("id",)}


def test_json_keys_with_and_without_schemas() -> None:
    with_schema = {
        "schema": {"type": "struct", "fields": [{"type": "int32", "field": "a"}, {"type": "string", "field": "b"}]},
        "payload": {"b": "x", "a": 1},
    }
    assert json_key_columns(json.dumps(with_schema).encode()) == ("a", "b")  # the schema's order
    assert json_key_columns(b'{"order_id": 1, "line_no": 2}') == ("order_id", "line_no")
    assert json_key_columns(b'{"schema": 1, "payload": 2}') == ("schema", "payload")  # columns so named
    for nothing in (None, b"", b"null", b"42", b"{}", b"not json", b'{"schema": {"fields": [{}]}, "payload": {}}'):
        assert json_key_columns(nothing) == NO_KEY


def test_avro_keys_from_the_registrys_schema() -> None:
    schema = {
        "type": "record",
        "name": "Key",
        "fields": [{"name": "id", "type": "int"}, {"name": "r_u005fx", "type": "int"}],
    }
    assert avro_key_columns(json.dumps(schema)) == ("id", "r_u005fx")
    assert avro_key_columns(json.dumps(schema), lambda n: n.replace("_u005f", "_")) == ("id", "r_x")
    assert avro_key_columns('"string"') == NO_KEY
    assert avro_key_columns("{") == NO_KEY
