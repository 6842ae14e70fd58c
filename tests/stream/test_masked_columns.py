"""A table's masked columns in the stream: records Debezium masked land (through the JVM decoder); records
whose schema says a masked column was not masked are dead letters that keep the column masked, never its
plain value, and nothing of them reaches the table."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from cdc_delta.config import parse_config
from cdc_delta.demo.batches import kafka_frame
from cdc_delta.demo.generator import Column, SourceTable, envelope
from tests.batches import merging_processor
from tests.delta_rows import read_canonical

pytestmark = pytest.mark.spark

SALT = "a-salt.for.tests"
LENGTH = "__debezium.source.column.length"


def users(masked: bool) -> SourceTable:
    email = {"masked": "true", LENGTH: "64"} if masked else {LENGTH: "64"}
    return SourceTable("shop", "users", (Column("id", "int64"), Column("email", "string", params=email)))


def digest(text: str) -> str:
    return hashlib.sha256((SALT + text).encode()).hexdigest()


def test_unmasked_records_are_dead_letters_that_keep_no_plain_value(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MASK_SALT", SALT)
    config = parse_config(
        {
            "app_id": "t",
            "storage": {"root": str(tmp_path)},
            "masking": {"password_env": "MASK_SALT"},
            "tables": [{"name": "shop.users", "topics": ["srv.shop.users"], "key": ["id"], "mask": {"email": "hash"}}],
            "merge": {"max_delay_seconds": 0},
        }
    )

    def rec(offset: int, masked: bool, email: str) -> tuple:
        value = envelope(users(masked), "c", None, {"id": offset, "email": email}, pos=100 + offset, server="srv")
        compact = json.dumps(value, separators=(",", ":"))  # as the JsonConverter writes it: the JVM reads it
        return ("srv.shop.users", 0, offset, b"k", compact.encode())

    plain = [f"user{i}@example.com" for i in range(4)]
    batch = [rec(0, True, digest(plain[0])), rec(1, False, plain[1])]
    batch += [rec(2, True, digest(plain[2])), rec(3, False, plain[3])]
    result = merging_processor(spark, config).process(kafka_frame(spark, batch), 0)
    assert (result.landed, result.dead_lettered) == (2, 2)

    # The masked records landed on the JVM's path (their images as Debezium wrote them, a Connect schema's
    # reference), not left to the reference decoder.
    landed = spark.read.format("delta").load(f"{tmp_path}/_cdc_changelog").orderBy("offset").collect()
    assert [(r["offset"], r["schema_id"][0]) for r in landed] == [(0, "x"), (2, "x")]
    rows = read_canonical(spark, config.storage.table_path(config.table("shop.users")))[1]
    assert {r["id"]: r["email"] for r in rows} == {0: digest(plain[0]), 2: digest(plain[2])}
    letters = spark.read.format("delta").load(config.storage.dead_letters).orderBy("offset").collect()
    assert [r["offset"] for r in letters] == [1, 3]
    for letter, email in zip(letters, (plain[1], plain[3]), strict=True):
        value = bytes(letter["value"]).decode()
        assert email not in value and SALT not in value
        assert json.loads(value)["payload"]["after"]["email"] == digest(email)
        assert "column email arrives without Debezium's masked parameter" in letter["reason"]
