"""Reading the changelog back: the changes of some tables past the landing each has merged, in the
decoded form the merger types (the Kafka columns and the ``_decoded`` struct of
:mod:`cdc_delta.decode.decoded`), and what has landed since a landing, per table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dc_field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_delta.changelog.table import LAND_SEQ, TABLE, added_fields, changelog_path, schemas_path
from cdc_delta.config import AppConfig
from cdc_delta.decode.canonical import made_canonical
from cdc_delta.decode.decoded import DECODED, decoded_schema, field, is_dead, is_row_event, is_truncate
from cdc_delta.decode.images import is_schema_ref
from cdc_delta.decode.plan import decode_plan
from cdc_delta.events.envelope import OK
from cdc_delta.events.ordering import Seq
from cdc_delta.local_checkpoint import Held

LANDED_AT = "landed_at"


def changes(spark: SparkSession, config: AppConfig, bounds: Mapping[str, tuple[int, int]]) -> Held:
    """The changelog rows of each table in ``bounds`` whose landing is in ``(after, through]``, as
    decoded records: the Kafka columns (the value null but where the reference decoded a record again,
    below), ``land_seq``, ``landed_at``, ``batch_id`` and the ``_decoded`` struct with the row's
    canonical image (``row_json``) and column descriptor (``schema_json``). Images landed as Debezium
    wrote them are made canonical here (:mod:`cdc_delta.decode.canonical`; a small job first finds
    their schemas); one the JVM function cannot make canonical is decoded by the reference from its
    record rebuilt, and comes out dead (with its value) where the reference refuses it. Read here, once,
    and held until the caller releases them."""
    path, schemas = changelog_path(config), schemas_path(config)
    limits = spark.createDataFrame(
        [(table, after, through) for table, (after, through) in sorted(bounds.items())],
        f"`{TABLE}` string, _after bigint, _through bigint",
    )
    low = min((after for after, _ in bounds.values()), default=-1)
    high = max((through for _, through in bounds.values()), default=-1)
    landed = spark.read.format("delta").load(path)
    # A changelog from before the later columns (a reader does not alter it: the stream adds them).
    landed = landed.select(
        "*", *[F.lit(None).cast(f.dataType).alias(f.name) for f in added_fields() if f.name not in landed.columns]
    )
    rows = (
        landed.where((F.col(LAND_SEQ) > low) & (F.col(LAND_SEQ) <= high) & F.col(TABLE).isin(sorted(bounds)))
        .join(F.broadcast(limits), TABLE)
        .where((F.col(LAND_SEQ) > F.col("_after")) & (F.col(LAND_SEQ) <= F.col("_through")))
    )
    stored = spark.read.format("delta").load(schemas).dropDuplicates(["schema_id"])
    # The descriptors only are joined (small); the Connect schemas' texts (kilobytes each) are read on
    # the driver, those of the pending rows' refs only.
    descriptors = stored.where(~is_schema_ref(F.col("schema_id")))
    rows = rows.join(F.broadcast(descriptors), "schema_id", "left")
    raw = is_schema_ref(F.col("schema_id"))
    fields = {
        "status": F.lit(OK),
        "reason": F.lit(None).cast("string"),
        "table": F.col(TABLE),
        "op": F.col("op"),
        "source_db": F.col("source_db"),
        "source_table": F.col("source_table"),
        "seq": F.col("seq"),
        "source_ts_ms": F.col("source_ts_ms"),
        "row_json": F.col("row_json"),
        "schema_json": F.when(~raw, F.col("schema_json")),
        "payload": F.col("payload"),
        "schema_ref": F.when(raw, F.col("schema_id")),
        "redacted": F.lit(None).cast("string"),
        "txn": F.col("txn"),
    }
    assert list(fields) == decoded_schema().names
    frame = rows.select(
        "topic",
        "partition",
        "offset",
        F.col("kafka_timestamp").alias("timestamp"),
        "key",
        F.lit(None).cast("binary").alias("value"),
        LAND_SEQ,
        LANDED_AT,
        "batch_id",
        F.struct(*[value.alias(name) for name, value in fields.items()]).alias(DECODED),
    )
    # Found from the (small) ids, not from the payloads.
    found = rows.where(raw).select(F.col("schema_id").alias("ref"), F.col(TABLE).alias("tbl")).distinct().collect()
    pairs = sorted((r["ref"], r["tbl"]) for r in found)
    refs = sorted({ref for ref, _ in pairs})
    texts = {}
    if refs:  # none where every pending row is canonical (Avro, a changelog from before): nothing to read
        texts = {r["schema_id"]: r["schema_json"] for r in stored.where(F.col("schema_id").isin(refs)).collect()}
    return made_canonical(frame, decode_plan(config), pairs, texts)


@dataclass(frozen=True)
class Landed:
    """What a table holds in the landings past some point."""

    table: str
    events: int
    newest_seq: int
    oldest_landed_at: float
    """Seconds since the epoch."""


def landed_since(spark: SparkSession, path: str, positions: Mapping[str, int], default_after: int) -> list[Landed]:
    """Per table, the changes landed past its position (``positions``; ``default_after`` for a table
    not in it), in one job over the landings past the smallest of them."""
    low = min([*positions.values(), default_after])
    known = spark.createDataFrame(sorted(positions.items()), f"`{TABLE}` string, _after bigint")
    rows = (
        spark.read.format("delta")
        .load(path)
        .where((F.col(LAND_SEQ) > low) & F.col(TABLE).isNotNull())  # not the transactions' ENDs
        .join(F.broadcast(known), TABLE, "left")
        .where(F.col(LAND_SEQ) > F.coalesce(F.col("_after"), F.lit(default_after)))
        .groupBy(TABLE)
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.max(LAND_SEQ).alias("newest"),
            F.min(F.unix_micros(F.col(LANDED_AT))).alias("oldest"),
        )
        .collect()
    )
    return [Landed(r[TABLE], r["n"], r["newest"], r["oldest"] / 1e6) for r in rows]


@dataclass(frozen=True)
class Truncate:
    """One truncate among the changes (op ``t``: a TRUNCATE or a DROP TABLE of its source table)."""

    source_db: str | None
    source_table: str | None
    seq: Seq
    land_seq: int


@dataclass
class TableSummary:
    """One table's share of some changes: how many, their distinct column descriptors (each with its
    earliest change), truncates and newest source time."""

    events: int = 0
    dead: int = 0
    """Changes the reference decoder refused where their images were made canonical (dead letters)."""
    descriptors: dict[str, Seq] = dc_field(default_factory=dict)
    first_landings: dict[str, int] = dc_field(default_factory=dict)
    """The landing of each descriptor's first change."""
    truncates: list[Truncate] = dc_field(default_factory=list)
    max_ts: int | None = None


