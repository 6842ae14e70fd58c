"""Shared by the decoder tests: run records through the JVM decoder's path (``decode_batch``, which
leaves some records to the reference) and through the reference decoder (``decode_record``), and
compare the two record by record."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any, TypeVar

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_delta.config import parse_config
from cdc_delta.decode.batch import decode_batch
from cdc_delta.decode.canonical import canonical_frame
from cdc_delta.decode.images import schema_ref
from cdc_delta.decode.jvm import Landable
from cdc_delta.decode.plan import decode_plan
from cdc_delta.demo.batches import kafka_frame
from cdc_delta.demo.generator import Column, SourceTable, envelope
from cdc_delta.events.envelope import DecodePlan, decode_record

Record = tuple[str, int, int, bytes | None, bytes | None]
"""(topic, partition, offset, key, value), as :func:`cdc_delta.demo.batches.kafka_frame` takes them."""

T = TypeVar("T")
COMPACT = (",", ":")  # as Kafka Connect's JsonConverter writes
SPACED = (", ", ": ")  # as other producers may


def plan_for(tables: list[dict[str, Any]]) -> DecodePlan:
    return decode_plan(parse_config({"app_id": "jvm", "storage": {"root": "/tmp/jvm"}, "tables": tables}))


def reference_decoded(records: list[Record], plan: DecodePlan) -> list[dict[str, Any]]:
    """The reference decoder's Decoded of each record, as a dict (``seq`` and ``txn`` too)."""
    out = []
    for topic, partition, offset, _key, value in records:
        reference = decode_record(topic, partition, offset, value, plan)._asdict()
        for nested in ("seq", "txn"):
            reference[nested] = reference[nested]._asdict() if reference[nested] is not None else None
        out.append(reference)
    return out


def on_jvm_path(
    spark: Any,
    records: list[Record],
    plan: DecodePlan,
    use: Callable[[DataFrame], T],
    schemas: dict[int, Any] | None = None,
    landable: Landable | None = None,
) -> T:
    """``use`` of ``records`` as the JVM path leaves them: decoded as the stream decodes them
    (:func:`decode_batch`, which leaves some to the reference), then made canonical as the merger reads
    them (:func:`canonical_frame`, which may too). A record the reference decoded carries its value; the
    JVM's do not. ``schemas`` and ``landable``, where given, are kept from one call to the next, as the
    stream keeps them from batch to batch."""
    schemas = {} if schemas is None else schemas
    batch = decode_batch(kafka_frame(spark, records), plan, schemas, landable=landable)
    try:
        texts = {schema_ref(i): s.text for i, s in schemas.items() if s is not None}
        made = canonical_frame(batch.frame, plan, texts)
        try:
            return use(made.frame)
        finally:
            made.release()
    finally:
        batch.release()


def decoded_both_ways(
    spark: Any,
    records: list[Record],
    plan: DecodePlan,
    schemas: dict[int, Any] | None = None,
    landable: Landable | None = None,
) -> list[tuple[Any, Any]]:
    """(JVM path's decoded struct as a dict, reference's Decoded as a dict) per record, by offset."""
    rows = on_jvm_path(spark, records, plan, lambda frame: frame.collect(), schemas, landable)
    jvm = {r["offset"]: r["_decoded"].asDict(recursive=True) for r in rows}
    return [(jvm[r[2]], reference) for r, reference in zip(records, reference_decoded(records, plan), strict=True)]


def _non_finite(token: str) -> tuple[str, str]:
    # NaN != NaN: a bare NaN/Infinity is compared as this marker, which no JSON value (a string "NaN"
    # included) equals.
    return ("non-finite number", token)


def parsed_row(row_json: str | None) -> Any:
    """``row_json`` as parsed JSON (None stays None), bare NaN/Infinity as comparable markers."""
    if row_json is None:
        return None
    return json.loads(row_json, parse_constant=_non_finite)


def comparable(decoded: dict[str, Any]) -> dict[str, Any]:
    """A decoded record with its ``row_json`` parsed: two decoders agree when these are equal."""
    return {**decoded, "row_json": parsed_row(decoded["row_json"])}


def assert_same(pairs: list[tuple[Any, Any]]) -> None:
    for jvm, reference in pairs:
        assert comparable(jvm) == comparable(reference), (jvm.get("table"), differences(jvm, reference))


