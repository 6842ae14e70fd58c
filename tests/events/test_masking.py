"""A masked column must arrive masked: what Debezium's schema says of it (or, without a schema, its values)
is judged per rule, and an event that fails is a dead letter whose envelope keeps the column masked as
Debezium would have masked it."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from cdc_delta.config import parse_config
from cdc_delta.decode.plan import decode_plan
from cdc_delta.demo.generator import Column, SourceTable, envelope
from cdc_delta.events.envelope import DEAD, OK, decode_record
from cdc_delta.events.masking import masked_value, missing_columns, unmasked, unmasked_values

SALT = "pepper.and.salt"
EMAIL = "jane@example.com"
LENGTH = "__debezium.source.column.length"


def users(email: dict[str, str], note: dict[str, str], note_type: str = "string") -> SourceTable:
    return SourceTable(
        "shop",
        "users",
        (Column("id", "int64"), Column("email", "string", params=email), Column("note", note_type, params=note)),
    )


@pytest.fixture(autouse=True)
def salt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SALT", SALT)


def plan(with_salt: bool = True) -> Any:
    config = parse_config(
        {
            "app_id": "m",
            "storage": {"root": "/lake"},
            "masking": {"password_env": "SALT"},
            "tables": [
                {
                    "name": "shop.users",
                    "topics": ["srv.shop.users"],
                    "key": ["id"],
                    "mask": {"EMAIL": "hash", "note": "truncate 4"},
                }
            ],
        },
        env={"SALT": SALT},
    )
    return decode_plan(config, with_salt=with_salt)


def record(table: SourceTable, values: dict[str, Any], with_schema: bool = True) -> bytes:
    return json.dumps(envelope(table, "c", None, values, server="srv", with_schema=with_schema)).encode()


def test_rules_are_judged_by_what_debeziums_schema_says() -> None:
    rules = {"email": ("hash", 0), "note": ("truncate", 4)}
    fields = lambda table: {c.name: {**c.schema()} for c in table.columns}  # noqa: E731
    masked = users({"masked": "true"}, {"truncateLength": "4"})
    assert unmasked(fields(masked), rules) == []
    # A column declared no longer than the cut: Debezium had nothing to cut and says nothing.
    assert unmasked(fields(users({"masked": "true"}, {LENGTH: "3"})), rules) == []
    assert unmasked(fields(users({}, {LENGTH: "10"})), rules) == [
        "column email arrives without Debezium's masked parameter",
        "column note arrives without Debezium's truncateLength 4",
    ]
    # Debezium marks a column of another type masked, but masks text only.
    assert unmasked(fields(users({"masked": "true"}, {"truncateLength": "4"}, "int32")), rules) == [
        "column note is int32: Debezium masks text columns only"
    ]
    assert missing_columns(fields(masked), {"emial": ("hash", 0)}) == ["emial"]


def test_without_a_schema_the_values_are_judged() -> None:
    rules = {"email": ("hash", 0), "phone": ("stars", 3), "note": ("truncate", 4)}
    digest = hashlib.sha256(b"x").hexdigest()
    assert unmasked_values({"email": digest[:20], "phone": "***", "note": "abcd"}, rules) == []
    assert unmasked_values({"email": None, "phone": "***", "note": None}, rules) == []
    assert unmasked_values({"email": EMAIL, "phone": "555", "note": "abcde"}, rules) == [
        "column email holds a value that is not a hash",
        "column phone holds a value that is not 3 asterisks",
        "column note holds a value longer than 4 characters",
    ]


def test_values_are_masked_as_debezium_masks_them() -> None:
    expected = hashlib.sha256((SALT + EMAIL).encode()).hexdigest()
    assert masked_value(EMAIL, ("hash", 0), SALT, None) == expected
    assert masked_value(EMAIL, ("hash", 0), SALT, 40) == expected[:40]  # cut to the declared length
    assert masked_value(None, ("hash", 0), SALT, None) is None
    assert masked_value(EMAIL, ("stars", 5), SALT, None) == "*****"
    # Java counts UTF-16 units: an emoji is two, and one cut in half is dropped.
    assert masked_value("ab\U0001f600cd", ("truncate", 3), SALT, None) == "ab"
    assert masked_value("ab\U0001f600cd", ("truncate", 4), SALT, None) == "ab\U0001f600"


@pytest.mark.parametrize("with_schema", [True, False])
def test_an_unmasked_event_is_a_dead_letter_keeping_no_plain_value(with_schema: bool) -> None:
    p = plan()
    masked = users({"masked": "true", LENGTH: "40"}, {"truncateLength": "4"})
    hashed = hashlib.sha256((SALT + EMAIL).encode()).hexdigest()[:40]
    good = decode_record(
        "srv.shop.users", 0, 1, record(masked, {"id": 1, "email": hashed, "note": "abcd"}, with_schema), p
    )
    assert good.status == OK and json.loads(good.row_json or "")["email"] == hashed

    plain = users({LENGTH: "40"}, {LENGTH: "200"})
    bad = decode_record(
        "srv.shop.users", 0, 2, record(plain, {"id": 2, "email": EMAIL, "note": "a long note"}, with_schema), p
    )
    assert bad.status == DEAD and bad.table == "shop.users"
    assert "email" in (bad.reason or "") and "cdc-delta resnapshot --table shop.users" in (bad.reason or "")
    assert EMAIL not in (bad.redacted or "") and "a long note" not in (bad.redacted or "")
    kept = json.loads(bad.redacted or "")
    after = (kept["payload"] if with_schema else kept)["after"]
    length = 40 if with_schema else 64  # the declared length is in the schema only
    assert after == {"id": 2, "email": hashlib.sha256((SALT + EMAIL).encode()).hexdigest()[:length], "note": "a lo"}


def test_a_truncate_the_schema_does_not_confirm_is_judged_by_its_values() -> None:
    """Debezium adds no truncateLength where the declared length is at most N (and says nothing of the
    length unless the source types are propagated, which would turn a hash off): the values decide."""
    p = plan()
    table = users({"masked": "true"}, {})
    short = record(table, {"id": 1, "email": "ab12", "note": "abcd"})
    assert decode_record("srv.shop.users", 0, 1, short, p).status == OK
    long = decode_record("srv.shop.users", 0, 2, record(table, {"id": 2, "email": "ab12", "note": "abcde"}), p)
    assert long.status == DEAD and "column note holds a value longer than 4 characters" in (long.reason or "")
    assert "abcde" not in (long.redacted or "") and '"note":"abcd"' in (long.redacted or "")


def test_a_plan_made_without_the_salt_does_not_hold_it() -> None:
    assert SALT not in repr(plan(with_salt=True)) and plan(with_salt=False).masks.salt == ""
