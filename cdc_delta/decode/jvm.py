"""Decode a micro-batch of Debezium JSON envelopes in the JVM: each record read once by cdc-delta's
envelope reader (:data:`READER_CLASS`, ``jvm/decoder``), the rest with Spark's own functions.

1. The reader reads each record's value in one pass: the schema's text hashed, not parsed (kilobytes a
   record), the payload parsed. A probe over what it read brings back, per (topic, db, table, schema),
   one row: the distinct Connect schemas and source tables of the batch, a handful of rows.
2. On the driver each distinct schema is read once, with the reference decoder's own code, into
   per-column conversions (:mod:`.connect_values`), and each source table is routed.
3. One projection of fixed expressions decodes every record: its table (a broadcast join with the
   batch's decodable (source table, schema) pairs, to their logical table), op, ordering key, source,
   and its image *as Debezium wrote it* - the envelope's payload text and a reference to its Connect
   schema (:func:`~.images.schema_ref`), stored once in the changelog. Nothing here grows with the
   number of tables or schemas; the image is made canonical where a table's changes are read
   (:mod:`.canonical`), a few tables at a time.

The pairs a batch decodes are kept for the next (:func:`~.batch.decode_batch`): there the projection runs
in the reader's pass with them, and the probe reads only the records it left (none of a known source
table and schema), so that a batch of tables and schemas met before is read and decoded in one pass.

A record this projection cannot decode exactly as the reference does - bad or lenient JSON (single
quotes, bare NaN, data after the envelope), not written as the JsonConverter writes it, no schema, no
route, an op other than c/u/d/r, Debezium's own records, a schema with a type the expressions do not
cover, a source position out of range - gets no struct here; the caller decodes those with the
reference decoder (:func:`cdc_delta.events.envelope.decode_record`), so that every record ends as it
always has: same status, same reason, same values. (An image whose values do not convert, that lacks a
key, or whose text holds a lone UTF-16 surrogate, is found where it is made canonical, and given to the
reference there.)

One difference is left: a field nested within a few levels of the parsers' limits (Jackson refuses
1,000 levels; Python's parser gives up near its recursion limit, sooner the deeper the stack it is
called on) may be decoded by one and refused by the other; no source writes one. A record either
decoder refuses is dead-lettered with the reason, never dropped.
"""

from __future__ import annotations

import json
from collections.abc import Collection

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_delta.decode.decoded import KAFKA_COLUMNS, decoded_schema
from cdc_delta.decode.images import ImageSchema, read_schema, schema_ref_column
from cdc_delta.events.envelope import OK, SKIP, TOMBSTONE, DecodePlan, image_fields
from cdc_delta.events.masking import unmasked, unverified
from cdc_delta.events.transactions import TXN_DDL
from cdc_delta.exceptions import SparkSetupError
from cdc_delta.spark_session import JARS_DIR_ENV

ENV = "_env"
SCHEMA_ID = "_schema_id"
TOMBSTONE_FLAG = "_tombstone"
PAYLOAD_TEXT = "_payload"
SCHEMA_TEXT = "_schema_text"
FAST = "_fast"
KAFKA_KEPT = tuple(c for c in KAFKA_COLUMNS if c != "value")
"""The Kafka columns the JVM path carries: all but the value (see :func:`envelopes`)."""
_PAYLOAD = (
    "op: STRING, source: STRUCT<db: STRING, table: STRING>, "
    "position: STRUCT<phase: INT, gtid: BIGINT, file: BIGINT, pos: BIGINT, row: INT, ts_ms: BIGINT>, "
    f"transaction: {TXN_DDL}"
)
_HEAD = '{"schema":'
_NONE = "\u0001"  # stands for a missing db or table in a route key: no name holds it


_ROUTE_KEY = "_route_key"
_ROUTED = "_routed"
_SEQ_COLUMN = "_seq"
_PLAIN = "_plain"
_READ = "_read"