def differences(jvm: dict[str, Any], reference: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Field -> (JVM's, reference's) for the fields where the two decoded records differ; for the
    row, the columns that differ."""
    a, b = comparable(jvm), comparable(reference)
    out: dict[str, tuple[Any, Any]] = {}
    for name in a:
        if a[name] == b[name]:
            continue
        if name == "row_json" and isinstance(a[name], dict) and isinstance(b[name], dict):
            columns = sorted(set(a[name]) | set(b[name]))
            differing = [c for c in columns if a[name].get(c) != b[name].get(c)]
            out[name] = ({c: _short(a[name].get(c)) for c in differing}, {c: _short(b[name].get(c)) for c in differing})
        else:
            out[name] = (_short(a[name]), _short(b[name]))
    return out


def _short(value: Any, limit: int = 200) -> Any:
    text = repr(value)
    return value if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def fast_share(spark: Any, records: list[Record], plan: DecodePlan, schemas: dict[int, Any] | None = None) -> float:
    """The share of ``records`` the JVM decodes itself (the rest it leaves to the reference)."""
    fast = on_jvm_path(spark, records, plan, lambda frame: frame.where(F.col("value").isNull()).count(), schemas)
    return fast / len(records)


# --- a table of every logical type the JVM decodes, and a good record of it ---------------------------

EDGE = SourceTable(
    "db",
    "edge",
    (
        Column("id", "int64"),
        Column("t8", "int8"),
        Column("t16", "int16"),
        Column("f", "float"),
        Column("d", "double"),
        Column("b", "boolean"),
        Column("s", "string"),
        Column("bin", "bytes"),
        Column(
            "dec", "bytes", "org.apache.kafka.connect.data.Decimal", {"scale": "3", "connect.decimal.precision": "38"}
        ),
        Column(
            "dec0", "bytes", "org.apache.kafka.connect.data.Decimal", {"scale": "0", "connect.decimal.precision": "20"}
        ),
        Column("day", "int32", "io.debezium.time.Date"),
        Column("ms", "int64", "io.debezium.time.Timestamp"),
        Column("us", "int64", "io.debezium.time.MicroTimestamp"),
        Column("ns", "int64", "io.debezium.time.NanoTimestamp"),
        Column("zoned", "string", "io.debezium.time.ZonedTimestamp"),
        Column("tm", "int64", "io.debezium.time.MicroTime"),
        Column("tn", "int64", "io.debezium.time.NanoTime"),
        Column("yr", "int32", "io.debezium.time.Year"),
        Column("js", "string", "io.debezium.data.Json"),
        Column("en", "string", "io.debezium.data.Enum"),
        Column("set", "string", "io.debezium.data.EnumSet"),
        Column("bits", "bytes", "io.debezium.data.Bits", {"length": "12"}),
    ),
)


def decimal_bytes(unscaled: int) -> str:
    length = max(1, (unscaled.bit_length() + 8) // 8)
    return base64.b64encode(unscaled.to_bytes(length, "big", signed=True)).decode()


def edge_value(i: int, **overrides: Any) -> bytes:
    raw = {
        "id": i,
        "t8": [-128, 127, 0][i % 3],
        "t16": [-32768, 32767, 1][i % 3],
        "f": [3.14, -1.5e-10, 1e30][i % 3],
        "d": [2.718281828459045, -1.7976931348623157e308, 0.1][i % 3],
        "b": i % 2 == 0,
        "s": ["héllo 😀", "", "[not json"][i % 3],
        "bin": base64.b64encode(bytes([i % 256, 0, 255])).decode(),
        "dec": decimal_bytes([10**38 - 1, -(10**38) + 1, -5][i % 3]),
        "dec0": decimal_bytes([2**64 - 1, 0, 255][i % 3]),
        "day": [-719162, 2932896, 0][i % 3],
        "ms": [-30610224000000, 1709210096789, 0][i % 3],
        "us": [253402300799999999, -1, 1][i % 3],
        "ns": [-1, -1001, 1_700_000_000_123_456_789][i % 3],
        "zoned": ["2020-06-01T12:00:00.1234Z", "1970-01-01T00:00:01Z", "2020-01-01T00:00:00.123456789-05:30"][i % 3],
        "tm": [-3020399000000, 3020399000000, -1][i % 3],
        "tn": [-1, 86_399_999_999_999, -1_000_001][i % 3],
        "yr": [1901, 2155, 0][i % 3],
        "js": ['{"a": [1, {"b": null}]}', "[]", "null"][i % 3],
        "en": ["a", "b", "c"][i % 3],
        "set": ["x,z", "", "y"][i % 3],
        "bits": base64.b64encode([b"\x01\x08", b"\xff\x0f", b"\x00"][i % 3]).decode(),
    }
    raw.update(overrides)
    message = envelope(EDGE, "c", None, None, pos=100 + i, ts_ms=1_700_000_000_000 + i)
    message["payload"]["after"] = raw
    return json.dumps(message, separators=COMPACT).encode()


EDGE_PLAN = [{"name": "db.edge", "topics": ["srv.db.edge"], "key": ["id"]}]
