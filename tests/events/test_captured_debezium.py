"""The decoder on records a real Debezium 3.5.0.Final MariaDB connector wrote (Kafka Connect 4.1.1,
JsonConverter with schemas, MariaDB 10.11 from Debian), captured in debezium/mariadb-3.5.0.jsonl (how:
debezium/README.md). No Spark and no services: the fast guard of what tests/e2e checks end to end."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from cdc_delta.config import parse_config
from cdc_delta.decode.plan import decode_plan
from cdc_delta.events.envelope import DEAD, OK, SKIP, Decoded, decode_record
from cdc_delta.events.transactions import Txn

CAPTURE = Path(__file__).parent / "debezium" / "mariadb-3.5.0.jsonl"
RECORDS = [json.loads(line) for line in CAPTURE.read_text(encoding="utf-8").splitlines()]
PLAN = decode_plan(
    parse_config(
        {
            "app_id": "capture",
            "storage": {"root": "/tmp/capture"},
            "tables": [
                {"name": "e2e.wide", "topics": ["cap.e2e.wide"], "key": ["id"]},
                {"name": "e2e.temp", "topics": ["cap.e2e.temp"], "key": ["id"]},
            ],
        }
    )
)


def decoded(index: int) -> Decoded:
    r = RECORDS[index]
    value = None if r["value"] is None else r["value"].encode()
    return decode_record(r["topic"], 0, r["offset"], value, PLAN)


def row(index: int) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    d = decoded(index)
    assert d.status == OK, d.reason
    assert d.row_json is not None and d.schema_json is not None
    return json.loads(d.row_json), {entry[0]: entry[1:] for entry in json.loads(d.schema_json)}


def test_no_real_record_is_dead_lettered() -> None:
    outcomes = [decoded(i) for i in range(len(RECORDS))]
    assert [(i, d.reason) for i, d in enumerate(outcomes) if d.status == DEAD] == []


def test_every_column_type_and_edge_value_of_the_snapshot_row() -> None:
    values, types = row(1)
    assert types["c_float"] == ["float"] and values["c_float"] == 3.14  # JsonConverter calls FLOAT32 "float"
    assert types["c_double"] == ["double"] and values["c_double"] == 2.718281828459045
    # more than 28 significant digits, exactly (Python's decimal context would round to 28)
    assert types["c_decimal"] == ["decimal(38,10)"]
    assert values["c_decimal"] == "9999999999999999999999999999.9999999999"
    # DECIMAL(65,30) does not fit a Spark decimal: exact text
    assert types["c_decimal65"] == ["string"]
    assert values["c_decimal65"] == "12345678901234567890123456789012345.123456789012345678901234567890"
    assert types["c_bigint_u"] == ["decimal(20,0)"] and values["c_bigint_u"] == "18446744073709551615"
    # BIT(n): MySQL's big-endian bytes (Debezium sends them least significant byte first)
    assert base64.b64decode(values["c_bit10"]) == b"\x02\x01"  # b'1000000001'
    assert base64.b64decode(values["c_bit64"]) == b"\xff" * 8
    assert types["c_bit1"] == ["boolean"] and values["c_bit1"] is True
    assert values["c_time"] == "-838:59:59.000000" and values["c_time6"] == "838:59:59.000000"
    assert values["c_date"] == "1000-01-01"
    assert values["c_datetime6"] == 253402300799999999  # 9999-12-31 23:59:59.999999
    assert values["c_timestamp6"] == 2147483647999999  # 2038-01-19T03:14:07.999999Z
    assert values["c_year"] == 1901 and types["c_year"] == ["int"]
    assert values["c_varchar"] == "héllo wörld 😀"
    assert values["c_set"] == ["x", "z"] and values["c_json"] == '{"a": [1, 2, {"b": null}]}'


def test_the_minimum_row() -> None:
    values, _ = row(2)
    assert values["c_decimal"] == "-9999999999999999999999999999.9999999999"
    assert values["c_decimal65"] == "-0.000000000000000000000000000001"
    assert base64.b64decode(values["c_bit64"]) == b"\x00" * 7 + b"\x01"
    assert values["c_timestamp6"] == 1591012800123400  # '2020-06-01T12:00:00.1234Z': four fraction digits
    assert values["c_time6"] == "-00:00:00.000001"
    assert values["c_double"] == -1.7976931348623157e308


def test_columns_added_with_a_default_carry_it_in_the_descriptor() -> None:
    values, types = row(11)  # inserted after ALTER TABLE ... ADD COLUMN c_added INT NOT NULL DEFAULT 7
    assert types["c_added"] == ["int", 7] and types["c_added_s"] == ["string", "dflt"]
    assert values["c_added"] == 8


def test_a_primary_key_update_is_a_delete_and_a_create() -> None:
    delete, create = decoded(6), decoded(8)
    assert (delete.op, json.loads(delete.row_json or "{}")["id"]) == ("d", 2)
    assert (create.op, json.loads(create.row_json or "{}")["id"]) == ("c", 10)
    assert ["__debezium.newkey", '{"id":10}'] in RECORDS[6]["headers"]
    assert decoded(7).reason == "tombstone"


def test_truncate_and_the_key_widened_by_an_alter() -> None:
    assert (decoded(13).status, decoded(13).op) == (OK, "t")
    values, types = row(15)
    assert (values["id"], types["id"]) == (5000000000, ["bigint"])


@pytest.mark.parametrize(
    ("index", "reason"),
    [
        (19, "schema change"),
        (20, "schema change"),  # the snapshot's DROP TABLE IF EXISTS is history, not a drop
        (24, "schema change"),
        (25, "schema change"),
        (29, "transaction marker"),
        (30, "transaction marker"),
        (31, "heartbeat"),
        (32, "schema history record"),
        (33, "schema history record"),
    ],
)
def test_debeziums_own_records_are_skipped_as_what_they_are(index: int, reason: str) -> None:
    d = decoded(index)
    assert (d.status, d.reason) == (SKIP, reason)
    if reason != "schema history record":
        assert d.source_ts_ms is not None  # readiness sees how far the connector has got


def test_drop_table_soft_deletes_like_a_truncate() -> None:
    d = decoded(27)  # DROP TABLE `e2e`.`temp`, from the binlog
    assert (d.status, d.op, d.table, d.source_db, d.source_table) == (OK, "t", "e2e.temp", "e2e", "temp")
    assert d.seq is not None and d.seq.file == 3 and d.seq.pos == 7733


def test_changes_land_with_their_transaction_and_an_end_with_its_counts() -> None:
    """With ``provide.transaction.metadata``: the three inserts of one transaction carry its id and their
    order; its END (here an empty transaction's) lands as a boundary; a BEGIN is only skipped."""
    blocks = [decoded(i).txn for i in (16, 17, 18)]
    assert blocks == [Txn("0-1-30", n, n) for n in (1, 2, 3)]
    assert decoded(15).txn is None  # the connector wrote no block on this one
    begin, end = decoded(29), decoded(30)
    assert (begin.op, begin.txn) == (None, None)
    assert (end.status, end.reason, end.op, end.row_json) == (SKIP, "transaction marker", "x", "{}")
    assert end.txn == Txn("0-1-29", 0, None) and end.source_ts_ms == 1795448045000