READER_CLASS = "io.cdcdelta.decode.EnvelopeReader"
"""The envelope reader, cdc-delta's own JVM code (``jvm/decoder``, built into the Spark jars by
``scripts/fetch-jars.sh``)."""
READER = "cdc_delta_read_envelope"
READ_TYPE = (
    f"head_bytes INT, schema_id BIGINT, first_of_schema BOOLEAN, payload_text STRING, payload STRUCT<{_PAYLOAD}>"
)
"""What :data:`READER_CLASS` returns of a shaped record (its Javadoc says what each field holds); NULL
for any other."""


def register_reader(spark: SparkSession) -> None:
    """Make the envelope reader callable as :data:`READER` in ``spark``'s queries, where it is not yet (a
    stream's batches run in a copy of the session made at its start, which has it; registering again
    would log a warning every batch); :class:`~cdc_delta.exceptions.SparkSetupError`, saying how to build
    it, where its jar is missing."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    name = jvm.org.apache.spark.sql.catalyst.FunctionIdentifier.apply(READER)
    if spark._jsparkSession.sessionState().functionRegistry().functionExists(name):
        return
    try:
        spark.udf.registerJavaFunction(READER, READER_CLASS, READ_TYPE)
    except Exception as e:  # py4j's error for a class the JVM cannot load
        if "ClassNotFoundException" not in str(e) and "Can not load class" not in str(e):
            raise
        raise missing_decoder("JSON envelope reader", READER_CLASS) from e


def missing_decoder(what: str, class_name: str) -> SparkSetupError:
    """The error for a function of cdc-delta's own JVM code (``jvm/decoder``) the JVM cannot load."""
    return SparkSetupError(
        f"cdc-delta's {what} ({class_name}) is not on Spark's classpath: run `make setup` (or "
        "scripts/fetch-jars.sh), which builds cdc-delta-decoder.jar into the Spark jars folder "
        f"({JARS_DIR_ENV} or spark.jars_dir, else .jars/spark of the checkout)"
    )


def _with_read(batch: DataFrame) -> DataFrame:
    """``batch`` and ``_read``: what the reader (:data:`READER_CLASS`) reads of each record's value, once.
    A record written as the JsonConverter writes it, ``{"schema":{..},"payload":{..}}`` with no space,
    is *shaped*: its head is ``{"schema":`` and the schema's text, hashed, not parsed; its payload, the
    rest but the closing brace, parsed. In valid JSON an unquoted
    ``,"payload":`` can only be an object's key (a quote inside a string is escaped), and the first
    one is the envelope's: a Connect schema has no such key. A record split wrongly parses to no
    payload and goes to the reference decoder, as does anything the reader does not read exactly."""
    register_reader(batch.sparkSession)
    return batch.select(*batch.columns, F.call_function(READER, F.col("value")).alias(_READ))


def _read(field: str) -> Column:
    return F.col(_READ).getField(field)


def envelopes(batch: DataFrame, met: Collection[int] = ()) -> DataFrame:
    """The Kafka columns but the value, the parsed envelope's payload, the id of its Connect schema, and
    what the fast path needs of the value: whether it is null (a tombstone), and the payload's text
    (none where it is not valid UTF-8: Spark's cast would replace bad bytes, the reference refuses them;
    the head is checked where its schema's text is taken, :func:`_schema_text`; the key between them and
    the closing brace are ASCII). The value itself (kilobytes a record, mostly the schema) is not kept:
    the first record of a schema id in each task (the reader's ``first_of_schema``) whose id is not among
    ``met`` (the ids of schemas already read or met, which :func:`~.batch.decode_batch` keeps from batch
    to batch) keeps its schema's text (:data:`SCHEMA_TEXT`) for :func:`probe`, so that a new schema is
    read in this pass, not by reading the batch again from Kafka (every topic-partition of it, for one
    schema), and a process's first batch keeps a text per schema and task, not per record. The flag
    holds only where each record is read once in its task: the caller checkpoints this pass. The records
    the reference decoder takes (:func:`~.batch.decode_batch`) are read again from the batch, where there
    are any.

    Only a shaped record is read (:func:`_with_read`), in one pass over its bytes; any other record
    has no payload here and goes to the reference decoder (its image could not be landed as written)."""
    # One SQL expression, not a literal Column each: a thousand ids would be a thousand calls into the JVM.
    # A record with no schema id (a tombstone, a record not shaped) keeps nothing: its flag is null.
    ids = ", ".join(map(str, sorted(met)))
    first = _read("first_of_schema")
    new = first & F.expr(f"{_READ}.schema_id NOT IN ({ids})") if met else first
    return _with_read(batch).select(
        *KAFKA_KEPT,
        F.struct(_read("payload").alias("payload")).alias(ENV),
        _read("schema_id").alias(SCHEMA_ID),
        F.col("value").isNull().alias(TOMBSTONE_FLAG),
        _read("payload_text").alias(PAYLOAD_TEXT),
        F.when(new, F.struct(_schema_text().alias("text"))).alias(SCHEMA_TEXT),
    )


