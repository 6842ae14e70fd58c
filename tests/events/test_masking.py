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


def texts(problems: list[Any]) -> list[str]:
    return [p.text for p in problems]


def test_rules_are_judged_by_what_debeziums_schema_says() -> None:
    rules = {"email": ("hash", 0), "note": ("truncate", 4)}
    fields = lambda table: {c.name: {**c.schema()} for c in table.columns}  # noqa: E731
    masked = users({"masked": "true"}, {"truncateLength": "4"})
    assert unmasked(fields(masked), rules) == []
    # A column declared no longer than the cut: Debezium had nothing to cut and says nothing.
    assert unmasked(fields(users({"masked": "true"}, {LENGTH: "3"})), rules) == []
    assert texts(unmasked(fields(users({}, {LENGTH: "10"})), rules)) == [
        "column email arrives without Debezium's masked parameter",
        "column note arrives without Debezium's truncateLength 4",
    ]
    # Cut, but to another length than the rule's.
    assert texts(unmasked(fields(users({"masked": "true"}, {"truncateLength": "10"})), rules)) == [
        "column note arrives cut to 10 characters, not 4"
    ]
    # Debezium marks a column of another type masked, but masks text only; a JSON column or a timestamp
    # with zone is a string in Kafka and not text to Debezium. No connector setting helps: config problems.
    number = unmasked(fields(users({"masked": "true"}, {"truncateLength": "4"}, "int32")), rules)
    assert texts(number) == ["column note is int32, not text: Debezium masks text columns only"] and number[0].config
    zoned = users({"masked": "true"}, {"truncateLength": "4"})
    zoned_fields = {**fields(zoned), "email": {**fields(zoned)["email"], "name": "io.debezium.time.ZonedTimestamp"}}
    assert texts(unmasked(zoned_fields, rules)) == [
        "column email is io.debezium.time.ZonedTimestamp, not text: Debezium masks text columns only"
    ]
    assert missing_columns(fields(masked), {"emial": ("hash", 0)}) == ["emial"]


def test_without_a_schema_the_values_are_judged_and_a_hash_cannot_be() -> None:
    rules = {"phone": ("stars", 3), "note": ("truncate", 4)}
    assert unmasked_values({"phone": "***", "note": "abcd"}, rules, schemaless=True) == []
    assert unmasked_values({"phone": None, "note": None}, rules, schemaless=True) == []
    assert texts(unmasked_values({"phone": "555", "note": "abcde"}, rules, schemaless=True)) == [
        "column phone holds a value that is not 3 asterisks",
        "column note holds a value longer than 4 characters",
    ]
    # A hash is a hex word: a phone or card number is one too. Without the schema's mark it is refused.
    digest = hashlib.sha256(b"x").hexdigest()
    refused = unmasked_values({"email": digest}, {"email": ("hash", 0)}, schemaless=True)
    assert [p.config for p in refused] == [True] and "only a record's schema shows" in refused[0].text


def test_values_are_masked_as_debezium_masks_them() -> None:
    expected = hashlib.sha256((SALT + EMAIL).encode()).hexdigest()
    assert masked_value(EMAIL, ("hash", 0), SALT, None) == expected
    assert masked_value(EMAIL, ("hash", 0), SALT, 40) == expected[:40]  # cut to the declared length
    assert masked_value(None, ("hash", 0), SALT, None) is None
    assert masked_value(EMAIL, ("stars", 5), SALT, None) == "*****"
    # Java counts UTF-16 units: an emoji is two, and one cut in half is dropped.
    assert masked_value("ab\U0001f600cd", ("truncate", 3), SALT, None) == "ab"
    assert masked_value("ab\U0001f600cd", ("truncate", 4), SALT, None) == "ab\U0001f600"


def test_an_unmasked_event_is_a_dead_letter_keeping_no_plain_value() -> None:
    p = plan()
    masked = users({"masked": "true", LENGTH: "40"}, {"truncateLength": "4"})
    hashed = hashlib.sha256((SALT + EMAIL).encode()).hexdigest()[:40]
    good = decode_record("srv.shop.users", 0, 1, record(masked, {"id": 1, "email": hashed, "note": "abcd"}), p)
    assert good.status == OK and json.loads(good.row_json or "")["email"] == hashed

    plain = users({LENGTH: "40"}, {LENGTH: "200"})
    bad = decode_record("srv.shop.users", 0, 2, record(plain, {"id": 2, "email": EMAIL, "note": "a long note"}), p)
    assert bad.status == DEAD and bad.table == "shop.users"
    assert (bad.reason or "").startswith("table shop.users: column email arrives without Debezium's masked parameter")
    assert "cdc-delta resnapshot --table shop.users" in (bad.reason or "")
    assert EMAIL not in (bad.redacted or "") and "a long note" not in (bad.redacted or "")
    kept = json.loads(bad.redacted or "")
    assert kept["payload"]["after"] == {"id": 2, "email": hashed, "note": "a lo"}  # cut to the declared 40

    # Replayed, the dead letter is refused again, and its columns are not masked twice.
    again = decode_record("srv.shop.users", 0, 2, (bad.redacted or "").encode(), p)
    assert again.status == DEAD and json.loads(again.redacted or "")["payload"]["after"] == kept["payload"]["after"]

    # Refused before anything else can refuse it with its raw value (here a position out of range).
    value = envelope(plain, "c", None, {"id": 3, "email": EMAIL, "note": None}, server="srv", pos=2**70)
    odd = decode_record("srv.shop.users", 0, 3, json.dumps(value).encode(), p)
    assert odd.status == DEAD and odd.redacted is not None and EMAIL not in odd.redacted


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
