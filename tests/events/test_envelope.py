"""Decoding whole Debezium records: every outcome and every reason a record is dead-lettered."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re

import pytest

from cdc_delta.config import parse_config
from cdc_delta.decode.plan import decode_plan
from cdc_delta.demo.generator import ORDER_COLUMNS, SourceTable, envelope
from cdc_delta.events.envelope import DEAD, OK, SKIP, DecodePlan, decode_record

TABLE = SourceTable("inventory", "orders", ORDER_COLUMNS)
TOPIC = "dbserver1.inventory.orders"


def plan(**overrides: object) -> DecodePlan:
    table = {"name": "inventory.orders", "topics": [TOPIC], "key": ["id"], **overrides}
    return decode_plan(parse_config({"app_id": "t", "storage": {"root": "/x"}, "tables": [table]}))


ROW = {
    "id": 7,
    "customer": "ann",
    "amount": decimal.Decimal("12.30"),
    "status": "paid",
    "order_date": dt.date(2026, 1, 2),
    "updated_at": dt.datetime(2026, 1, 2, 3, 4, 5, 6),
}


def decode(value: object, plan_: DecodePlan | None = None, topic: str = TOPIC):
    raw = value if isinstance(value, bytes) or value is None else json.dumps(value).encode()
    return decode_record(topic, 0, 11, raw, plan_ or plan())


@pytest.mark.parametrize("with_schema", [True, False])
def test_insert_decodes_typed_values(with_schema: bool) -> None:
    columns = {} if with_schema else {"amount": "decimal(10,2)", "order_date": "date"}
    value = envelope(
        TABLE, "c", None, ROW, file="mysql-bin.000003", pos=154, row=1, ts_ms=1000, with_schema=with_schema
    )
    if not with_schema:  # schemaless JSON carries what the converters make of decimals and dates
        value["after"]["amount"] = "12.30"
        value["after"]["order_date"] = "2026-01-02"
    out = decode(value, plan(columns=columns))
    assert out.status == OK and out.table == "inventory.orders" and out.op == "c"
    assert (out.seq.phase, out.seq.file, out.seq.pos, out.seq.row, out.seq.offset) == (1, 3, 154, 1, 11)
    values = json.loads(out.row_json)
    assert values["amount"] == "12.30" and values["order_date"] == "2026-01-02" and values["id"] == 7
    types = dict(json.loads(out.schema_json))
    assert types["amount"] == "decimal(10,2)" and types["order_date"] == "date"
    if with_schema:
        assert types["updated_at"] == "timestamp" and values["updated_at"] == 1_767_323_045_000_006
        assert types["id"] == "bigint" and types["status"] == "string"


def test_delete_uses_the_before_image() -> None:
    out = decode(envelope(TABLE, "d", ROW, None))
    assert out.status == OK and out.op == "d" and json.loads(out.row_json)["customer"] == "ann"


def test_snapshot_read_is_phase_zero() -> None:
    assert decode(envelope(TABLE, "r", None, ROW)).seq.phase == 0


def test_the_rows_of_debeziums_signal_table_are_skipped_whatever_routes_them() -> None:
    """An incremental snapshot's watermarks are rows of the signal table: a pattern entry that takes every
    table of the database takes it too, and still it is skipped with a count, never a table."""
    signal = SourceTable("inventory", "debezium_signal", ORDER_COLUMNS)
    entry = {"name": "{db}.{table}", "topic_pattern": r"dbserver1\.inventory\.[^.]+", "key": ["id"]}
    every = decode_plan(parse_config({"app_id": "t", "storage": {"root": "/x"}, "tables": [entry]}))
    out = decode(envelope(signal, "c", None, ROW), every, topic="dbserver1.inventory.debezium_signal")
    assert (out.status, out.reason, out.table) == (SKIP, "signal table", None)
    assert decode(envelope(TABLE, "c", None, ROW), every).status == OK


@pytest.mark.parametrize("value", [None, {"schema": None, "payload": None}])
def test_tombstones_are_skipped_and_counted(value: object) -> None:
    out = decode(value)
    assert (out.status, out.reason) == (SKIP, "tombstone")


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"{not json", "value is not valid UTF-8 JSON"),
        (b"\xff\xfe", "value is not valid UTF-8 JSON"),
        ([1, 2], "value is JSON list, not a Debezium envelope object"),
        ({"op": "x", "after": {"id": 1}}, "unknown op 'x'"),
        ({"after": {"id": 1}}, "unknown op None"),
        ({"op": "c", "after": None, "source": {}}, "op 'c' event has no 'after' row image"),
        ({"op": "d", "before": None, "source": {}}, "op 'd' event has no 'before' row image"),
        ({"op": "c", "after": {"customer": "x"}, "source": {}}, r"key column\(s\) \['id'\] missing or null"),
        ({"op": "c", "after": {"id": None}, "source": {}}, r"key column\(s\) \['id'\] missing or null"),
    ],
)
def test_undecodable_records_are_dead_with_a_reason(value: object, reason: str) -> None:
    out = decode(value)
    assert out.status == DEAD
    assert re.search(reason, out.reason), out.reason


def test_uncastable_value_names_the_column() -> None:
    value = envelope(TABLE, "c", None, ROW)
    value["payload"]["after"]["amount"] = "!!notbase64"
    out = decode(value)
    assert out.status == DEAD and out.table == "inventory.orders"
    assert out.reason.startswith("column 'amount': cannot decode '!!notbase64'")


def test_configured_type_mismatch_is_dead() -> None:
    out = decode({"op": "c", "after": {"id": 1, "qty": "many"}, "source": {}}, plan(columns={"qty": "int"}))
    assert out.status == DEAD and "column 'qty'" in out.reason and "expected an integer" in out.reason


def test_unrouted_topic_is_dead_and_says_so() -> None:
    out = decode(envelope(TABLE, "c", None, ROW), topic="other.topic")
    assert out.status == DEAD
    assert out.reason == "no configured table routes topic 'other.topic' (source db 'inventory', table 'orders')"


@pytest.mark.parametrize(("policy", "status"), [("soft_delete", OK), ("skip", SKIP), ("dead_letter", DEAD)])
def test_truncate_policy(policy: str, status: str) -> None:
    table = {"name": "inventory.orders", "topics": [TOPIC], "key": ["id"]}
    p = decode_plan(
        parse_config({"app_id": "t", "storage": {"root": "/x"}, "tables": [table], "truncate_policy": policy})
    )
    out = decode(envelope(TABLE, "t", None, None), p)
    assert out.status == status and out.op == "t" and out.row_json is None


def test_plan_pickles_for_the_executors() -> None:
    import pickle

    p = plan(columns={"qty": "int"})
    assert pickle.loads(pickle.dumps(p)).router.route(TOPIC, "inventory", "orders") == "inventory.orders"
