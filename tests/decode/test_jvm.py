"""The JVM decoder against the reference decoder (decode_record), record by record: the same status,
reason, table, op, source, ordering key and schema descriptor, and the same canonical values. On
records a real Debezium connector wrote, on edge values of every logical type the JVM decodes, and
on records it must leave to the reference."""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from cdc_delta.decode import batch as batch_module
from cdc_delta.decode import jvm
from cdc_delta.decode.batch import decode_batch
from cdc_delta.decode.canonical import made_canonical
from cdc_delta.decode.images import schema_ref
from cdc_delta.decode.jvm import SCHEMA_TEXT, Landable, envelopes, probe
from cdc_delta.demo.batches import kafka_frame
from cdc_delta.demo.generator import Column, SourceTable, envelope
from tests.decode.decoding import (
    COMPACT,
    EDGE,
    EDGE_PLAN,
    SPACED,
    Record,
    assert_same,
    decimal_bytes,
    decoded_both_ways,
    edge_value,
    fast_share,
    plan_for,
)

pytestmark = pytest.mark.spark

CAPTURE = Path(__file__).parents[1] / "events" / "debezium" / "mariadb-3.5.0.jsonl"


def without(value: str | None, column: str, separators: tuple[str, str] = COMPACT) -> bytes | None:
    """A captured record without one column (schema and images)."""
    if value is None:
        return None
    message = json.loads(value)
    for part in message.get("schema", {}).get("fields", []):
        if part.get("field") in ("before", "after"):
            part["fields"] = [f for f in part["fields"] if f["field"] != column]
    for image in ("before", "after"):
        if isinstance((message.get("payload") or {}).get(image), dict):
            message["payload"][image].pop(column, None)
    return json.dumps(message, separators=separators).encode()


@pytest.mark.parametrize("separators", [COMPACT, SPACED], ids=["compact", "spaced"])
def test_records_of_a_real_connector_decode_as_the_reference_does(spark: Any, separators: tuple[str, str]) -> None:
    """Compact records (as the JsonConverter writes them) are cut at their payload key and decoded in the
    JVM; others are parsed whole and left to the reference (their image could not be landed as written):
    both decode as the reference does."""
    lines = [json.loads(line) for line in CAPTURE.read_text(encoding="utf-8").splitlines()]
    # DECIMAL(65,30) leaves its table to the reference decoder: without it, the JVM decodes the rest.
    records: list[Record] = [
        (r["topic"], 0, i, None, without(r["value"], "c_decimal65", separators)) for i, r in enumerate(lines)
    ]
    plan = plan_for(
        [
            {"name": "e2e.wide", "topics": ["cap.e2e.wide"], "key": ["id"]},
            {"name": "e2e.temp", "topics": ["cap.e2e.temp"], "key": ["id"]},
        ]
    )
    assert_same(decoded_both_ways(spark, records, plan))
    data = [r for r, line in zip(records, lines, strict=True) if line["topic"] == "cap.e2e.wide"]
    # Compact: all but the TRUNCATE. Spaced: the two tombstones only.
    assert fast_share(spark, data, plan) == (18 / 19 if separators == COMPACT else 2 / 19)


DECIMAL = "org.apache.kafka.connect.data.Decimal"


def test_edge_values_of_every_logical_type(spark: Any) -> None:
    records: list[Record] = [("srv.db.edge", i % 2, i, b"k", edge_value(i)) for i in range(12)]
    plan = plan_for(EDGE_PLAN)
    assert_same(decoded_both_ways(spark, records, plan))
    assert fast_share(spark, records, plan) == 1.0