def _schema_text() -> Column:
    """The text of a shaped record's Connect schema, from its value (:func:`_with_read`); None where it is
    not valid UTF-8 (the fast path checks only the payload of a record: its events go to the reference
    decoder, which refuses them)."""
    head = F.substring("value", len(_HEAD) + 1, _read("head_bytes") - len(_HEAD)).cast("string")
    return F.when(F.is_valid_utf8(head), head)


Landable = dict[tuple[str, int], str]
"""What :func:`probe` finds: (route key (:func:`route_key`), schema id) -> logical table, for every routed
source table and decodable schema seen together in the batch: the records the JVM lands."""


def route_key(topic: str, db: str | None, tbl: str | None) -> str:
    return "\u0000".join((topic, _NONE if db is None else db, _NONE if tbl is None else tbl))


def probe(
    batch: DataFrame,
    env: DataFrame,
    plan: DecodePlan,
    schemas: dict[int, ImageSchema | None] | None = None,
    met: set[int] | None = None,
) -> Landable:
    """A small job over the parsed batch (``env``, the :func:`envelopes` of ``batch``), its distinct
    (topic, db, table, schema id), each triple routed, with the text of each schema the first pass kept;
    each routed schema not in ``schemas`` (schema id -> what :func:`read_schema` made of it, kept by the
    caller across batches and filled here) is read from that text, or, where the first pass kept none
    (its id was in ``met`` but not in ``schemas``: met before on records no table routes; or, in its
    task, the flagged record went to a source table no table routes, or the reader's flag fell on a call
    whose result Spark threw away), by another job from one record of ``batch``. ``met``, kept by the
    caller too, gains every schema id seen."""
    payload = f"{ENV}.payload"
    rows = (
        env.where(F.col(payload).isNotNull())
        .groupBy(
            "topic", F.col(f"{payload}.source.db").alias("db"), F.col(f"{payload}.source.table").alias("tbl"), SCHEMA_ID
        )
        .agg(F.min(F.struct("partition", "offset")).alias("at"), F.first(SCHEMA_TEXT, ignorenulls=True).alias("head"))
        .collect()
    )
    known = {} if schemas is None else schemas
    # The signal table's rows are left to the reference decoder, which skips them.
    routed = [(r, None if plan.is_signal(r["tbl"]) else plan.router.route(r["topic"], r["db"], r["tbl"])) for r in rows]
    new = [r for r, table in routed if table is not None and r[SCHEMA_ID] not in known]
    texts = {r[SCHEMA_ID]: r["head"]["text"] for r in new if r["head"] is not None}
    wanted = {(r["topic"], r["at"]["partition"], r["at"]["offset"]) for r in new if r[SCHEMA_ID] not in texts}
    texts.update(_schema_texts(batch, wanted))
    known.update((schema_id, read_schema(text)) for schema_id, text in texts.items())
    if met is not None:
        met.update(r[SCHEMA_ID] for r in rows)
    return {
        (route_key(r["topic"], r["db"], r["tbl"]), r[SCHEMA_ID]): table
        for r, table in routed
        if table is not None and _lands(plan, table, known.get(r[SCHEMA_ID]))
    }


