"""Shared by the decoder tests: run records through the JVM decoder's path (``decode_batch``, which
leaves some records to the reference) and through the reference decoder (``decode_record``), and
compare the two record by record."""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import functions as F

from cdc_delta.config import parse_config
from cdc_delta.decode.batch import decode_batch
from cdc_delta.decode.jvm import FAST, envelopes, fast_decoded, probe
from cdc_delta.decode.plan import decode_plan
from cdc_delta.demo.batches import kafka_frame
from cdc_delta.events.envelope import DecodePlan, decode_record

Record = tuple[str, int, int, bytes | None, bytes | None]
"""(topic, partition, offset, key, value), as :func:`cdc_delta.demo.batches.kafka_frame` takes them."""

COMPACT = (",", ":")  # as Kafka Connect's JsonConverter writes
SPACED = (", ", ": ")  # as other producers may


def plan_for(tables: list[dict[str, Any]]) -> DecodePlan:
    return decode_plan(parse_config({"app_id": "jvm", "storage": {"root": "/tmp/jvm"}, "tables": tables}))


def reference_decoded(records: list[Record], plan: DecodePlan) -> list[dict[str, Any]]:
    """The reference decoder's Decoded of each record, as a dict (``seq`` too)."""
    out = []
    for topic, partition, offset, _key, value in records:
        reference = decode_record(topic, partition, offset, value, plan)._asdict()
        reference["seq"] = reference["seq"]._asdict() if reference["seq"] is not None else None
        out.append(reference)
    return out


def decoded_both_ways(
    spark: Any, records: list[Record], plan: DecodePlan, schemas: dict[int, Any] | None = None
) -> list[tuple[Any, Any]]:
    """(JVM path's decoded struct as a dict, reference's Decoded as a dict) per record, by offset."""
    batch = decode_batch(kafka_frame(spark, records), plan, schemas)
    try:
        jvm = {r["offset"]: r["_decoded"].asDict(recursive=True) for r in batch.frame.collect()}
    finally:
        batch.release()
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
        assert comparable(jvm) == comparable(reference)


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
    frame = kafka_frame(spark, records)
    env = envelopes(frame)
    fast = fast_decoded(env, plan, probe(frame, env, plan, schemas))
    return fast.where(F.col(FAST).isNotNull()).count() / len(records)