def test_schemas_read_once_are_kept_across_batches(spark: Any) -> None:
    plan = plan_for(EDGE_PLAN)
    schemas: dict[int, Any] = {}
    first: list[Record] = [("srv.db.edge", 0, i, b"k", edge_value(i)) for i in range(3)]
    assert_same(decoded_both_ways(spark, first, plan, schemas))
    assert len(schemas) == 1 and all(schemas.values())
    # A later batch: the same schema is not read again, a new one (a column dropped) is read.
    changed = without(edge_value(4).decode(), "t8")
    later: list[Record] = [*first, ("srv.db.edge", 0, 3, b"k", changed)]
    known = dict(schemas)
    assert_same(decoded_both_ways(spark, later, plan, schemas))
    assert len(schemas) == 2 and {k: schemas[k] for k in known} == known
    # What the cache says is what decodes: a schema known as undecodable leaves its records to the reference.
    refused = dict.fromkeys(schemas)
    assert_same(decoded_both_ways(spark, later, plan, refused))
    assert fast_share(spark, later, plan, refused) == 0.0


def test_a_new_schema_is_read_in_the_first_pass_and_a_schema_met_before_is_not_kept(spark: Any) -> None:
    """The first pass keeps the text of a schema not met before, so that the probe reads it without
    reading the batch again (given an empty batch to read it again from, it still knows the schema);
    the records of a schema met before keep none; a schema met before but never read (met on records no
    table routed) is read again from the batch, one record of it. Only the first record of a schema in a
    task keeps its text."""
    plan = plan_for(EDGE_PLAN)
    frame = kafka_frame(spark, [("srv.db.edge", 0, i, b"k", edge_value(i)) for i in range(3)])
    nothing = frame.limit(0)
    # One task (over two, each would keep a text), each record read once (checkpointed, as decode_batch
    # does).
    env = envelopes(frame.coalesce(1)).localCheckpoint()
    assert env.where(F.col(SCHEMA_TEXT).isNotNull()).count() == 1
    schemas: dict[int, Any] = {}
    met: set[int] = set()
    landable = probe(nothing, env, plan, schemas, met)
    assert len(landable) == 1 and met == set(schemas) and all(schemas.values())
    assert envelopes(frame, met).where(F.col(SCHEMA_TEXT).isNotNull()).count() == 0
    unread: dict[int, Any] = {}
    assert probe(nothing, envelopes(frame, met), plan, unread, met) == {} == unread
    assert probe(frame, envelopes(frame, met), plan, unread, met) == landable
    assert {i: s.text for i, s in unread.items()} == {i: s.text for i, s in schemas.items()}


def test_a_record_reads_the_same_after_a_record_of_the_same_head(spark: Any) -> None:
    """The reader takes a record's head as the previous record's where its bytes start with it and the
    payload key follows: each record, read in one task after the others, reads as it does alone - where
    its head is the same, where its bytes start with the same head and go on otherwise (another key
    before the payload's; no payload; no closing brace; too short), and after those."""
    value = edge_value(0)
    head, payload = value.split(b',"payload":', 1)
    values = [
        value,
        edge_value(1),
        head + b',"x":1,"payload":' + payload,  # another key after the schema: the head is longer
        head + b',"payload":' + payload + b" ",  # not ending with its closing brace
        head + b',"payload":}',  # an empty payload
        head + b"}",  # no payload key
        head,
        without(edge_value(2).decode(), "t8"),  # another schema
        edge_value(3),
        None,
        edge_value(4),
    ]
    records: list[Record] = [("srv.db.edge", 0, i, b"k", v) for i, v in enumerate(values)]
    jvm.register_reader(spark)
    fields = ("head_bytes", "schema_id", "payload_text", "payload")

    def read(frame: Any) -> list[Any]:
        rows = frame.select("offset", F.call_function(jvm.READER, F.col("value")).alias("r")).collect()
        return [(r["offset"], None if r["r"] is None else tuple(r["r"][f] for f in fields)) for r in rows]

    together = sorted(read(kafka_frame(spark, records).coalesce(1)))
    alone = sorted(row for record in records for row in read(kafka_frame(spark, [record])))
    assert together == alone
    assert {offset for offset, row in together if row is None} == {3, 5, 6, 9}  # not shaped, or a tombstone


