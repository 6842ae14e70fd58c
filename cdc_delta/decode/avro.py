"""Decode a micro-batch of Avro envelopes (Confluent wire format) on the executors, vectorised: one
``mapInArrow`` pass reads each Arrow batch of records with fastavro into the JSON decoder's form
(:func:`cdc_delta.events.avro.decode_avro`), so that everything after decoding is shared with JSON."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from cdc_delta.decode.decoded import DECODED, KAFKA_COLUMNS, decoded_schema
from cdc_delta.decode.schema_registry import AvroSchemas
from cdc_delta.events.avro import HEADER_BYTES, MAGIC, AvroEnvelope, UnsupportedSchema, decode_avro
from cdc_delta.events.envelope import DecodePlan, undecodable


def registry_id_column() -> Column:
    """The schema id of a record in the Confluent wire format, NULL for any other value."""
    framed = (F.octet_length("value") >= HEADER_BYTES) & (F.substring("value", 1, 1) == F.lit(bytes([MAGIC])))
    return F.when(framed, F.conv(F.hex(F.substring("value", 2, 4)), 16, 10).cast("bigint"))


@functools.lru_cache(maxsize=1024)
def _envelope(registry_id: int, text: str, unescape_names: bool) -> AvroEnvelope | str:
    """Each schema parsed once per Python worker process (workers are reused across tasks)."""
    try:
        return AvroEnvelope.from_text(registry_id, text, unescape_names)
    except UnsupportedSchema as exc:
        return f"not a Debezium envelope schema: {exc}"


def _row(decoded: Any) -> dict[str, Any]:
    row = decoded._asdict()
    for nested in ("seq", "txn"):
        if row[nested] is not None:
            row[nested] = row[nested]._asdict()
    return row


def _arrow(rows: list[dict[str, Any]], decoded_type: Any) -> Any:
    """The decoded rows as an Arrow array; a row Arrow cannot hold (a value out of its field's range)
    becomes the dead letter of its record, not the failure of the batch."""
    import pyarrow as pa

    try:
        return pa.array(rows, type=decoded_type)
    except Exception:  # noqa: BLE001 (found row by row below)
        fitting = []
        for row in rows:
            try:
                pa.array([row], type=decoded_type)
                fitting.append(row)
            except Exception as exc:  # noqa: BLE001 (that record's failure, whatever it is)
                fitting.append(_row(undecodable(exc)))
        return pa.array(fitting, type=decoded_type)


def avro_decoded(
    records: DataFrame, plan: DecodePlan, texts: Mapping[int, str], reasons: Mapping[int, str], unescape_names: bool
) -> DataFrame:
    """The Kafka columns and ``_decoded`` of every record of ``records``. ``texts`` holds the schema
    text of every schema id of the records that can be decoded, ``reasons`` why each other cannot."""
    from pyspark.sql.pandas.types import to_arrow_type

    kafka = records.select(*KAFKA_COLUMNS)
    schema = StructType([*kafka.schema.fields, StructField(DECODED, decoded_schema())])
    decoded_type = to_arrow_type(decoded_schema())
    texts, reasons = dict(texts), dict(reasons)

    def decode(batches: Iterable[Any]) -> Iterable[Any]:
        import pyarrow as pa

        envelopes: dict[int, AvroEnvelope | str] = dict(reasons)
        for registry_id, text in texts.items():
            envelopes[registry_id] = _envelope(registry_id, text, unescape_names)
        for batch in batches:
            columns = batch.to_pydict()
            rows = [
                _row(decode_avro(topic, partition, offset, value, envelopes, plan))
                for topic, partition, offset, value in zip(
                    columns["topic"], columns["partition"], columns["offset"], columns["value"], strict=True
                )
            ]
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, _arrow(rows, decoded_type)], names=[*batch.schema.names, DECODED]
            )

    return kafka.mapInArrow(decode, schema)


def decode_avro_batch(batch: DataFrame, plan: DecodePlan, schemas: AvroSchemas) -> DataFrame:
    """The decoded batch, checkpointed locally: decoded once, read by every query of the batch. The
    batch is coalesced to the cluster's parallelism and cached while a small job finds its schema ids,
    which are read from the registry on the driver (new ids only)."""
    spark = batch.sparkSession
    raw = batch.select(*KAFKA_COLUMNS).coalesce(spark.sparkContext.defaultParallelism)
    raw = raw.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        ids = [r[0] for r in raw.where(F.col("value").isNotNull()).select(registry_id_column()).distinct().collect()]
        reasons = schemas.read(i for i in ids if i is not None)
        texts = {i: schemas.texts[i] for i in ids if i in schemas.texts}
        decoded = avro_decoded(raw, plan, texts, reasons, schemas.unescape_names).localCheckpoint(eager=True)
    finally:
        raw.unpersist()
    return decoded
