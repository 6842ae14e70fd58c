"""Making landed images canonical, where a table's changes are read back (merge, live view, rebuild,
replay), not at ingest: the JVM decoder lands an event's image as Debezium wrote it (its envelope's
``payload`` text and a reference to its Connect schema, :mod:`.jvm`), so that the ingest builds no
expression per table and its cost does not grow with the number of tables. Here, for the few tables
read at once, each distinct (image shape, key) gets one set of expressions:

1. the image (``before`` for a delete, else ``after``) is read with ``from_json`` by a schema object,
   its fields reached by position (a column's name, whatever it holds, is never parsed as SQL);
2. its values are made canonical by Spark expressions (:mod:`.connect_values`) and checked: every value
   converted, every key column there, no field the schema does not name;
3. the row is written as the canonical JSON the reference decoder writes (``row_json``), with the
   column descriptor of its schema (``schema_json``).

An image these expressions cannot make canonical exactly as the reference does is given to the
reference decoder (:func:`cdc_delta.events.envelope.decode_record`) with the record rebuilt byte for byte
(the Connect schema's text and the payload's, as the JsonConverter writes them): the outcome is the
reference's, the same status, reason and values as if it had decoded the record at ingest. A record it
refuses comes out dead, with its rebuilt value, for the dead letters.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, DataType, DoubleType, LongType, StringType, StructField, StructType

from cdc_delta.decode.connect_values import let
from cdc_delta.decode.decoded import DECODED, field
from cdc_delta.decode.images import CORRUPT, STRICT_JSON, ImageSchema, read_schema
from cdc_delta.decode.reference import python_decoded
from cdc_delta.events.envelope import DecodePlan
from cdc_delta.exceptions import CdcDeltaError

_WHICH, _TEXT, _IMAGE, _LANDED_TABLE = "_which", "_text", "_image", "_landed_table"
_REF, _CONNECT = "_ref", "_connect"
_SIDES = "before STRING, after STRING"
_JSON_TYPES: dict[str, DataType] = {
    "bigint": LongType(),
    "double": DoubleType(),
    "boolean": BooleanType(),
    "string": StringType(),
}
"""The types :mod:`.connect_values` reads fields with."""


def raw_images(frame: DataFrame) -> list[tuple[str, str]]:
    """The distinct (schema ref, table) of the rows of ``frame`` (decoded records) whose image is still
    as Debezium wrote it, in one small job."""
    rows = (
        frame.where(field("payload").isNotNull())
        .select(field("schema_ref").alias("ref"), field("table").alias("table"))
        .distinct()
        .collect()
    )
    return sorted((r["ref"], r["table"]) for r in rows)


def canonical_frame(frame: DataFrame, plan: DecodePlan, texts: Mapping[str, str]) -> DataFrame:
    """:func:`made_canonical` of ``frame``, its (schema ref, table) pairs found first (:func:`raw_images`)."""
    return made_canonical(frame, plan, raw_images(frame), texts)


def made_canonical(
    frame: DataFrame, plan: DecodePlan, pairs: Iterable[tuple[str, str]], texts: Mapping[str, str]
) -> DataFrame:
    """``frame`` (the Kafka columns, ``_decoded`` and any others) with every image still as Debezium
    wrote it made canonical: ``row_json`` and ``schema_json`` set, ``payload`` and ``schema_ref`` cleared;
    where the expressions cannot, ``_decoded`` as the reference decodes the record (its table kept) and
    ``value`` the record rebuilt. ``pairs`` are the (schema ref, table) of those rows (:func:`raw_images`),
    ``texts`` holds the Connect schema's text of every ref among them. Lazy: the rows are read twice, once for the
    images made here and once for the few left to the reference (the caller caches the result)."""
    pairs = sorted(set(pairs))
    if not pairs:
        return frame
    missing = sorted({ref for ref, _ in pairs} - set(texts))
    if missing:
        raise CdcDeltaError(
            f"the Connect schema(s) {', '.join(missing)} of landed changes are not in the changelog's schemas "
            "table: their images cannot be read. Restore the schemas table (<changelog>_schemas) from a backup, "
            "or rebuild the tables from the source (a new snapshot)"
        )
    images = {ref: schema for ref in {ref for ref, _ in pairs} if (schema := _image(texts[ref])) is not None}
    shapes: dict[tuple[str, tuple[str, ...]], int] = {}
    distinct: list[tuple[ImageSchema, tuple[str, ...]]] = []
    branches: list[Column] = []
    for ref, table in pairs:
        if ref not in images:
            continue  # a schema this code does not decode (read by another version): the reference decodes it
        schema, key = images[ref], plan.key(table)
        k = shapes.setdefault((schema.shape, key), len(distinct))
        if k == len(distinct):
            distinct.append((schema, key))
        branches += [F.lit(f"{ref}\u0000{table}"), F.lit(k)]
    refs = sorted({ref for ref, _ in pairs})
    raw = field("payload").isNotNull()
    if not distinct:
        return frame.where(~raw).unionByName(_left_to_reference(frame.where(raw), plan, refs, texts))
    known = sorted(images)
    descriptors = F.create_map(*[c for ref in known for c in (F.lit(ref), F.lit(images[ref].descriptor))])
    which = F.element_at(F.create_map(*branches), F.concat_ws("\u0000", field("schema_ref"), field("table")))
    sides = F.from_json(field("payload"), _SIDES, STRICT_JSON)
    text = F.when(field("op") == "d", sides.getField("before")).otherwise(sides.getField("after"))
    columns = frame.columns
    routed = frame.select(*columns, F.when(raw, which).alias(_WHICH), F.when(raw, text).alias(_TEXT))
    parsed = routed.select(*routed.columns, *[_parsed(k, schema) for k, (schema, _) in enumerate(distinct)])
    kept = [c for c in routed.columns if c != _TEXT]
    canonical = parsed.select(*kept, *[_canonical(k, schema, key) for k, (schema, key) in enumerate(distinct)])
    image: Column | None = None
    for k, (schema, _) in enumerate(distinct):
        row_type = canonical.schema[f"_r{k}"].dataType["row"].dataType  # type: ignore[union-attr,index]
        value = F.struct(F.col(f"_r{k}").getField("ok").alias("ok"), _row_json(k, schema, row_type).alias("row_json"))
        image = F.when(F.col(_WHICH) == k, value) if image is None else image.when(F.col(_WHICH) == k, value)
    assert image is not None
    parts = canonical.select(*columns, image.alias(_IMAGE))
    ok = F.coalesce(F.col(_IMAGE).getField("ok"), F.lit(False))
    made = (
        F.col(DECODED)
        .withField("row_json", F.col(_IMAGE).getField("row_json"))
        .withField("schema_json", F.element_at(descriptors, field("schema_ref")))
        .withField("payload", F.lit(None).cast("string"))
        .withField("schema_ref", F.lit(None).cast("string"))
    )
    good = parts.where(~raw | ok).select(
        *[F.when(raw, made).otherwise(F.col(c)).alias(c) if c == DECODED else c for c in columns]
    )
    return good.unionByName(_left_to_reference(parts.where(raw & ~ok).select(*columns), plan, refs, texts))


@functools.lru_cache(maxsize=4096)
def _image(text: str) -> ImageSchema | None:
    """The schema of ``text`` (read once per process: a Connect schema's text is immutable)."""
    return read_schema(text)


def _left_to_reference(rows: DataFrame, plan: DecodePlan, refs: list[str], texts: Mapping[str, str]) -> DataFrame:
    """``rows`` decoded by the reference from their records rebuilt: ``{"schema":<schema>,"payload":<payload>}``,
    the bytes the JsonConverter wrote (the ingest lands only records so written). The table they landed
    for is kept (a dead one's dead letter is that table's)."""
    spark = rows.sparkSession
    schemas = spark.createDataFrame([(ref, texts[ref]) for ref in refs], f"{_REF} string, {_CONNECT} string")
    value = F.concat(F.lit('{"schema":'), F.col(_CONNECT), F.lit(',"payload":'), field("payload"), F.lit("}"))
    columns = rows.columns
    records = rows.join(F.broadcast(schemas), field("schema_ref") == F.col(_REF)).select(
        *[value.cast("binary").alias(c) if c == "value" else c for c in columns], field("table").alias(_LANDED_TABLE)
    )
    decoded = python_decoded(records, plan)
    landed = F.col(DECODED).withField("table", F.col(_LANDED_TABLE))
    return decoded.select(*[landed.alias(c) if c == DECODED else c for c in columns])


def _parsed(k: int, image: ImageSchema) -> Column:
    """``_img<k>``: the image of the records of shape ``k`` (:data:`_WHICH`), parsed by a schema object
    (the names are data, never SQL) and cast by position to fields ``c0``, ``c1``, ... (names that differ
    only in case, say, are never resolved); NULL for other records, which are not even parsed."""
    types = [_JSON_TYPES[convert.json_type] for _, convert in image.columns]
    corrupt = StructField(CORRUPT, StringType())
    names = [name for name, _ in image.columns]
    as_read = StructType([StructField(n, t) for n, t in zip(names, types, strict=True)] + [corrupt])
    positional = StructType([StructField(f"c{i}", t) for i, t in enumerate(types)] + [corrupt])
    options = {**STRICT_JSON, "columnNameOfCorruptRecord": CORRUPT, "mode": "PERMISSIVE"}
    text = F.when(F.col(_WHICH) == k, F.col(_TEXT))
    return F.from_json(text, as_read, options).cast(positional).alias(f"_img{k}")


def _canonical(k: int, image: ImageSchema, keys: Iterable[str]) -> Column:
    """``_r<k>``: for the records of shape ``k``, a struct {ok, row}: the image's values made canonical
    once (``row``, fields ``c0``...) and whether every one converted, every key is there and the image
    holds no other field. SQL over generated operands only (:mod:`.connect_values`); the parsed image
    (``img``) and the canonical values (``r``) are bound once each, so that the expression reads
    ``_img<k>`` once: a filter Spark pushes below these projections inlines it without copies."""
    fields = [f"c{i}" for i in range(len(image.columns))]
    at = {name: field for (name, _), field in zip(image.columns, fields, strict=True)}
    values = ", ".join(
        f"'{f}', {convert.apply(f'img.{f}', _TEXT)}" for f, (_, convert) in zip(fields, image.columns, strict=True)
    )
    checks = ["img IS NOT NULL", f"img.{CORRUPT} IS NULL"]
    checks += [f"(img.{f} IS NULL OR r.{f} IS NOT NULL)" for f in fields]
    checks += [f"r.{at[key]} IS NOT NULL" if key in at else "false" for key in keys]
    checks.append(f"size(json_object_keys({_TEXT})) = {len(fields)}")
    result = f"named_struct('ok', coalesce({' AND '.join(checks)}, false), 'row', r)"
    body = let(f"_img{k}", "img", let(f"named_struct({values})", "r", result))
    return F.expr(f"CASE WHEN {_WHICH} = {k} THEN {body} END").alias(f"_r{k}")


def _row_json(k: int, image: ImageSchema, canonical: StructType) -> Column:
    """The canonical row of shape ``k`` as JSON, its fields named by the columns' names: the row is
    cast by position to a struct type that holds them (``canonical``: the row's type as Spark made it;
    one cast, and no name is ever parsed)."""
    named = StructType([StructField(name, f.dataType) for (name, _), f in zip(image.columns, canonical, strict=True)])
    return F.to_json(F.col(f"_r{k}").getField("row").cast(named), {"ignoreNullFields": "false"})
