"""Making landed images canonical, where a table's changes are read back (merge, live view, rebuild,
replay), not at ingest: the JVM decoder lands an event's image as Debezium wrote it (its envelope's
``payload`` text and a reference to its Connect schema, :mod:`.jvm`), so that the ingest builds nothing
per table and its cost does not grow with the number of tables. Here, for the few tables read at once,
each distinct (image shape, key) gets a plan (:mod:`.connect_values`: per column, how its value is read
and made canonical), and one JVM function of cdc-delta's (:data:`CANONICAL_CLASS`, ``jvm/decoder``)
reads each image once (``before`` for a delete, else ``after``) and writes the row as the canonical JSON
the reference decoder writes (``row_json``), where every value converts exactly as the reference
converts it, every key column holds a value and the image holds every column of its schema and no other
field; the row gets the column descriptor of its schema (``schema_json``).

An image the function does not make canonical is given to the reference decoder
(:func:`cdc_delta.events.envelope.decode_record`) with the record rebuilt byte for byte (the Connect
schema's text and the payload's, as the JsonConverter writes them): the outcome is the reference's, the
same status, reason and values as if it had decoded the record at ingest. A record it refuses comes out
dead, with its rebuilt value, for the dead letters.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from py4j.java_gateway import JavaClass
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.classic.column import _to_java_column, _to_seq

from cdc_delta.columns import ARCHIVE
from cdc_delta.decode.decoded import DECODED, field
from cdc_delta.decode.images import ImageSchema, read_schema
from cdc_delta.decode.jvm import missing_decoder
from cdc_delta.decode.reference import python_decoded
from cdc_delta.events.envelope import DecodePlan
from cdc_delta.exceptions import SchemasMissing
from cdc_delta.local_checkpoint import Held

CANONICAL_CLASS = "io.cdcdelta.decode.CanonicalImage"
"""The JVM function that makes images canonical, cdc-delta's own (``jvm/decoder``, built into the Spark
jars by ``scripts/fetch-jars.sh``, beside the envelope reader)."""
_ROW_JSON, _LANDED_TABLE, _LANDED_OP = "_row_json", "_landed_table", "_landed_op"
_REF, _CONNECT, _LEFT = "_ref", "_connect", "_left_to_reference"


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


def canonical_frame(frame: DataFrame, plan: DecodePlan, texts: Mapping[str, str]) -> Held:
    """:func:`made_canonical` of ``frame``, its (schema ref, table) pairs found first (:func:`raw_images`)."""
    return made_canonical(frame, plan, raw_images(frame), texts)


def made_canonical(
    frame: DataFrame, plan: DecodePlan, pairs: Iterable[tuple[str, str]], texts: Mapping[str, str]
) -> Held:
    """``frame`` (the Kafka columns, ``_decoded`` and any others) with every image still as Debezium
    wrote it made canonical: ``row_json`` and ``schema_json`` set, ``payload`` and ``schema_ref`` cleared;
    where the JVM function does not, ``_decoded`` as the reference decodes the record (its table kept) and
    ``value`` the record rebuilt. ``pairs`` are the (schema ref, table) of those rows (:func:`raw_images`),
    ``texts`` holds the Connect schema's text of every ref among them.

    Computed here, once, and held until the caller releases it: the function runs once per image (the
    rows are checkpointed locally with its output), and the rows it leaves to the reference (usually
    none) are decoded by it and cached beside; every later query reads the held rows."""
    pairs = sorted(set(pairs))
    lacking: dict[str, list[str]] = {}
    for ref, table in pairs:
        if ref not in texts:
            lacking.setdefault(table, []).append(ref)
    if lacking:
        missing = sorted({ref for refs in lacking.values() for ref in refs})
        raise SchemasMissing(
            f"the Connect schema(s) {', '.join(missing)} of landed changes of {', '.join(sorted(lacking))} are not "
            "in the changelog's schemas table: their images cannot be read. Restore the schemas table "
            "(<changelog>_schemas) from a backup",
            lacking,
        )
    images = images_of(pairs, texts)
    plans = function_plans(pairs, images, plan)
    columns = frame.columns
    raw = field("payload").isNotNull()
    if plans["shapes"]:
        descriptors = F.create_map(*[c for ref in sorted(images) for c in (F.lit(ref), F.lit(images[ref].descriptor))])
        made_by = _canonical_image(frame.sparkSession, json.dumps(plans))
        # A purge's archived delete (op a) is read as the delete it is: its before image.
        op = F.when(field("op") == ARCHIVE, F.lit("d")).otherwise(field("op"))
        row_json = made_by(field("payload").cast("binary"), op, field("schema_ref"), field("table"))
        # Two projections: the function's output is a column of the first, read twice by the second (an
        # expression of a nondeterministic function is never merged into the expressions that read it).
        parts = frame.select(*columns, F.when(raw, row_json).alias(_ROW_JSON))
        ok = F.col(_ROW_JSON).isNotNull()
        made = (
            F.col(DECODED)
            .withField("row_json", F.col(_ROW_JSON))
            .withField("schema_json", F.element_at(descriptors, field("schema_ref")))
            .withField("payload", F.lit(None).cast("string"))
            .withField("schema_ref", F.lit(None).cast("string"))
        )
        decoded = F.when(raw & ok, made).otherwise(F.col(DECODED))
        parts = parts.select(*[decoded.alias(c) if c == DECODED else c for c in columns], (raw & ~ok).alias(_LEFT))
    else:
        parts = frame.select(*columns, raw.alias(_LEFT))  # none made here: every raw image is the reference's
    held = parts.localCheckpoint(eager=True)
    made_rows = held.where(~F.col(_LEFT)).select(*columns)
    left = held.where(F.col(_LEFT)).select(*columns)
    if left.isEmpty():
        return Held(made_rows, held)
    refs = sorted({ref for ref, _ in pairs})
    decoded_rows = _left_to_reference(left, plan, refs, texts).persist(StorageLevel.MEMORY_AND_DISK)
    return Held(made_rows.unionByName(decoded_rows), held, decoded_rows)


def images_of(pairs: Iterable[tuple[str, str]], texts: Mapping[str, str]) -> dict[str, ImageSchema]:
    """The image schema of each ref of ``pairs`` whose Connect schema (its text in ``texts``) this code
    decodes; the others (read by another version) are left to the reference."""
    refs = {ref for ref, _ in pairs}
    return {ref: schema for ref in refs if (schema := _image(texts[ref])) is not None}


def function_plans(
    pairs: Iterable[tuple[str, str]], images: Mapping[str, ImageSchema], plan: DecodePlan
) -> dict[str, Any]:
    """The plans of the JVM function (:data:`CANONICAL_CLASS`) for the (schema ref, table) ``pairs``:
    each pair whose ref is in ``images`` routed to its shape (its columns and the table's key)."""
    shapes: dict[tuple[str, tuple[str, ...]], int] = {}
    plans: dict[str, Any] = {"routes": {}, "shapes": []}
    for ref, table in sorted(set(pairs)):
        if ref not in images:
            continue  # a schema this code does not decode (read by another version): the reference decodes it
        schema, key = images[ref], plan.key(table)
        k = shapes.setdefault((schema.shape, key), len(plans["shapes"]))
        if k == len(plans["shapes"]):
            plans["shapes"].append(_shape(schema, key))
        plans["routes"][f"{ref}\u0000{table}"] = k
    return plans


@functools.lru_cache(maxsize=4096)
def _image(text: str) -> ImageSchema | None:
    """The schema of ``text`` (read once per process: a Connect schema's text is immutable)."""
    return read_schema(text)


def _left_to_reference(rows: DataFrame, plan: DecodePlan, refs: list[str], texts: Mapping[str, str]) -> DataFrame:
    """``rows`` decoded by the reference from their records rebuilt: ``{"schema":<schema>,"payload":<payload>}``,
    the bytes the JsonConverter wrote (the ingest lands only records so written). The table they landed
    for is kept (a dead one's dead letter is that table's). A row whose schema ref is not among ``refs``
    fails the query, naming the ref: it is never dropped."""
    spark = rows.sparkSession
    schemas = spark.createDataFrame([(ref, texts[ref]) for ref in refs], f"{_REF} string, {_CONNECT} string")
    unknown = F.raise_error(F.concat(F.lit("a landed change's Connect schema ref is not known: "), field("schema_ref")))
    connect = F.when(F.col(_REF).isNull(), unknown).otherwise(F.col(_CONNECT))
    value = F.concat(F.lit('{"schema":'), connect, F.lit(',"payload":'), field("payload"), F.lit("}"))
    columns = rows.columns
    records = rows.join(F.broadcast(schemas), field("schema_ref") == F.col(_REF), "left").select(
        *[value.cast("binary").alias(c) if c == "value" else c for c in columns],
        field("table").alias(_LANDED_TABLE),
        field("op").alias(_LANDED_OP),
    )
    decoded = python_decoded(records, plan)
    landed = F.col(DECODED).withField("table", F.col(_LANDED_TABLE))
    archived = (F.col(_LANDED_OP) == ARCHIVE) & (field("op") == "d")  # a purge's delete, landed archived
    landed = landed.withField("op", F.when(archived, F.lit(ARCHIVE)).otherwise(field("op")))
    return decoded.select(*[landed.alias(c) if c == DECODED else c for c in columns])


def _shape(schema: ImageSchema, key: tuple[str, ...]) -> dict[str, Any]:
    """One shape of the JVM function's plan: its columns ([name, kind, a, b], in the schema's order) and
    the positions of the table's key columns (-1 for a key the schema does not hold: never made here)."""
    at = {name: i for i, (name, _) in enumerate(schema.columns)}
    return {
        "columns": [convert.spec(name) for name, convert in schema.columns],
        "keys": [at.get(column, -1) for column in key],
    }


def _canonical_image(spark: SparkSession, plans: str) -> Callable[..., Column]:
    """The JVM function (:data:`CANONICAL_CLASS`) that makes the images of ``plans`` canonical, as a
    function of (payload bytes, op, schema ref, table) columns: the row's canonical JSON, or NULL where
    the reference must decide. Applied unnamed (nothing registered per call); the plans travel once, in
    the function object."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    made_by = jvm
    for part in CANONICAL_CLASS.split("."):
        made_by = getattr(made_by, part)
    if not isinstance(made_by, JavaClass):  # py4j's stand-in for a class the JVM cannot load
        raise missing_decoder("canonical-image function", CANONICAL_CLASS)
    function = made_by.function(plans)

    def apply(*columns: Column) -> Column:
        return Column(function.apply(_to_seq(spark.sparkContext, [_to_java_column(c) for c in columns])))

    return apply
