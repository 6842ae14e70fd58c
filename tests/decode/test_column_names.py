"""Issue 25, "any column name": generated column names through the JVM decoder against the reference
decoder, and through the whole batch function.

A name holds anything a source can: braces (``{text}`` and ``{v}`` were placeholders of the JVM
decoder's SQL templates), backticks, quotes, dots, spaces, commas, semicolons, backslashes, ``$``, CJK,
emoji, combining marks, thousands of characters, several names differing only in case, and a schema
of 2,000 columns. The JVM path's ``_decoded`` struct must equal the reference decoder's for every
record (status, reason, table, op, ordering key, descriptor, and the row as parsed JSON), and the JVM
must decode those records itself: a name is no reason to leave a record to the reference (which would
make the equality prove nothing). Through ``BatchProcessor.process``, a table whose names Delta can
hold is merged with exactly those names and values; a table with a name Delta cannot hold stops alone
with a reason naming the column, its changes pending in the changelog, while the others are merged.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from cdc_delta import columns as C
from cdc_delta.changelog.status import pending_changes
from cdc_delta.config import parse_config
from cdc_delta.demo.batches import kafka_frame
from cdc_delta.demo.generator import Column, SourceTable, envelope
from cdc_delta.events.envelope import OK
from tests.batches import merging_processor
from tests.decode.decoding import COMPACT, Record, differences, on_jvm_path, plan_for, reference_decoded

pytestmark = pytest.mark.spark

TOPIC = "srv.db.names"
TABLE = "db.names"
PLAN = plan_for([{"name": TABLE, "topics": [TOPIC], "key": ["id"]}])

SPECIAL = [
    "{text}",
    "{v}",
    "{0}",
    "{",
    "}",
    "{{v}}",
    "`",
    "a`b",
    "``x``",
    "'",
    "it's",
    '"',
    'say "hi"',
    "a.b",
    ".",
    "a..b",
    "a b",
    " lead",
    "a,b",
    "a;b",
    "\\",
    "back\\slash",
    "\\u0041",
    "$",
    "$x",
    "${v}",
    "%s",
    "列名",
    "名前",
    "😀",
    "👩‍👩‍👧",
    "e\u0301",
    "\u0301",
    "(x)",
    "a=b",
    "a:b",
    "tab\there",
    "new\nline",
    "img",
    "r",
    "c0",
    "c1",
    "value",
    "payload",
    "schema",
    "op",
    "after",
    "_env",
    "_fast",
    "_cdc_unreadable",
]
NAME_CHARS = st.one_of(
    st.sampled_from(list("{}`'\".,; \\$()=:[]<>#@!?-_/*&%^|~+\t\n")),
    st.characters(codec="utf-8", categories=("Lu", "Ll", "Lo", "Nd", "Mn", "So")),
)
NAMES = st.one_of(
    st.sampled_from(SPECIAL),
    st.text(NAME_CHARS, min_size=1, max_size=12),
    st.builds(lambda c, n: c * n, NAME_CHARS, st.integers(300, 3000)),  # very long
)
DECIMAL = "org.apache.kafka.connect.data.Decimal"
TYPES = {  # a column of each type, and its values
    "string": (lambda n: Column(n, "string"), st.none() | st.text(max_size=8)),
    "int32": (lambda n: Column(n, "int32"), st.none() | st.integers(-(2**31), 2**31 - 1)),
    "int64": (lambda n: Column(n, "int64"), st.integers(-(2**63), 2**63 - 1)),
    "double": (lambda n: Column(n, "double"), st.floats(allow_nan=False, allow_infinity=False)),
    "boolean": (lambda n: Column(n, "boolean"), st.booleans()),
    "decimal": (
        lambda n: Column(n, "bytes", DECIMAL, {"scale": "2", "connect.decimal.precision": "10"}),
        st.integers(-(10**10) + 1, 10**10 - 1).map(lambda i: decimal.Decimal(i).scaleb(-2)),
    ),
    "date": (
        lambda n: Column(n, "int32", "io.debezium.time.Date"),
        st.integers(-36_500, 36_500).map(lambda d: dt.date(2000, 1, 1) + dt.timedelta(days=d)),
    ),
    "json": (lambda n: Column(n, "string", "io.debezium.data.Json"), st.sampled_from(['{"a": 1}', "[]", "x"])),
}

SETTINGS = settings(
    deadline=None,
    derandomize=True,
    print_blob=True,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: each example costs seconds of Spark
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)


@st.composite
def column_names(draw: st.DrawFn) -> list[str]:
    """Distinct names (never the key's), some with siblings that differ only in case."""
    names = draw(st.lists(NAMES, min_size=1, max_size=10, unique=True))
    for name in list(names):
        if draw(st.booleans()):
            names += [v for v in (name.upper(), name.lower(), name.swapcase()) if v not in names]
    return [n for n in dict.fromkeys(names) if n != "id"]


@st.composite
def named_batches(draw: st.DrawFn) -> tuple[SourceTable, list[dict[str, Any]], list[str]]:
    """A table of generated column names and types, and a few changes to it (insert, update, delete)."""
    names = draw(column_names())
    kinds = [draw(st.sampled_from(sorted(TYPES))) for _ in names]
    columns = [TYPES[k][0](n) for n, k in zip(names, kinds, strict=True)]
    table = SourceTable("db", "names", (Column("id", "int64"), *columns))
    rows = []
    for key in range(draw(st.integers(1, 3))):
        rows.append({"id": key, **{n: draw(TYPES[k][1]) for n, k in zip(names, kinds, strict=True)}})
    ops = [draw(st.sampled_from("cud")) for _ in rows]
    return table, rows, ops


def records_of(table: SourceTable, rows: list[dict[str, Any]], ops: list[str]) -> list[Record]:
    out: list[Record] = []
    for offset, (row, op) in enumerate(zip(rows, ops, strict=True)):
        before, after = (row, None) if op == "d" else (None, row)
        message = envelope(table, op, before, after, server="srv", pos=100 + offset)
        out.append((TOPIC, 0, offset, b"k", json.dumps(message, separators=COMPACT).encode()))
    return out


def assert_decoded_as_the_reference(spark: Any, table: SourceTable, records: list[Record]) -> None:
    rows = on_jvm_path(spark, records, PLAN, lambda frame: frame.collect())
    jvm = {r["offset"]: r["_decoded"].asDict(recursive=True) for r in rows}
    left_to_reference = any(r["value"] is not None for r in rows)  # records the JVM did not decode itself
    reference = reference_decoded(records, PLAN)
    names = [c.name for c in table.columns]
    problems = []
    for (_, _, offset, _, _), expected in zip(records, reference, strict=True):
        if expected["status"] != OK:
            problems.append(f"record {offset}: the reference does not take it: {expected['reason']}")
        diff = differences(jvm[offset], expected)
        if diff:
            problems.append(f"record {offset}: JVM path and reference differ (JVM's, reference's): {diff}")
    if left_to_reference:
        problems.append("the JVM left records of this schema to the reference decoder")
    shown = [n if len(n) < 40 else f"{n[:10]}...({len(n)} chars)" for n in names]
    assert not problems, f"columns {shown}:\n" + "\n".join(problems)


@settings(SETTINGS, max_examples=15)
@given(batch=named_batches())
def test_any_column_name_decodes_in_the_jvm_as_the_reference_does(
    spark: Any, batch: tuple[SourceTable, list[dict[str, Any]], list[str]]
) -> None:
    table, rows, ops = batch
    assert_decoded_as_the_reference(spark, table, records_of(table, rows, ops))


def test_every_special_name_in_one_schema(spark: Any) -> None:
    """Every name of the list above at once, each twice: as a string and as an int column."""
    names = list(SPECIAL)
    columns = [Column(n, "string") for n in names] + [Column(f"{n}#int", "int32") for n in names]
    table = SourceTable("db", "names", (Column("id", "int64"), *columns))
    rows = [{"id": i, **{n: f"v{i}-{n}" for n in names}, **{f"{n}#int": i for n in names}} for i in range(2)]
    assert_decoded_as_the_reference(spark, table, records_of(table, rows, ["c", "d"]))


def test_a_schema_of_2000_columns(spark: Any) -> None:
    names = [f"{SPECIAL[i % len(SPECIAL)]}#{i}" if i % 3 else f"c{i}" for i in range(2000)]
    kinds = ["string", "int64", "double", "decimal"]
    columns = [TYPES[kinds[i % 4]][0](n) for i, n in enumerate(names)]
    table = SourceTable("db", "names", (Column("id", "int64"), *columns))
    values = ["text", 2**40, 0.25, decimal.Decimal("-12.34")]
    rows = [{"id": key, **{n: values[i % 4] for i, n in enumerate(names)}} for key in range(2)]
    assert_decoded_as_the_reference(spark, table, records_of(table, rows, ["c", "u"]))


# --- through the batch function ------------------------------------------------------------------------

HOLDABLE = {  # tables whose names Delta holds (without column mapping), by the characters they try
    "db.quoted": ["a.b", "it's", 'say"hi"', "$x", "back\\slash", "列名", "😀", "e\u0301", "x" * 300],
}
NOT_HOLDABLE = {  # tables with a name Delta cannot hold, and that name
    "db.spaced": "a b",
    "db.comma": "a,b",
    "db.brace": "{text}",
    "db.cased": "Name",  # beside "name": Delta's names ignore case
    "db.backticks": "a`b",  # Delta holds it, but its MERGE cannot address it
}


def name_table(name: str, columns: list[str]) -> SourceTable:
    return SourceTable("db", name.split(".")[1], (Column("id", "int64"), *[Column(c, "string") for c in columns]))


def change(table: SourceTable, offset: int, key: int, op: str, tag: str) -> Record:
    row = {c.name: f"{tag}:{c.name}" for c in table.columns[1:]}
    message = envelope(table, op, None, {"id": key, **row}, server="srv", pos=100 + offset)
    return (f"srv.db.{table.table}", 0, offset, b"k", json.dumps(message, separators=COMPACT).encode())


def test_names_delta_holds_land_and_a_name_it_cannot_stops_only_its_table(spark: Any, tmp_path: Path) -> None:
    tables = {name: name_table(name, columns) for name, columns in HOLDABLE.items()}
    tables.update({name: name_table(name, [column, "plain"]) for name, column in NOT_HOLDABLE.items()})
    tables["db.cased"] = name_table("db.cased", ["Name", "name"])
    config = parse_config(
        {
            "app_id": "names",
            "storage": {"root": str(tmp_path)},
            "merge": {"max_delay_seconds": 0},
            "tables": [{"name": n, "topics": [f"srv.db.{t.table}"], "key": ["id"]} for n, t in tables.items()],
        }
    )
    processor = merging_processor(spark, config)
    first = [change(t, i, 1, "c", "v1") for i, t in enumerate(tables.values())]
    second = [
        change(t, 100 + key, key, "u" if key == 1 else "c", "v2")
        for i, t in enumerate(tables.values())
        for key in (1, 2)
    ]
    results = [processor.process(kafka_frame(spark, batch), batch_id) for batch_id, batch in enumerate([first, second])]

    problems = []
    for result, size in zip(results, (1, 2), strict=True):
        expected = (len(tables) * size, len(tables) * size, 0)
        if (result.rows_in, result.landed, result.dead_lettered) != expected:
            problems.append(f"(in, landed, dead-lettered) not {expected}: {result.summary()}")
    for name, columns in HOLDABLE.items():
        df = spark.read.format("delta").load(config.storage.table_path(config.table(name)))
        business = [c for c in df.columns if not c.startswith(C.PREFIX)]
        if business != ["id", *columns]:
            problems.append(f"{name}: columns {business}, expected {['id', *columns]}")
            continue
        rows = sorted(tuple(r[: len(business)]) for r in df.collect())
        expected_rows = [(key, *[f"v2:{c}" for c in columns]) for key in (1, 2)]
        if rows != expected_rows:
            problems.append(f"{name}: rows {rows}, expected {expected_rows}")
    stopped = {t.table: t.error for t in results[0].merge.tables if t.error}
    pending = pending_changes(config, {name: -1 for name in NOT_HOLDABLE})
    for name, column in NOT_HOLDABLE.items():
        if repr(column) not in (stopped.get(name) or ""):
            problems.append(f"{name}: not stopped with a reason naming the column {column!r}: {stopped.get(name)}")
        if pending.get(name, {}).get("pending") != 3:
            problems.append(f"{name}: {pending.get(name)} changes pending, expected all 3")
    stray = sorted(set(stopped) - set(NOT_HOLDABLE))
    if stray:
        problems.append(f"{stray} were stopped: {[stopped[n] for n in stray]}")
    assert not DeltaTable.isDeltaTable(spark, config.storage.dead_letters), "something was dead-lettered"
    assert not problems, "\n".join(problems)
