"""The reference decoder (:func:`cdc_delta.events.envelope.decode_record`) over a DataFrame of Kafka
records, as a row-at-a-time Python UDF: for the records the JVM leaves to it (few, usually none)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_delta.decode.decoded import DECODED, decoded_schema
from cdc_delta.events.envelope import Decoded, DecodePlan, decode_record


def python_decoded(records: DataFrame, plan: DecodePlan) -> DataFrame:
    """``records`` (the Kafka columns and any others) with ``_decoded`` as the reference decoder
    decodes each record (in place of a ``_decoded`` they hold)."""

    def decode(topic: str, partition: int, offset: int, value: Any) -> Decoded:
        return decode_record(topic, partition, offset, None if value is None else bytes(value), plan)

    udf = F.udf(decode, decoded_schema())
    kept = [c for c in records.columns if c != DECODED]
    return records.select(*kept, udf("topic", "partition", "offset", "value").alias(DECODED))
