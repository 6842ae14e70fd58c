"""cdc-delta's canonical-image function (``CanonicalImage``, ``jvm/decoder``) against the reference
decoder, value by value, called directly in the JVM (no Spark job, so thousands of values in seconds):
whatever row the function takes, it writes exactly as the reference decodes the record (the same
values, of the same JSON types); what it refuses goes to the reference, which decides. The values are
drawn for every column kind from every JSON kind and around every range's edges; a good value of each
kind must be taken (tests/decode/test_jvm.py counts the shares over whole batches)."""

from __future__ import annotations

import base64
import functools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc_delta.decode.canonical import _shape
from cdc_delta.decode.images import read_schema
from cdc_delta.demo.generator import Column, SourceTable, envelope
from cdc_delta.events.envelope import OK, decode_record
from tests.decode.decoding import COMPACT, EDGE, edge_value, plan_for

pytestmark = pytest.mark.spark

TABLE = SourceTable(
    "db",
    "kinds",
    (
        *EDGE.columns,
        Column("tms", "int32", "io.debezium.time.Time"),
        Column("dur", "int64", "io.debezium.time.MicroDuration"),
    ),
)
"""The table of every logical type the JVM decodes (test_jvm's), and the two it leaves out."""
TOPIC, NAME, REF = "srv.db.kinds", "db.kinds", "xref"
PLAN = plan_for([{"name": NAME, "topics": [TOPIC], "key": ["id"]}])
GOOD: dict[str, Any] = {**json.loads(edge_value(0))["payload"]["after"], "tms": 3_599_999, "dur": 2**63 - 1}
EDGES = [0, -1, 1, 2**7, -(2**7) - 1, 2**31, -(2**31) - 1, 2**53 + 1, 2**63 - 1, -(2**63), 2**63, 2**64, 10**30]
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(EDGES),
    st.integers(-(2**65), 2**65),
    st.integers(-3_000_000, 3_000_000),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e400, 0.5, 1e20, 5e-324, 2.0**1023 * 1.9999]),
    st.text(max_size=12),
    st.binary(max_size=17).map(lambda b: base64.b64encode(b).decode()),
    st.sampled_from(["AQID\n", "AQ==", "QR==", "", "a,b", ",", "2020-02-30T00:00:00Z", "0001-01-01T00:00:00+01:00"]),
    st.sampled_from(["9999-12-31T23:59:59-01:00", " 2020-06-01 12:00:00Z ", "2020-06-01T12:00:00+0530"]),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 3), max_size=2),
)


@functools.cache
def schema_text() -> str:
    return json.dumps(envelope(TABLE, "c", None, None)["schema"], separators=COMPACT)


@pytest.fixture(scope="module")
def function(spark: Any) -> Any:
    image = read_schema(schema_text())
    assert image is not None
    plans = {"routes": {f"{REF}\u0000{NAME}": 0}, "shapes": [_shape(image, ("id",))]}
    return spark.sparkContext._jvm.io.cdcdelta.decode.CanonicalImage(json.dumps(plans))


def typed(value: Any) -> Any:
    """Parsed JSON with every value's type beside it (so that 1, 1.0 and True differ)."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typed(v) for v in value]
    return (type(value).__name__, value)


def both_ways(function: Any, row: dict[str, Any], op: str | None = "c") -> tuple[Any, Any]:
    """(the function's row, the reference's decoded record) for ``row`` as the image of an ``op`` event."""
    message = envelope(TABLE, op or "c", None, None)
    message["payload"]["op"] = op
    message["payload"]["before" if op == "d" else "after"] = row
    payload = json.dumps(message["payload"], separators=COMPACT)
    value = f'{{"schema":{schema_text()},"payload":{payload}}}'.encode()
    made = function.call(bytearray(payload.encode()), op, REF, NAME)
    # Whatever it is given, it takes or refuses: it never fails (a failure, a bug of it, is logged once).
    assert not function.hasFailed(), (row, op)
    return (None if made is None else json.loads(made)), decode_record(TOPIC, 0, 0, value, PLAN)


def test_a_good_value_of_every_kind_is_taken_as_the_reference_decodes_it(function: Any) -> None:
    for op in ("c", "u", "r", "d"):
        made, reference = both_ways(function, GOOD, op)
        assert reference.status == OK, reference.reason
        assert made is not None, op
        assert typed(made) == typed(json.loads(reference.row_json))


@settings(
    deadline=None, derandomize=True, max_examples=1000, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(column=st.sampled_from([c.name for c in TABLE.columns]), value=VALUES, op=st.sampled_from(["c", "d", "t", None]))
def test_any_value_the_function_takes_it_writes_as_the_reference(
    function: Any, column: str, value: Any, op: Any
) -> None:
    made, reference = both_ways(function, {**GOOD, column: value}, op)
    if made is not None:
        assert reference.status == OK, (column, value, reference.reason)
        assert typed(made) == typed(json.loads(reference.row_json)), (column, value)
