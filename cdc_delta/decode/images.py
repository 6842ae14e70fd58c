"""The image schemas of Debezium's JSON envelopes, as the JVM decoder reads them: per Connect schema,
its column descriptor (the ``schema_json`` the reference decoder writes) and how each column is read
and made canonical (:mod:`.connect_values`); and the reference by which a changelog row names the
Connect schema its image was written with (:func:`schema_ref`)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_delta.decode.connect_values import Conversion, conversion
from cdc_delta.events.envelope import descriptor_entry, image_fields

REF_PREFIX = "x"


@dataclass(frozen=True)
class ImageSchema:
    """One distinct Connect schema, read on the driver."""

    descriptor: str
    """The ``schema_json`` the reference writes for events of this schema."""
    columns: tuple[tuple[str, Conversion], ...]
    """Per column of the image, how the JVM reads it and makes it canonical."""
    shape: str = ""
    """The image's field schemas as text: schemas of one shape (the tables of a sharded or a generated
    estate, each with an envelope schema of its own) are made canonical alike, by one plan."""
    text: str = ""
    """The Connect schema's text, as the records carry it."""


def read_schema(text: str | None) -> ImageSchema | None:
    """The image columns of an envelope schema; None where the JVM cannot decode its events exactly
    (also where there is no schema)."""
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
    if not after or before != after:
        return None  # no before (a delete's image would be typed by its values) or a before of its own
    columns = []
    for name, field in after.items():
        convert = conversion(field)
        if convert is None or not isinstance(name, str):
            return None
        columns.append((name, convert))
    descriptor = json.dumps([descriptor_entry(name, field) for name, field in after.items()])
    return ImageSchema(descriptor, tuple(columns), json.dumps(list(after.values()), sort_keys=True), text)


def schema_ref(schema_id: int) -> str:
    """The reference a changelog row holds to the Connect schema of its image: its schema id (a 64-bit
    hash of the schema's text, :mod:`.jvm`) as ``x`` and 16 hex digits. It cannot be mistaken for the
    id of a column descriptor (:func:`cdc_delta.changelog.table.schema_id`: 24 hex digits)."""
    return f"{REF_PREFIX}{schema_id & 0xFFFFFFFFFFFFFFFF:016X}"


def is_schema_ref(schema_id: Column) -> Column:
    """Whether a changelog row's ``schema_id`` is a Connect schema's reference (its image is as Debezium
    wrote it), not a column descriptor's id."""
    return schema_id.startswith(REF_PREFIX)


def schema_ref_column(schema_id: Column) -> Column:
    """:func:`schema_ref` of a column of schema ids, in Spark."""
    return F.concat(F.lit(REF_PREFIX), F.lpad(F.hex(schema_id), 16, "0"))