def _lands(plan: DecodePlan, table: str, schema: ImageSchema | None) -> bool:
    """Whether the JVM lands the events of ``table`` written with ``schema``: a schema it decodes, whose
    masked columns (:mod:`cdc_delta.events.masking`) it marks masked; the events of any other are left to
    the reference decoder, which dead-letters those unmasked (and judges the values of a truncated column
    the schema does not confirm)."""
    if schema is None:
        return False
    rules = plan.mask_rules(table)
    if not rules:
        return True
    fields = image_fields(json.loads(schema.text), "after") or {}
    return not unmasked(fields, rules) and not unverified(fields, rules)


def _schema_texts(batch: DataFrame, records: set[tuple[str, int, int]]) -> dict[int, str | None]:
    """Schema id -> the schema's text (:func:`_schema_text`), read again from the given shaped records
    (topic, partition, offset) of ``batch``."""
    if not records:
        return {}
    at = F.concat_ws("\u0000", "topic", F.col("partition").cast("string"), F.col("offset").cast("string"))
    wanted = ["\u0000".join((t, str(p), str(o))) for t, p, o in sorted(records)]
    found = _with_read(batch.where(at.isin(wanted))).select(
        _read("schema_id").alias(SCHEMA_ID), _schema_text().alias("schema")
    )
    return {r[SCHEMA_ID]: r["schema"] for r in found.collect()}


def _payload(name: str) -> Column:
    return F.col(ENV).getField("payload").getField(name)


def _seq() -> Column:
    """The ordering key (:mod:`cdc_delta.events.ordering`) of a record: its source fields as the reader
    made them (``position``, NULL where it could not make them exactly as the reference does: the
    record is not :func:`_plain_source`, and the reference decides)."""
    position = _payload("position")
    return F.struct(
        *[position.getField(name).alias(name) for name in ("phase", "gtid", "file", "pos", "row", "ts_ms")],
        F.col("partition").cast("int").alias("partition"),
        F.col("offset").alias("offset"),
    )


def _plain_source() -> Column:
    """An op the fast path decodes, and a source position the reader made as the reference does."""
    return _payload("op").isin("c", "u", "d", "r") & _payload("position").isNotNull()


def _no_value() -> Column:
    return F.lit(None).cast("binary").alias("value")


def _routed(env: DataFrame, landable: Landable) -> tuple[DataFrame, Column]:
    """``env`` with the logical table of each record the JVM lands (its source table routed, its schema
    decodable; NULL for the others), by a broadcast hash join with the :data:`Landable` pairs; and that
    column. A map literal and an IN list were searched per record (at 1,000 tables the decoding
    projection cost 4.6x the CPU of one table's); the pairs go to the JVM as one JSON literal, not a
    literal each (with a thousand, building and analysing those took a second)."""
    source = f"{ENV}.payload.source"
    key = F.concat_ws(
        "\u0000",
        F.col("topic"),
        F.coalesce(F.col(f"{source}.db"), F.lit(_NONE)),
        F.coalesce(F.col(f"{source}.table"), F.lit(_NONE)),
    )
    pairs = [{"k": k, "id": schema_id, "t": table} for (k, schema_id), table in sorted(landable.items())]
    found = env.sparkSession.range(1).select(
        F.inline(F.from_json(F.lit(json.dumps(pairs)), "ARRAY<STRUCT<k: STRING, id: BIGINT, t: STRING>>"))
    )
    found = found.select(F.col("k").alias(_ROUTE_KEY), F.col("id").alias(SCHEMA_ID), F.col("t").alias(_ROUTED))
    keyed = env.withColumn(_ROUTE_KEY, key)
    joined = keyed.join(F.broadcast(found), [_ROUTE_KEY, SCHEMA_ID], "left").drop(_ROUTE_KEY)
    return joined, F.col(_ROUTED)