def table_summaries(frame: DataFrame) -> dict[str, TableSummary]:
    """Per table of ``frame`` (:func:`changes`): its :class:`TableSummary`, in one small job."""
    truncate = F.when(is_truncate(), F.struct(field("source_db"), field("source_table"), field("seq"), F.col(LAND_SEQ)))
    rows = (
        frame.groupBy(field("table").alias("table"), F.when(is_row_event(), field("schema_json")).alias("descriptor"))
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.count_if(is_dead()).alias("dead"),
            F.min(field("seq")).alias("min_seq"),
            F.min(LAND_SEQ).alias("min_land"),
            F.max(field("source_ts_ms")).alias("max_ts"),
            F.collect_set(truncate).alias("truncates"),
        )
        .collect()
    )
    out: dict[str, TableSummary] = {}
    for r in rows:
        summary = out.setdefault(r["table"], TableSummary())
        summary.events += r["n"]
        summary.dead += r["dead"]
        if r["descriptor"] is not None:
            summary.descriptors[r["descriptor"]] = Seq(*r["min_seq"])
            summary.first_landings[r["descriptor"]] = r["min_land"]
        summary.truncates += [Truncate(t[0], t[1], Seq(*t[2]), t[3]) for t in r["truncates"]]
        if r["max_ts"] is not None:
            summary.max_ts = max(summary.max_ts or 0, r["max_ts"])
    return out
