"""Every Connect/Debezium type against hand-checked values."""

from __future__ import annotations

import base64

import pytest

from cdc_delta.events.logical_types import connect_column_type, decode_connect_value, infer_column_type, to_canonical


def field(type_: str, name: str | None = None, **params: str) -> dict:
    out: dict = {"type": type_, "field": "c"}
    if name:
        out["name"] = name
    if params:
        out["parameters"] = params
    return out


DECIMAL = "org.apache.kafka.connect.data.Decimal"


@pytest.mark.parametrize(
    ("raw_bytes", "scale", "expected"),
    [
        (bytes([0x30, 0x39]), "2", "123.45"),  # 12345
        (bytes([0xCF, 0xC7]), "2", "-123.45"),  # -12345 in two's complement
        (bytes([0x00]), "3", "0.000"),
        (bytes([0x01, 0x00]), "0", "256"),
        ((10**20).to_bytes(9, "big", signed=True), "4", "10000000000000000.0000"),
    ],
)
def test_connect_decimal_from_base64(raw_bytes: bytes, scale: str, expected: str) -> None:
    f = field("bytes", DECIMAL, scale=scale, **{"connect.decimal.precision": "30"})
    assert connect_column_type(f) == f"decimal(30,{scale})"
    assert decode_connect_value(f, base64.b64encode(raw_bytes).decode()) == expected


def test_decimal_without_precision_parameter_is_38_wide() -> None:
    assert connect_column_type(field("bytes", DECIMAL, scale="2")) == "decimal(38,2)"


def test_variable_scale_decimal_is_exact_text() -> None:
    f = field("struct", "io.debezium.data.VariableScaleDecimal")
    value = {"scale": 3, "value": base64.b64encode((1234567).to_bytes(3, "big", signed=True)).decode()}
    assert connect_column_type(f) == "string"
    assert decode_connect_value(f, value) == "1234.567"


@pytest.mark.parametrize(
    ("type_", "name", "raw", "column_type", "expected"),
    [
        ("int32", "io.debezium.time.Date", 19_723, "date", "2024-01-01"),
        ("int32", "io.debezium.time.Date", -1, "date", "1969-12-31"),
        ("int32", "org.apache.kafka.connect.data.Date", 0, "date", "1970-01-01"),
        ("int32", "io.debezium.time.Time", 3_723_004, "string", "01:02:03.004000"),
        ("int64", "io.debezium.time.MicroTime", 45_296_000_001, "string", "12:34:56.000001"),
        ("int64", "io.debezium.time.MicroTime", 3_020_399_000_000, "string", "838:59:59.000000"),
        ("int64", "io.debezium.time.MicroTime", -1_000_000, "string", "-00:00:01.000000"),
        ("int64", "io.debezium.time.Timestamp", 1_704_067_200_123, "timestamp", 1_704_067_200_123_000),
        ("int64", "io.debezium.time.MicroTimestamp", 1_704_067_200_123_456, "timestamp", 1_704_067_200_123_456),
        ("int64", "io.debezium.time.NanoTimestamp", 1_704_067_200_123_456_789, "timestamp", 1_704_067_200_123_456),
        ("string", "io.debezium.time.ZonedTimestamp", "2024-01-01T00:00:00.5Z", "timestamp", 1_704_067_200_500_000),
        ("string", "io.debezium.time.ZonedTimestamp", "2024-01-01T08:00:00+08:00", "timestamp", 1_704_067_200_000_000),
        ("int32", "io.debezium.time.Year", 2024, "int", 2024),
        ("string", "io.debezium.data.Json", '{"a": [1, 2]}', "string", '{"a": [1, 2]}'),
        ("string", "io.debezium.data.Enum", "paid", "string", "paid"),
        ("string", "io.debezium.data.EnumSet", "a,c", "array<string>", ["a", "c"]),
        ("string", "io.debezium.data.EnumSet", "", "array<string>", []),
        ("int8", None, -128, "tinyint", -128),
        ("int16", None, 32767, "smallint", 32767),
        ("int32", None, -5, "int", -5),
        ("int64", None, 2**62, "bigint", 2**62),
        ("float32", None, 1.5, "float", 1.5),
        ("float64", None, 2, "double", 2.0),
        ("boolean", None, True, "boolean", True),
        ("string", None, "héllo", "string", "héllo"),
        ("bytes", None, "AAEC", "binary", "AAEC"),
    ],
)
def test_logical_and_primitive_types(
    type_: str, name: str | None, raw: object, column_type: str, expected: object
) -> None:
    f = field(type_, name)
    assert connect_column_type(f) == column_type
    assert decode_connect_value(f, raw) == expected


def test_null_stays_null_for_every_type() -> None:
    assert decode_connect_value(field("bytes", DECIMAL, scale="2"), None) is None
    assert to_canonical("date", None) is None


@pytest.mark.parametrize(
    ("column_type", "raw", "message"),
    [
        ("int", 2**31, "out of range for int"),
        ("tinyint", 128, "out of range for tinyint"),
        ("bigint", "12", "expected an integer"),
        ("boolean", 1, "expected true/false"),
        ("decimal(5,2)", "123.456", "more than 2 decimal places"),
        ("decimal(5,2)", "1234.5", "too many digits"),
        ("decimal(5,2)", "abc", "not a decimal number"),
        ("date", "2024-02-30", "day is out of range"),
        ("binary", "***", "is not valid base64"),
    ],
)
def test_values_that_do_not_fit_raise_with_a_reason(column_type: str, raw: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        to_canonical(column_type, raw)


def test_schemaless_shapes_for_configured_types() -> None:
    assert to_canonical("decimal(10,2)", 12.5) == "12.50"
    assert to_canonical("decimal(10,2)", "7") == "7.00"
    assert to_canonical("date", "2024-03-01") == "2024-03-01"
    assert to_canonical("date", 1) == "1970-01-02"
    assert to_canonical("timestamp", "1970-01-01T00:00:01Z") == 1_000_000
    assert to_canonical("array<string>", "x,y") == ["x", "y"]
    assert to_canonical("string", {"b": 1, "a": 2}) == '{"a": 2, "b": 1}'


def test_inferred_types_without_schema_or_config() -> None:
    assert [infer_column_type(v) for v in (True, 3, 2.5, "s", [1], None)] == [
        "boolean",
        "bigint",
        "double",
        "string",
        "string",
        None,
    ]