ENV_COLUMNS = (*KAFKA_KEPT, ENV, SCHEMA_ID, TOMBSTONE_FLAG, PAYLOAD_TEXT, SCHEMA_TEXT)
"""The columns of :func:`envelopes`."""


def fast_decoded(env: DataFrame, landable: Landable, keep_left: bool = False) -> DataFrame:
    """The Kafka columns, the value null (:func:`envelopes`), and ``FAST``: the decoded struct of the
    records decoded here, NULL for the others. A row event of a schema the JVM decodes, written as the
    JsonConverter writes it, is decoded but for its image: the struct holds its payload's text and a
    reference to its Connect schema (:func:`~.images.schema_ref`), and the image is made canonical
    where the table's changes are read (:mod:`.canonical`). Only fixed expressions, whatever the
    number of tables and schemas: a join with the (source table, schema) pairs it lands, to their
    logical table. ``keep_left``: the records left (``FAST`` NULL) keep every column of ``env``
    (:data:`ENV_COLUMNS`; NULL for the others), for :func:`probe` and another pass with the pairs it
    finds."""
    source = f"{ENV}.payload.source"
    tombstone = F.struct(
        F.lit(SKIP).alias("status"),
        F.lit(TOMBSTONE).alias("reason"),
        *[F.lit(None).cast(f.dataType).alias(f.name) for f in decoded_schema().fields[2:]],
    )
    if not landable:
        return _decoded(env, F.when(F.col(TOMBSTONE_FLAG), tombstone), keep_left)
    # No payload text: not valid UTF-8, or not read exactly by the reader (the reference decides)
    plain = F.col(PAYLOAD_TEXT).isNotNull() & _plain_source()
    # The ordering key and the checks in a projection of their own, before the join: in one projection
    # with the struct below, Spark generated a method past the JVM's limit for JIT compilation (8,000
    # bytes of bytecode), which ran interpreted: the pass took 3.0 s for 200k records, 1.4 s split.
    env = env.select("*", _seq().alias(_SEQ_COLUMN), F.coalesce(plain, F.lit(False)).alias(_PLAIN))
    env, table = _routed(env, landable)
    seq = F.col(_SEQ_COLUMN)
    decoded = F.struct(
        F.lit(OK).alias("status"),
        F.lit(None).cast("string").alias("reason"),
        table.alias("table"),
        _payload("op").alias("op"),
        F.col(f"{source}.db").alias("source_db"),
        F.col(f"{source}.table").alias("source_table"),
        seq.alias("seq"),
        F.when(seq.getField("ts_ms") != 0, seq.getField("ts_ms")).alias("source_ts_ms"),
        F.lit(None).cast("string").alias("row_json"),
        F.lit(None).cast("string").alias("schema_json"),
        F.col(PAYLOAD_TEXT).alias("payload"),
        schema_ref_column(F.col(SCHEMA_ID)).alias("schema_ref"),
        F.lit(None).cast("string").alias("redacted"),
        _payload("transaction").alias("txn"),
    )
    fast = F.when(F.col(TOMBSTONE_FLAG), tombstone).when(F.col(_PLAIN) & table.isNotNull(), decoded)
    return _decoded(env, fast, keep_left)


def _decoded(env: DataFrame, fast: Column, keep_left: bool) -> DataFrame:
    """:func:`fast_decoded`'s rows: ``fast`` as ``FAST`` and, where ``keep_left``, the columns of ``env``
    where it is NULL."""
    out = env.select(*KAFKA_KEPT, _no_value(), fast.alias(FAST), *(ENV_COLUMNS[len(KAFKA_KEPT) :] if keep_left else ()))
    if not keep_left:
        return out
    # A projection of its own, so that FAST, read by each column below, is computed once (Spark does not
    # merge a projection into one that reads a costly expression of it twice).
    left = F.col(FAST).isNull()
    return out.select(
        *KAFKA_KEPT, "value", FAST, *[F.when(left, F.col(c)).alias(c) for c in ENV_COLUMNS[len(KAFKA_KEPT) :]]
    )