def test_a_schema_is_kept_from_its_first_record_with_a_payload(spark: Any) -> None:
    """A task's first record of a schema whose payload the reader refuses (left to the reference decoder,
    and to no table in the probe) does not take the schema's one kept text from the records after it."""
    plan = plan_for(EDGE_PLAN)
    refused = edge_value(0)[:-1] + b" x}"  # shaped, but not one JSON object after the payload key
    records: list[Record] = [("srv.db.edge", 0, 0, b"k", refused)]
    records += [("srv.db.edge", 0, i, b"k", edge_value(i)) for i in (1, 2)]
    frame = kafka_frame(spark, records)
    env = envelopes(frame.coalesce(1)).localCheckpoint()
    kept = env.where(F.col(SCHEMA_TEXT).isNotNull()).select("offset").collect()
    assert [r["offset"] for r in kept] == [1]
    assert len(probe(frame.limit(0), env, plan, {}, set())) == 1


def test_a_batch_reads_its_new_schemas_in_its_first_pass(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``decode_batch`` over a real connector's records (its table's three schemas, two ALTERs apart, and
    Debezium's own records), in two partitions (two tasks): every schema of the batch is read from its
    first pass, none by reading the batch again, so the first pass is read once before its checkpoint (a
    second reading would lose its flags, and each schema would cost another read of the whole batch
    from Kafka)."""
    lines = [json.loads(line) for line in CAPTURE.read_text(encoding="utf-8").splitlines()]
    records: list[Record] = [
        (r["topic"], i % 2, i, None, None if r["value"] is None else r["value"].encode()) for i, r in enumerate(lines)
    ]
    plan = plan_for([{"name": "e2e.wide", "topics": ["cap.e2e.wide"], "key": ["id"]}])
    heads = {r["value"].split(',"payload":')[0] for r in lines if r["topic"] == "cap.e2e.wide" and r["value"]}
    read_again: list[set[tuple[str, int, int]]] = []
    reread = jvm._schema_texts

    def spied(batch: Any, wanted: set[tuple[str, int, int]]) -> dict[int, str | None]:
        read_again.append(set(wanted))
        return reread(batch, wanted)

    monkeypatch.setattr(jvm, "_schema_texts", spied)
    schemas: dict[int, Any] = {}
    decode_batch(kafka_frame(spark, records), plan, schemas, set()).release()
    assert read_again == [set()] and len(schemas) == len(heads) == 3


def test_a_batch_of_pairs_landed_before_is_decoded_in_one_pass(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The (source table, schema) pairs landed in earlier batches are decoded in a batch's first pass: a
    batch of only those (a tombstone, a record left to the reference and one of a table no entry routes
    beside them) is decoded in that one pass; a new schema among them takes a second pass over the records
    the first left. Every record as the reference decodes it."""
    passes: list[int] = []
    decoded = batch_module.fast_decoded

    def spied(env: Any, landable: Any, keep_left: bool = False) -> Any:
        passes.append(len(landable))
        return decoded(env, landable, keep_left)

    monkeypatch.setattr(batch_module, "fast_decoded", spied)
    plan = plan_for(EDGE_PLAN)
    schemas: dict[int, Any] = {}
    landable: Landable = {}
    first: list[Record] = [("srv.db.edge", i % 2, i, b"k", edge_value(i)) for i in range(4)]
    assert_same(decoded_both_ways(spark, first, plan, schemas, landable))
    assert passes == [0, 1] and list(landable.values()) == ["db.edge"]  # nothing landed before: two passes
    spaced = json.dumps(json.loads(edge_value(6)), separators=SPACED).encode()
    steady: list[Record] = [("srv.db.edge", i % 2, i, b"k", edge_value(i)) for i in range(4, 6)]
    steady += [("srv.db.edge", 0, 6, b"k", spaced), ("srv.db.edge", 1, 7, b"k", None)]
    steady += [("srv.db.other", 0, 8, b"k", edge_value(8))]
    passes.clear()
    assert_same(decoded_both_ways(spark, steady, plan, schemas, landable))
    assert passes == [1] and len(landable) == 1
    changed: list[Record] = [("srv.db.edge", i % 2, i, b"k", without(edge_value(i).decode(), "t8")) for i in (9, 10)]
    changed += [("srv.db.edge", 0, 11, b"k", edge_value(11))]
    passes.clear()
    assert_same(decoded_both_ways(spark, changed, plan, schemas, landable))
    assert passes == [1, 2] and len(landable) == 2 == len(schemas)


@pytest.mark.parametrize(
    "overrides",
    [
        {"t8": 128},  # out of range for tinyint
        {"t16": "12"},  # a string where a number belongs
        {"f": True},
        {"bin": "not base64!"},
        {"dec": decimal_bytes(10**38)},  # 39 digits in a decimal(38,3)
        {"day": 2932897},  # past 9999-12-31
        {"zoned": "2020-02-30T00:00:00Z"},
        {"zoned": "yesterday"},
        {"id": None},  # a null key
        {"unknown": 1},  # a field the schema does not name
        {"s": {"nested": True}},  # an object in a string column
        {"set": ["x"]},
        {"d": 10**400},  # an integer past a double's range: read as Infinity, refused by the reference
        {"bin": base64.b64encode(b"abc").decode() + "\n"},  # base64 refused with a newline after it
        {"dec": decimal_bytes(5) + "\n"},
        {"zoned": "0001-01-01T00:00:00+01:00"},  # before year 1 in UTC
        {"zoned": "9999-12-31T23:59:59-01:00"},  # past 9999 in UTC
        {"tm": -(2**63)},  # abs() of it failed the merge; the reference formats it
    ],
)
def test_values_the_jvm_does_not_take_go_to_the_reference(spark: Any, overrides: dict[str, Any]) -> None:
    records: list[Record] = [
        ("srv.db.edge", 0, 0, b"k", edge_value(0, **overrides)),
        ("srv.db.edge", 0, 1, b"k", edge_value(1)),
    ]
    plan = plan_for(EDGE_PLAN)
    assert_same(decoded_both_ways(spark, records, plan))
    assert fast_share(spark, records, plan) == 0.5


HEARTBEAT = "io.debezium.connector.common.Heartbeat"


def test_records_left_to_the_reference(spark: Any) -> None:
    schemaless = json.dumps(envelope(EDGE, "c", None, {"id": 1}, with_schema=False)).encode()
    truncate = json.dumps(envelope(EDGE, "t", None, None)).encode()
    heartbeat = json.dumps({"schema": {"name": HEARTBEAT}, "payload": {"ts_ms": 5}}).encode()
    not_utf8 = edge_value(6).replace(b'"s":"', b'"s":"\xff', 1)
    # A key named payload inside the schema: the record is cut there, its payload unreadable.
    decoy = json.loads(edge_value(7))
    decoy["schema"]["fields"][1]["parameters"] = {"x": "1", "payload": "{}"}
    decoy_value = json.dumps(decoy, separators=COMPACT).encode()
    # Not UTF-8 in the schema, of a record the JVM could otherwise decode: the JVM checks each schema's
    # head once and each record's payload, so this schema's records go to the reference.
    bad_head = edge_value(8).replace(b'"name":"', b'"name":"\xff', 1)
    assert bad_head != edge_value(8) and bad_head.index(b"\xff") < bad_head.index(b',"payload":')
    records: list[Record] = [
        ("srv.db.edge", 0, 0, b"k", b"{not json"),
        ("srv.db.edge", 0, 1, b"k", None),
        ("srv.db.edge", 0, 2, b"k", schemaless),
        ("srv.db.edge", 0, 3, b"k", truncate),
        ("srv.other.x", 0, 4, b"k", edge_value(4)),  # no table claims it
        ("srv.db.edge", 0, 5, b"k", heartbeat),
        ("srv.db.edge", 0, 6, b"k", not_utf8),
        ("srv.db.edge", 0, 7, b"k", decoy_value),
        ("srv.db.edge", 0, 8, b"k", bad_head),
        ("srv.db.edge", 0, 9, b"k", edge_value(9)),
    ]
    assert_same(decoded_both_ways(spark, records, plan_for(EDGE_PLAN)))


def with_payload(i: int, change: Any) -> bytes:
    """``edge_value(i)`` with its payload rewritten by ``change`` (text in, text out), schema untouched."""
    value = edge_value(i)
    cut = value.index(b',"payload":') + len(b',"payload":')
    return value[:cut] + change(value[cut:-1].decode()).encode() + b"}"


def test_the_envelope_reader_takes_what_it_reads_exactly_and_leaves_the_rest(spark: Any) -> None:
    """A record written as the JsonConverter writes it is read by the envelope reader (jvm/decoder) even
    with spaces inside its payload; a payload it does not read exactly (a duplicate key, an op that is
    not a string, a position that is a fraction, an image that is not an object, a second value after
    it, a byte-order mark before it) goes to the reference decoder. Every one decodes as the reference does."""
    spaced = with_payload(0, lambda p: json.dumps(json.loads(p), separators=(", ", ": ")))
    taken = [("srv.db.edge", 0, 0, b"k", spaced), ("srv.db.edge", 0, 1, b"k", edge_value(1))]
    left = [
        with_payload(2, lambda p: p.replace('"op":"c"', '"op":"c","op":"c"', 1)),
        with_payload(3, lambda p: p.replace('"op":"c"', '"op":1', 1)),
        with_payload(4, lambda p: p.replace('"pos":104', '"pos":104.5', 1)),
        with_payload(5, lambda p: p.replace('"before":null', '"before":[]', 1)),
        with_payload(6, lambda p: p + " {}"),
        with_payload(7, lambda p: "\ufeff" + p),  # a BOM Jackson would skip, where Python's parser refuses it
    ]
    assert all(b'"pos":10' in edge_value(i) and b'"before":null' in edge_value(i) for i in range(8))
    records: list[Record] = taken + [("srv.db.edge", 0, i, b"k", v) for i, v in enumerate(left, start=2)]
    plan = plan_for(EDGE_PLAN)
    assert_same(decoded_both_ways(spark, records, plan))
    assert fast_share(spark, records, plan) == 2 / 8


def test_times_at_the_ends_of_a_bigint_decode_as_the_reference_does(spark: Any) -> None:
    """Floor division of the smallest bigint (a NanoTime, a NanoTimestamp) overflowed where the
    remainder was subtracted first, an ANSI error that failed the merge."""
    ends = [-(2**63), 2**63 - 1]
    records: list[Record] = [("srv.db.edge", 0, i, b"k", edge_value(i, tn=v, ns=v, us=v)) for i, v in enumerate(ends)]
    plan = plan_for(EDGE_PLAN)
    assert_same(decoded_both_ways(spark, records, plan))
    assert fast_share(spark, records, plan) == 1.0


def test_a_date_the_reference_reads_as_utc_midnight(spark: Any) -> None:
    values = [dt.date(1000, 1, 1), dt.date(2024, 2, 29)]
    records: list[Record] = [
        ("srv.db.edge", 0, i, b"k", edge_value(i, day=(d - dt.date(1970, 1, 1)).days)) for i, d in enumerate(values)
    ]
    assert_same(decoded_both_ways(spark, records, plan_for(EDGE_PLAN)))


def test_tables_of_one_shape_share_expressions_and_each_keeps_its_own_key(spark: Any) -> None:
    """Tables whose images have one shape (shards, generated estates) are decoded by one set of
    expressions; a table of that shape with another key is checked by its own key."""
    from cdc_delta.demo.generator import ORDER_COLUMNS, ChangeGenerator, topic_of

    same = [SourceTable("db", f"t{i}", ORDER_COLUMNS) for i in range(3)]
    plain_status = tuple(Column("status", "string") if c.name == "status" else c for c in ORDER_COLUMNS)
    other = SourceTable("db", "other", plain_status)  # another shape: status is no enum there
    changes = list(ChangeGenerator((*same, other), seed=5).changes(60))
    records: list[Record] = [(c.topic, 0, i, c.key, c.value) for i, c in enumerate(changes) if c.value]
    for i, table in enumerate((same[0], same[2], other)):  # a null customer: in the key of t2 only
        created = next(json.loads(c.value) for c in changes if c.topic == topic_of(table) and c.value)
        created["payload"].update(op="c", before=None)
        created["payload"]["after"] = {**created["payload"]["after"], "id": 999, "customer": None}
        records.append((topic_of(table), 0, len(changes) + i, b"k", json.dumps(created).encode()))
    keys = {"t0": ["id"], "t1": ["id"], "t2": ["id", "customer"], "other": ["id"]}
    plan = plan_for([{"name": f"db.{t}", "topics": [f"dbserver1.db.{t}"], "key": k} for t, k in keys.items()])
    pairs = decoded_both_ways(spark, records, plan)
    assert_same(pairs)
    dead = {(jvm["table"], jvm["reason"]) for jvm, _ in pairs if jvm["status"] == "dead"}
    assert dead == {("db.t2", "key column(s) ['customer'] missing or null in the 'after' image")}
    assert fast_share(spark, [r for r in records if r[2] < len(changes)], plan) == 1.0
    frame = kafka_frame(spark, records)
    schemas: dict[int, Any] = {}
    landable = probe(frame, envelopes(frame), plan, schemas)
    images = {(schema_id, table): schemas[schema_id] for (_, schema_id), table in landable.items()}
    assert len({image.shape for image in images.values()}) == 2 < len(images)  # a schema per table, 2 shapes


MISSING = object()


def with_source(i: int, **fields: Any) -> bytes:
    """``edge_value(i)`` with source fields set (MISSING: removed)."""

    def change(text: str) -> str:
        payload = json.loads(text)
        for name, value in fields.items():
            if value is MISSING:
                payload["source"].pop(name)
            else:
                payload["source"][name] = value
        return json.dumps(payload, separators=COMPACT)

    return with_payload(i, change)


def test_source_positions_the_reader_orders_as_the_reference_and_those_it_leaves(spark: Any) -> None:
    """The reader makes the ordering key's source fields only where it reads them exactly as
    ``events.ordering`` does: plain integers (as numbers or text), GTIDs and file names in ASCII. Text
    that Python's and Java's patterns read apart (non-ASCII digits, separators only Python counts as
    white space), a missing ts_ms, integers written otherwise or out of range go to the reference."""
    taken = [
        with_source(0, gtid="0-1-42"),
        with_source(1, gtid=" 0-1-43\t"),
        with_source(2, gtid="3E11FA47-71CA-11E1-9E33-C80AA9429562:23"),  # MySQL's: 0
        with_source(3, file="no-digits"),
        with_source(4, file="mysql-bin.000123\r\n", pos="-0", row="007"),
        with_source(5, pos=None, row=MISSING),
        with_source(6, pos=-(2**63), row=2**31 - 1, ts_ms=str(2**63 - 1)),
    ]
    left = [
        with_source(7, gtid="0-1-\u0661\u0662"),  # Arabic-Indic digits: Python's \d reads 12
        with_source(8, gtid="0-1-44\x1c"),  # white space to Python, not to Java
        with_source(9, file="mysql-bin.\u0663"),
        with_source(10, ts_ms=MISSING),
        with_source(11, ts_ms=None),
        with_source(12, pos="+5"),
        with_source(13, pos=" 5"),
        with_source(14, pos="5\n"),
        with_source(15, row=2**31),
        with_source(16, pos=2**63),
    ]
    records: list[Record] = [("srv.db.edge", 0, i, b"k", v) for i, v in enumerate(taken + left)]
    plan = plan_for(EDGE_PLAN)
    assert_same(decoded_both_ways(spark, records, plan))
    assert fast_share(spark, records, plan) == len(taken) / len(records)


def with_transaction(i: int, block: Any) -> bytes:
    """``edge_value(i)`` with Debezium's transaction block ``block`` (MISSING: none)."""

    def change(text: str) -> str:
        payload = json.loads(text)
        if block is not MISSING:
            payload["transaction"] = block
        return json.dumps(payload, separators=COMPACT)

    return with_payload(i, change)


def test_transaction_blocks_the_reader_reads_as_the_reference_and_those_it_leaves(spark: Any) -> None:
    """A change's transaction block (``provide.transaction.metadata``) is read by the reader where it is
    as Debezium writes it (or null, or absent); one it does not read exactly goes to the reference, which
    lands the change without a transaction. Every one decodes as the reference does."""
    block = {"id": "0-1-30", "total_order": 2, "data_collection_order": 1}
    taken = [
        with_transaction(0, block),
        with_transaction(1, None),
        with_transaction(2, MISSING),
        with_transaction(3, {**block, "id": "mysql-bin.000003:1234", "extra": [1, {"a": 2}]}),
        with_transaction(4, {**block, "total_order": 2**63 - 1}),
    ]
    left = [
        with_transaction(5, {**block, "id": 7}),
        with_transaction(6, {**block, "total_order": 0}),
        with_transaction(7, {**block, "total_order": 1.0}),
        with_transaction(8, {**block, "data_collection_order": "1"}),
        with_transaction(9, {"id": "0-1-30", "total_order": 1}),
        with_transaction(10, {**block, "total_order": 2**63}),
        with_transaction(11, "0-1-30"),
    ]
    records: list[Record] = [("srv.db.edge", 0, i, b"k", v) for i, v in enumerate(taken + left)]
    plan = plan_for(EDGE_PLAN)
    pairs = decoded_both_ways(spark, records, plan)
    assert_same(pairs)
    assert [jvm["txn"] for jvm, _ in pairs] == [
        block,
        None,
        None,
        {**block, "id": "mysql-bin.000003:1234"},
        {**block, "total_order": 2**63 - 1},
        *[None] * len(left),
    ]
    assert fast_share(spark, records, plan) == len(taken) / len(records)


def test_a_canonical_function_the_jvm_cannot_load_says_how_to_build_it(spark: Any, monkeypatch: Any) -> None:
    from cdc_delta.decode import canonical
    from cdc_delta.exceptions import SparkSetupError

    monkeypatch.setattr(canonical, "CANONICAL_CLASS", "io.cdcdelta.decode.NotBuilt")
    with pytest.raises(SparkSetupError, match=r"NotBuilt\) is not on Spark's classpath: run `make setup`"):
        canonical._canonical_image(spark, '{"routes": {}, "shapes": []}')


def with_schema(i: int, change: Any, op: str = "c") -> bytes:
    """``edge_value(i)`` (its image moved to ``before`` for a delete) with its Connect schema changed by
    ``change`` (the envelope schema's fields in place)."""
    message = json.loads(edge_value(i))
    if op == "d":
        message["payload"].update(op="d", before=message["payload"]["after"], after=None)
    change(message["schema"]["fields"])
    return json.dumps(message, separators=COMPACT).encode()


def test_schemas_whose_images_are_left_to_the_reference(spark: Any) -> None:
    """A schema without a ``before`` struct (the reference types a delete's image by its values, not by
    ``after``'s fields) and a schema naming a column with a number (not a name the JVM's plans hold):
    their records are decoded as the reference decodes them, and nothing fails."""

    def no_before(fields: list[dict[str, Any]]) -> None:
        fields[:] = [f for f in fields if f.get("field") != "before"]

    def numbered(fields: list[dict[str, Any]]) -> None:
        for image in (f for f in fields if f.get("field") in ("before", "after")):
            next(c for c in image["fields"] if c["field"] == "s")["field"] = 5

    values = [with_schema(0, no_before), with_schema(1, no_before, "d"), with_schema(2, numbered)]
    records: list[Record] = [("srv.db.edge", 0, i, b"k", v) for i, v in enumerate(values)]
    plan = plan_for(EDGE_PLAN)
    assert_same(decoded_both_ways(spark, records, plan))
    assert fast_share(spark, records, plan) == 0.0


def test_a_change_whose_schema_ref_is_not_among_the_pairs_fails_the_query(spark: Any) -> None:
    """The rows left to the reference are joined with their Connect schemas' texts by schema ref: a row
    whose ref is not among the pairs given (never, as the merger reads them: the pairs come from the same
    rows) fails the query, naming the ref, rather than vanish from the join."""
    schemas: dict[int, Any] = {}
    plan = plan_for(EDGE_PLAN)
    batch = decode_batch(kafka_frame(spark, [("srv.db.edge", 0, 0, b"k", edge_value(0))]), plan, schemas)
    try:
        texts = {schema_ref(i): s.text for i, s in schemas.items() if s is not None}
        assert texts, "the record's schema was read at ingest"
        made = made_canonical(batch.frame, plan, [], texts)
        try:
            with pytest.raises(Exception, match="Connect schema ref is not known: " + next(iter(texts))):
                made.frame.collect()
        finally:
            made.release()
    finally:
        batch.release()


def as_read(i: int, **fields: Any) -> bytes:
    """``edge_value(i)`` as a snapshot read (op ``r``) with these source fields."""

    def change(text: str) -> str:
        payload = json.loads(text)
        payload["op"] = "r"
        payload["source"].update(fields)
        return json.dumps(payload, separators=COMPACT)

    return with_payload(i, change)


def test_snapshot_reads_are_placed_alike_by_the_reader_and_the_reference(spark: Any) -> None:
    """An incremental snapshot's read and a blocking snapshot's (a gtid) sit at their binlog position
    (phase 1, row -1); an initial snapshot's, and a read with no position to place it at, stay
    below the binlog (phase 0). The JVM reader takes each and orders it as the reference does."""
    f4 = "mysql-bin.000004"
    reads = [
        as_read(0, snapshot="first", gtid=None, file="mysql-bin.000003", pos=4537, row=0),
        as_read(1, snapshot="incremental", gtid="0-1-1234", file=f4, pos=9876, row=0),
        as_read(2, snapshot="true", gtid="0-1-77", file=f4, pos=120, row=3),
        as_read(3, snapshot="last", gtid=None, file=f4, pos=120, row=3),
        as_read(4, snapshot="incremental", gtid=None, file=f4, pos=130, row=0),
        as_read(5, snapshot="incremental", gtid="0-1-5", file=f4, pos=0, row=0),
        as_read(6, snapshot=True, gtid=None, file=f4, pos=140, row=0),
    ]
    # A number where Debezium writes text: left to the reference, which reads it as no file, no gtid.
    left = [as_read(7, snapshot="true", gtid=7, file=f4, pos=150), as_read(8, snapshot="true", gtid="0-1-7", file=4)]
    records: list[Record] = [("srv.db.edge", 0, i, b"k", v) for i, v in enumerate(reads + left)]
    plan = plan_for(EDGE_PLAN)
    pairs = decoded_both_ways(spark, records, plan)
    assert_same(pairs)
    assert fast_share(spark, records, plan) == len(reads) / len(records)
    placed = [(seq["phase"], seq["row"]) for seq in (jvm["seq"] for jvm, _ in pairs)]
    assert placed == [(0, 0), (1, -1), (1, -1), (0, 3), (1, -1), (0, 0), (0, 0), (0, 0), (0, 0)]
