"""Decode a micro-batch of Debezium JSON envelopes in the JVM, with Spark's own JSON functions.

1. A probe parses the batch's envelopes and brings back, per (topic, db, table, schema), one row: the
   distinct Connect schemas and source tables of the batch, a handful of rows.
2. On the driver each distinct schema is read once, with the reference decoder's own code, into
   per-column conversions (:mod:`.connect_values`), and each source table is routed.
3. One projection decodes every record: the image is read with ``from_json`` (once per record, bound
   in a lambda) and its values made canonical by Spark expressions, into the very struct the
   reference decoder returns (:class:`~cdc_delta.events.envelope.Decoded`).

A record this projection cannot decode exactly as the reference does - bad JSON, no schema, no route,
an op other than c/u/d/r, Debezium's own records, a schema with a type the expressions do not cover, a
value that does not convert, a null key, a field the schema does not name - gets no struct here; the
caller decodes those with the reference decoder (:func:`cdc_delta.events.envelope.decode_record`), so
that every record ends as it always has: same status, same reason, same values.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType, _parse_datatype_string

from cdc_delta.events.envelope import OK, SKIP, TOMBSTONE, DecodePlan, descriptor_entry, image_fields
from cdc_delta.ingest.connect_values import Conversion, conversion, let
from cdc_delta.ingest.decoded import KAFKA_COLUMNS, decoded_schema

ENV = "_env"
SCHEMA_ID = "_schema_id"
TOMBSTONE_FLAG = "_tombstone"
UTF8_FLAG = "_utf8"
FAST = "_fast"
KAFKA_KEPT = tuple(c for c in KAFKA_COLUMNS if c != "value")
"""The Kafka columns the JVM path carries: all but the value (see :func:`envelopes`)."""
_PAYLOAD = (
    "op: STRING, before: STRING, after: STRING, source: STRUCT<db: STRING, table: STRING, file: STRING, "
    "pos: STRING, row: STRING, gtid: STRING, ts_ms: STRING>"
)
_ENVELOPE = f"schema STRING, payload STRUCT<{_PAYLOAD}>"
_HEAD = '{"schema":'
_PAYLOAD_KEY = ',"payload":'
_DIGITS = r"'^-?[0-9]+$'"
_GTID_SEQUENCE = r"'^\\s*[0-9]+-[0-9]+-([0-9]+)\\s*$'"
_FILE_NUMBER = r"'([0-9]+)[^0-9]*$'"
_NONE = "\u0001"  # stands for a missing db or table in a route key: no name holds it
_CORRUPT = "_cdc_unreadable"


@dataclass(frozen=True)
class ImageSchema:
    """One distinct Connect schema of a batch, read on the driver."""

    descriptor: str
    """The ``schema_json`` the reference writes for events of this schema."""
    columns: tuple[tuple[str, Conversion], ...]
    """Per column of the image, how it is read and made canonical."""


def read_schema(text: str | None) -> ImageSchema | None:
    """The image columns of an envelope schema; None where the JVM cannot decode its events exactly
    (also where it has no schema, or its head is not valid UTF-8: :func:`_schema_texts`)."""
    if text is None:
        return None
    try:
        return _read_schema(text)
    except Exception:  # noqa: BLE001 (a schema that breaks the reader, say nested too deep, is left to the reference, which dead-letters its records)
        return None


def _read_schema(text: str) -> ImageSchema | None:
    try:
        schema = json.loads(text)
    except json.JSONDecodeError:
        return None
    after, before = image_fields(schema, "after"), image_fields(schema, "before")
    if not after or (before is not None and before != after):
        return None
    columns = []
    for name, field in after.items():
        convert = conversion(field)
        if convert is None or name == _CORRUPT:
            return None
        columns.append((name, convert))
    descriptor = json.dumps([descriptor_entry(name, field) for name, field in after.items()])
    return ImageSchema(descriptor, tuple(columns))


_HEAD_COLUMN = "_head"


def _with_head(batch: DataFrame) -> DataFrame:
    """``batch`` and ``_head``: the text of each record before its first unquoted ``,"payload":``
    key. A record written as the JsonConverter writes it, ``{"schema":{..},"payload":{..}}`` with no
    space, is *shaped* (:func:`_shaped`): its head is ``{"schema":`` and the schema's text, its payload
    is the rest but the closing brace. In valid JSON an unquoted ``,"payload":`` can only be an
    object's key (a quote inside a string is escaped), and the first one is the envelope's: a Connect
    schema has no such key. A record split wrongly parses to no payload and goes to the reference
    decoder."""
    head = F.substring_index(F.col("value").cast("string"), _PAYLOAD_KEY, 1)
    return batch.select(*batch.columns, head.alias(_HEAD_COLUMN))


def _shaped() -> Column:
    text = F.col("value").cast("string")
    head = F.col(_HEAD_COLUMN)
    return text.startswith(_HEAD) & text.endswith("}") & (F.octet_length(head) < F.octet_length("value"))


def _schema_id(whole_schema: Column) -> Column:
    """A record's schema id: the hash of its head where shaped, else of its schema as parsed whole
    (``whole_schema``, the ``schema`` field read as a string)."""
    return F.when(_shaped(), F.xxhash64(_HEAD_COLUMN)).otherwise(F.xxhash64(whole_schema))


def envelopes(batch: DataFrame) -> DataFrame:
    """The Kafka columns but the value, the parsed envelope's payload, the id of its Connect schema, and
    what the fast path needs of the value: whether it is null (a tombstone) and whether it is valid
    UTF-8 (of a shaped record, its payload: its head is checked once per schema, by :func:`probe`; the
    key between them and the closing brace are ASCII). The value itself (kilobytes a record, mostly
    the schema) is not kept: the schemas' texts (:func:`probe`) and the records the reference decoder
    takes (:func:`~.decode.decode_batch`) are read again from the batch, where there are any.

    A shaped record (:func:`_with_head`) is cut in bytes at its payload key: only the payload is
    parsed, and its schema id is a hash of its head. Any other record is parsed whole, its schema id
    a hash of its schema's text."""
    text = F.col("value").cast("string")
    at = F.octet_length(_HEAD_COLUMN) + len(_PAYLOAD_KEY) + 1
    payload_text = F.substring("value", at, F.octet_length("value") - at).cast("string")
    shaped = _shaped()
    # Spark evaluates from_json in a CASE's every branch: the whole record is given only where needed.
    parsed = F.from_json(F.when(~shaped, text), _ENVELOPE)
    payload = F.when(shaped, F.from_json(payload_text, f"STRUCT<{_PAYLOAD}>")).otherwise(parsed.getField("payload"))
    return _with_head(batch).select(
        *KAFKA_KEPT,
        F.struct(payload.alias("payload")).alias(ENV),
        _schema_id(parsed.getField("schema")).alias(SCHEMA_ID),
        F.col("value").isNull().alias(TOMBSTONE_FLAG),
        F.when(shaped, F.is_valid_utf8(payload_text)).otherwise(F.is_valid_utf8(text)).alias(UTF8_FLAG),
    )


@dataclass(frozen=True)
class Probe:
    """What the batch holds, as the driver needs it: per schema id, the decodable image schema and the
    logical table its records route to; and the routes of every (topic, db, table) seen."""

    images: dict[tuple[int, str], ImageSchema]
    routes: dict[str, str]
    """Route key (:func:`route_key`) -> logical table."""


def route_key(topic: str, db: str | None, tbl: str | None) -> str:
    return "\u0000".join((topic, _NONE if db is None else db, _NONE if tbl is None else tbl))


def probe(
    batch: DataFrame, env: DataFrame, plan: DecodePlan, schemas: dict[int, ImageSchema | None] | None = None
) -> Probe:
    """A small job over the parsed batch (``env``, the :func:`envelopes` of ``batch``), its distinct
    (topic, db, table, schema id), each triple routed; and, where some are new, another job that reads
    the text of each schema not in ``schemas`` (schema id -> what :func:`read_schema` made of it, kept
    by the caller across batches and filled here) from one record of ``batch``."""
    payload = f"{ENV}.payload"
    rows = (
        env.where(F.col(payload).isNotNull())
        .groupBy(
            "topic", F.col(f"{payload}.source.db").alias("db"), F.col(f"{payload}.source.table").alias("tbl"), SCHEMA_ID
        )
        .agg(F.min(F.struct("partition", "offset")).alias("at"))
        .collect()
    )
    known = {} if schemas is None else schemas
    routed = [(r, plan.router.route(r["topic"], r["db"], r["tbl"])) for r in rows]
    new = [r for r, table in routed if table is not None and r[SCHEMA_ID] not in known]
    wanted = {(r["topic"], r["at"]["partition"], r["at"]["offset"]) for r in new}
    known.update((schema_id, read_schema(text)) for schema_id, text in _schema_texts(batch, wanted).items())
    images: dict[tuple[int, str], ImageSchema] = {}
    routes: dict[str, str] = {}
    for r, table in routed:
        if table is None:
            continue
        routes[route_key(r["topic"], r["db"], r["tbl"])] = table
        image = known.get(r[SCHEMA_ID])
        if image is not None:
            images[(r[SCHEMA_ID], table)] = image
    return Probe(images, routes)


def _schema_texts(batch: DataFrame, records: set[tuple[str, int, int]]) -> dict[int, str | None]:
    """Schema id -> the schema's text, read from the given records (topic, partition, offset); None
    where the record has no schema, or its head is not valid UTF-8 (the fast path checks only the
    payload of a shaped record: its events go to the reference decoder, which refuses them)."""
    if not records:
        return {}
    at = F.concat_ws("\u0000", "topic", F.col("partition").cast("string"), F.col("offset").cast("string"))
    wanted = ["\u0000".join((t, str(p), str(o))) for t, p, o in sorted(records)]
    whole = F.from_json(F.when(~_shaped(), F.col("value").cast("string")), "schema STRING").getField("schema")
    head = F.when(F.is_valid_utf8(_HEAD_COLUMN), F.substring(_HEAD_COLUMN, len(_HEAD) + 1, 2**31 - 1))
    schema = F.when(_shaped(), head).otherwise(whole)
    found = _with_head(batch.where(at.isin(wanted))).select(_schema_id(whole).alias(SCHEMA_ID), schema.alias("schema"))
    return {r[SCHEMA_ID]: r["schema"] for r in found.collect()}


def _seq_sql() -> str:
    """The ordering key (:mod:`cdc_delta.events.ordering`) of a record, as SQL over the envelope."""
    s = f"{ENV}.payload.source"
    number = "CASE WHEN {c} RLIKE " + _DIGITS + " THEN try_cast({c} AS bigint) ELSE 0 END"
    return (
        f"named_struct('phase', IF({ENV}.payload.op = 'r', 0, 1), "
        f"'gtid', coalesce(try_cast(nullif(regexp_extract({s}.gtid, {_GTID_SEQUENCE}, 1), '') AS bigint), 0), "
        f"'file', coalesce(try_cast(nullif(regexp_extract({s}.file, {_FILE_NUMBER}, 1), '') AS bigint), 0), "
        f"'pos', {number.format(c=f'{s}.pos')}, 'row', CAST({number.format(c=f'{s}.row')} AS int), "
        f"'ts_ms', {number.format(c=f'{s}.ts_ms')}, 'partition', CAST(partition AS int), 'offset', offset)"
    )


def _image(image: ImageSchema, keys: Iterable[str]) -> Column:
    """A struct {ok, row_json} of a record's image of this schema: the image parsed once (``img``), its
    values made canonical once (``r``). Built from Column objects: a column is reached by its position
    (the parsed image is cast to a struct of positional names), so that no name, whatever it holds
    (quotes, dots, braces, a case that differs from another's), is ever parsed or resolved."""
    payload = F.col(ENV).getField("payload")
    text = F.when(payload.getField("op") == "d", payload.getField("before")).otherwise(payload.getField("after"))
    names = [name for name, _ in image.columns]
    types = [_parse_datatype_string(convert.json_type) for _, convert in image.columns]
    corrupt = StructField(_CORRUPT, StringType())
    as_read = StructType([StructField(n, t) for n, t in zip(names, types, strict=True)] + [corrupt])
    positional = StructType([StructField(f"c{i}", t) for i, t in enumerate(types)] + [corrupt])
    options = {"columnNameOfCorruptRecord": _CORRUPT, "mode": "PERMISSIVE"}
    parsed = F.from_json(text, as_read, options).cast(positional)
    at = {name: f"c{i}" for i, name in enumerate(names)}

    def canonical(img: Column) -> Column:
        values = [
            convert.apply(img.getField(f"c{i}"), text).alias(f"c{i}") for i, (_, convert) in enumerate(image.columns)
        ]
        return let(F.struct(*values), lambda r: _checked(img, r))

    def _checked(img: Column, r: Column) -> Column:
        conditions = [img.isNotNull(), img.getField(_CORRUPT).isNull()]
        conditions += [img.getField(c).isNull() | r.getField(c).isNotNull() for c in at.values()]
        conditions += [r.getField(at[k]).isNotNull() if k in at else F.lit(False) for k in keys]
        conditions.append(F.size(F.json_object_keys(text)) == len(names))
        ok = functools.reduce(lambda a, b: a & b, conditions)
        row = F.struct(*[r.getField(at[name]).alias(name) for name in names])
        row_json = F.to_json(row, {"ignoreNullFields": "false"})
        return F.struct(F.coalesce(ok, F.lit(False)).alias("ok"), row_json.alias("row_json"))

    return let(parsed, canonical)


def _plain_source() -> Column:
    """Valid UTF-8 (Spark's cast would replace bad bytes, the reference refuses them), an op the fast
    path decodes, and a source position it reads as the reference does."""
    s = f"{ENV}.payload.source"
    fields = " AND ".join(f"({s}.{f} IS NULL OR {s}.{f} RLIKE {_DIGITS})" for f in ("pos", "row"))
    return (
        F.col(UTF8_FLAG)
        & F.col(f"{ENV}.payload.op").isin("c", "u", "d", "r")
        & F.expr(f"{s}.ts_ms RLIKE {_DIGITS} AND {fields}")
    )


def _no_value() -> Column:
    return F.lit(None).cast("binary").alias("value")


def fast_decoded(env: DataFrame, plan: DecodePlan, found: Probe) -> DataFrame:
    """The Kafka columns, the value null (:func:`envelopes`), and ``FAST``: the reference decoder's
    struct for the records decoded here, NULL for the others. Two projections: the first computes each
    record's table, image and ordering key once; the second assembles the struct from them (one
    projection would compute the image once for its check and once more for its value: CASE WHEN does
    not share them)."""
    source = f"{ENV}.payload.source"
    key = F.concat_ws(
        "\u0000",
        F.col("topic"),
        F.coalesce(F.col(f"{source}.db"), F.lit(_NONE)),
        F.coalesce(F.col(f"{source}.table"), F.lit(_NONE)),
    )
    pairs = [c for k, v in sorted(found.routes.items()) for c in (F.lit(k), F.lit(v))]
    table = F.element_at(F.create_map(*pairs), key) if pairs else F.lit(None).cast("string")
    tombstone = F.struct(
        F.lit(SKIP).alias("status"),
        F.lit(TOMBSTONE).alias("reason"),
        *[F.lit(None).cast(f.dataType).alias(f.name) for f in decoded_schema().fields[2:]],
    )
    if not found.images:
        return env.select(*KAFKA_KEPT, _no_value(), F.when(F.col(TOMBSTONE_FLAG), tombstone).alias(FAST))
    image: Column | None = None
    descriptors: list[Column] = []
    for (schema_id, name), schema in sorted(found.images.items()):
        branch = (F.col(SCHEMA_ID) == F.lit(schema_id)) & (table == F.lit(name))
        value = _image(schema, plan.keys[name])
        image = F.when(branch, value) if image is None else image.when(branch, value)
        descriptors += [F.lit(schema_id), F.lit(schema.descriptor)]
    assert image is not None
    parts = env.select(
        *KAFKA_KEPT,
        TOMBSTONE_FLAG,
        table.alias("_table"),
        image.alias("_image"),
        F.expr(_seq_sql()).alias("_seq"),
        F.element_at(F.create_map(*descriptors), F.col(SCHEMA_ID)).alias("_schema"),
        F.col(f"{ENV}.payload.op").alias("_op"),
        F.col(f"{source}.db").alias("_db"),
        F.col(f"{source}.table").alias("_tbl"),
        (_plain_source() & table.isNotNull()).alias("_plain"),
    )
    seq = F.col("_seq")
    decoded = F.struct(
        F.lit(OK).alias("status"),
        F.lit(None).cast("string").alias("reason"),
        F.col("_table").alias("table"),
        F.col("_op").alias("op"),
        F.col("_db").alias("source_db"),
        F.col("_tbl").alias("source_table"),
        seq.alias("seq"),
        F.when(seq.getField("ts_ms") != 0, seq.getField("ts_ms")).alias("source_ts_ms"),
        F.col("_image.row_json").alias("row_json"),
        F.col("_schema").alias("schema_json"),
    )
    ok = F.col("_plain") & F.coalesce(F.col("_image.ok"), F.lit(False))
    fast = F.when(F.col(TOMBSTONE_FLAG), tombstone).when(ok, decoded)
    return parts.select(*KAFKA_KEPT, _no_value(), fast.alias(FAST))
