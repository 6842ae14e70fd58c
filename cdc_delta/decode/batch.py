"""Decode a Kafka micro-batch on the executors. JSON: in the JVM where it can be done exactly
(:mod:`.jvm`), else with the reference decoder (:func:`cdc_delta.events.envelope.decode_record`)
as a Python UDF, only for the records that need it. Avro: with fastavro over Arrow batches
(:mod:`.avro`). :func:`decoder_for` picks by ``kafka.value_format``."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from dataclasses import field as dc_field

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_delta import local_checkpoint
from cdc_delta.config import AppConfig
from cdc_delta.decode.avro import decode_avro_batch
from cdc_delta.decode.decoded import DECODED, KAFKA_COLUMNS
from cdc_delta.decode.images import ImageSchema, schema_ref
from cdc_delta.decode.jvm import ENV_COLUMNS, FAST, Landable, envelopes, fast_decoded, probe
from cdc_delta.decode.reference import python_decoded
from cdc_delta.decode.schema_registry import AvroSchemas
from cdc_delta.events.envelope import DecodePlan
from cdc_delta.events.record_keys import json_key_columns
from cdc_delta.local_checkpoint import Held

logger = logging.getLogger(__name__)


_OFFSET = ("topic", "partition", "offset")


@dataclass(frozen=True)
class DecodedBatch(Held):
    """A decoded micro-batch, held until :meth:`release`: ``frame`` holds the Kafka columns and the
    ``_decoded`` struct of every record; the value is null where the JVM decoded the record
    (:meth:`with_values` reads it again). :attr:`checkpointed` holds the JVM-decoded records (every
    query of the batch plans over a short lineage, not over the decoding expression, large with many
    schemas), :attr:`cached` those the reference decoder decoded."""

    raw: DataFrame = dc_field(kw_only=True)
    """The batch as the source gives it (the Kafka columns), read again only for values."""

    def with_values(self, rows: DataFrame, broadcast: bool = True) -> DataFrame:
        """``rows`` of :attr:`frame` with every Kafka value, byte for byte: read again from the batch
        (a pass over it; for dead letters of a stopped table, not on the usual path). ``broadcast``:
        ``rows`` are few."""
        return with_values(rows, self.raw, broadcast)


def with_values(rows: DataFrame, raw: DataFrame, broadcast: bool = True) -> DataFrame:
    """``rows`` (the Kafka columns and more; few, where ``broadcast``) with the value of each from ``raw``."""
    found = raw.select(*_OFFSET, F.col("value").alias("_raw_value"))
    joined = found.join(F.broadcast(rows) if broadcast else rows, list(_OFFSET))
    return joined.select(*[F.col("_raw_value").alias(c) if c == "value" else c for c in rows.columns])


def decode_batch(
    batch: DataFrame,
    plan: DecodePlan,
    schemas: dict[int, ImageSchema | None] | None = None,
    met: set[int] | None = None,
    landable: Landable | None = None,
) -> DecodedBatch:
    """Decode ``batch`` (the Kafka source's columns). The batch is first coalesced to the cluster's
    parallelism, so that no job of the batch runs one small task per Kafka partition, read once, its
    envelopes parsed once and decoded in the same pass, into a local checkpoint, where their (source
    table, schema) pair is among ``landable``, the pairs landed before; the records left keep their
    parsed envelope (without the value, but with the schema's text of one record a task of each schema
    not met before). The probe reads the distinct schemas of those; where it finds pairs to land, the
    records left are decoded again with them, into another checkpoint. The records the JVM leaves to the
    reference decoder (few, usually none) are read again with their values, decoded by it and cached
    beside. ``schemas`` keeps the Connect schemas read, by id, ``met`` the schema ids met on records left
    (see :func:`~.jvm.probe`), and ``landable`` the pairs landed, from one batch to the next: in the steady
    state (no new source table, no new schema) the batch is read once."""
    spark = batch.sparkSession
    raw = batch.coalesce(spark.sparkContext.defaultParallelism)
    known: Landable = {} if landable is None else landable
    # Read from Kafka and parsed once, held as rows: a cache (persist) would build compressed columns,
    # which took a third longer over the batch of one table (200k records: 9.6 s against 7.1 s).
    env = envelopes(raw, {*(schemas or {}), *(met or ())})
    first = fast_decoded(env, known, keep_left=True).localCheckpoint(eager=True)
    try:
        candidates = _left_decoded(raw, first, plan, schemas, met, known)
    except BaseException:
        local_checkpoint.release(first)
        raise
    fast = candidates.where(F.col(FAST).isNotNull()).select(*KAFKA_COLUMNS, F.col(FAST).alias(DECODED))
    rest = candidates.where(F.col(FAST).isNull()).select(*KAFKA_COLUMNS)
    if rest.isEmpty():
        return DecodedBatch(fast, candidates, raw=raw)
    slow = python_decoded(with_values(rest, raw), plan).persist(StorageLevel.MEMORY_AND_DISK)
    return DecodedBatch(fast.unionByName(slow), candidates, slow, raw=raw)


def _left_decoded(
    raw: DataFrame,
    first: DataFrame,
    plan: DecodePlan,
    schemas: dict[int, ImageSchema | None] | None,
    met: set[int] | None,
    known: Landable,
) -> DataFrame:
    """``first``, the batch's first pass (checkpointed), where the probe of the records it left finds no
    pair to land; else, in another checkpoint (``first`` released), those records decoded again with the
    pairs found (``known`` gains them) beside the records ``first`` decoded."""
    left = first.where(F.col(FAST).isNull())
    found = probe(raw, left, plan, schemas, met)
    if found.keys() <= known.keys():
        return first
    known.update(found)
    decoded = first.where(F.col(FAST).isNotNull()).select(*KAFKA_COLUMNS, FAST)
    again = fast_decoded(left.select(*ENV_COLUMNS), known)
    try:
        return decoded.unionByName(again).localCheckpoint(eager=True)
    finally:
        local_checkpoint.release(first)


class JsonDecoder:
    """Decodes the stream's JSON batches; keeps the Connect schemas read, by id, the ids met and the
    (source table, schema) pairs landed, from batch to batch."""

    def __init__(self, plan: DecodePlan) -> None:
        self.plan = plan
        self.schemas: dict[int, ImageSchema | None] = {}
        self.met: set[int] = set()
        self.landable: Landable = {}

    def __call__(self, batch: DataFrame) -> DecodedBatch:
        return decode_batch(batch, self.plan, self.schemas, self.met, self.landable)

    def connect_schemas(self) -> dict[str, str]:
        """The Connect schemas read so far whose images land as Debezium wrote them, by reference
        (:func:`~.images.schema_ref`): their texts, for the changelog's schemas table."""
        return {schema_ref(i): s.text for i, s in self.schemas.items() if s is not None}

    def key_columns(self, key: bytes | None) -> tuple[str, ...]:
        """The columns of a record's key (:func:`~cdc_delta.events.record_keys.json_key_columns`)."""
        return json_key_columns(key)


class AvroDecoder:
    """Decodes the stream's Avro batches; keeps the registry's schemas, by id, from batch to batch."""

    def __init__(self, plan: DecodePlan, schemas: AvroSchemas) -> None:
        self.plan = plan
        self.schemas = schemas

    def __call__(self, batch: DataFrame) -> DecodedBatch:
        decoded = decode_avro_batch(batch, self.plan, self.schemas)
        return DecodedBatch(decoded, decoded, raw=batch)

    def connect_schemas(self) -> dict[str, str]:
        """None: Avro images are made canonical at ingest."""
        return {}

    def key_columns(self, key: bytes | None) -> tuple[str, ...]:
        """The columns of a record's Avro key, from the registry."""
        return self.schemas.key_columns(key)


def decoder_for(config: AppConfig, plan: DecodePlan) -> JsonDecoder | AvroDecoder:
    """The decoder of ``kafka.value_format``."""
    if config.kafka.value_format == "avro":
        return AvroDecoder(plan, AvroSchemas(config.schema_registry, config.kafka.unescape_field_names))
    return JsonDecoder(plan)
