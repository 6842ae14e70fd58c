"""Debezium envelopes in Avro, Confluent wire format, read with fastavro into the JSON decoder's form.

A record is ``0x00``, a 4-byte big-endian schema id, then the Avro binary of the envelope. Its writer
schema comes from a schema registry (:mod:`cdc_delta.decode.schema_registry`) by id. Debezium's Avro
schemas are Kafka Connect schemas written by Confluent's ``AvroData``: a Connect type Avro lacks is
an Avro type plus properties (``connect.name`` for the logical name, ``connect.parameters``,
``connect.version``, ``connect.type`` for int8/int16, ``connect.default``), and an optional field is a
union with ``null``. :class:`AvroEnvelope` turns such a schema back into the Connect schema that
Debezium's JsonConverter would have written, and each datum into the payload JsonConverter would have
written (bytes as base64, the Avro logical types left as their Connect integers), so that every record
ends in :func:`cdc_delta.events.envelope.decode_message`, exactly as a JSON record does: the same
types, values, defaults, routing, ordering key and dead-letter reasons.
"""

from __future__ import annotations

import base64
import io
import json
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fastavro import parse_schema, schemaless_reader

from cdc_delta.events.envelope import (
    DEAD,
    SKIP,
    TOMBSTONE,
    Decoded,
    DecodePlan,
    KnownImage,
    decode_message,
    undecodable,
)

MAGIC = 0
HEADER_BYTES = 5
_PRIMITIVES = {
    "boolean": "boolean",
    "int": "int32",
    "long": "int64",
    "float": "float",
    "double": "double",
    "bytes": "bytes",
    "string": "string",
}
_MAP_ENTRY = "io.confluent.connect.avro.MapEntry"
_UNICODE_ESCAPE = re.compile(r"_u([0-9a-fA-F]{4})")

Convert = Callable[[Any], Any]


def registry_id(value: bytes) -> int | None:
    """The schema id of a value in the Confluent wire format; None for anything else."""
    if len(value) < HEADER_BYTES or value[0] != MAGIC:
        return None
    return int.from_bytes(value[1:HEADER_BYTES], "big")


def unescape_name(name: str) -> str:
    """A field name as Debezium's ``field.name.adjustment.mode: avro_unicode`` wrote it (every character
    Avro does not allow, and ``_`` itself, as ``_uXXXX``), back to the column's own name."""
    return _UNICODE_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), name)


def _float32(value: float) -> float:
    """A 4-byte float as the shortest decimal that reads back to it, as Java's Float.toString (and so
    JsonConverter) writes it, not the double it widens to (1.1, not 1.100000023841858)."""
    for digits in range(6, 10):
        text = float(f"{value:.{digits}g}")
        if struct.unpack("<f", struct.pack("<f", text))[0] == value:
            return text
    return value


def _base64(value: bytes | bytearray) -> str:
    return base64.b64encode(value).decode("ascii")


class UnsupportedSchema(ValueError):
    """An Avro schema that is not one AvroData writes for a Connect schema."""


@dataclass
class _Names:
    """The named types (records, enums, fixed) seen so far in one schema, by full name."""

    types: dict[str, dict[str, Any]]
    rename: Callable[[str], str]

    def full_name(self, name: str, namespace: str | None) -> str:
        return name if "." in name or not namespace else f"{namespace}.{name}"

    def resolve(self, name: str, namespace: str | None) -> dict[str, Any]:
        for candidate in (self.full_name(name, namespace), name):
            if candidate in self.types:
                return self.types[candidate]
        raise UnsupportedSchema(f"the Avro schema refers to type {name!r} before defining it")


def _connect_meta(schema: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """The Connect schema properties AvroData keeps in an Avro schema's ``connect.*`` properties."""
    if "connect.name" in schema:
        out["name"] = schema["connect.name"]
    if "connect.version" in schema:
        out["version"] = schema["connect.version"]
    if "connect.doc" in schema:
        out["doc"] = schema["connect.doc"]
    if isinstance(schema.get("connect.parameters"), dict):
        out["parameters"] = {str(k): str(v) for k, v in schema["connect.parameters"].items()}
    return out


def _is_map_entry(schema: Any) -> bool:
    return (
        isinstance(schema, dict)
        and schema.get("type") == "record"
        and (
            f"{schema.get('namespace', '')}.{schema.get('name')}" == _MAP_ENTRY
            or schema.get("name") == _MAP_ENTRY
            or schema.get("connect.internal.type") == "MapEntry"
        )
    )


class _Reader:
    """Walks one Avro schema: its Connect schema (JsonConverter's JSON form) and the function that makes
    a datum fastavro read into JsonConverter's value form (None where the datum already is)."""

    def __init__(self, rename: Callable[[str], str]) -> None:
        self.names = _Names({}, rename)

    def connect(
        self, schema: Any, namespace: str | None, optional: bool = False
    ) -> tuple[dict[str, Any], Convert | None]:
        if isinstance(schema, list):
            return self._union(schema, namespace)
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return self._primitive({"type": schema}, optional)
            return self.connect(self.names.resolve(schema, namespace), namespace, optional)
        if not isinstance(schema, dict) or "type" not in schema:
            raise UnsupportedSchema(f"not an Avro schema: {schema!r}")
        kind = schema["type"]
        if isinstance(kind, (dict, list)):
            return self.connect(kind, namespace, optional)
        if kind in _PRIMITIVES:
            return self._primitive(schema, optional)
        if kind == "record":
            return self._record(schema, namespace, optional)
        if kind == "enum":
            self._define(schema, namespace)
            return _connect_meta(schema, {"type": "string", "optional": optional}), None
        if kind == "fixed":
            self._define(schema, namespace)
            return _connect_meta(schema, {"type": "bytes", "optional": optional}), _bytes_value
        if kind == "array":
            return self._array(schema, namespace, optional)
        if kind == "map":
            values, convert = self.connect(schema["values"], namespace)
            out = {"type": "map", "keys": {"type": "string", "optional": False}, "values": values, "optional": optional}
            return _connect_meta(schema, out), None if convert is None else _map_values(convert)
        raise UnsupportedSchema(f"Avro type {kind!r} has no Kafka Connect equivalent")

    def _primitive(self, schema: dict[str, Any], optional: bool) -> tuple[dict[str, Any], Convert | None]:
        kind = schema["type"]
        connect_type = _PRIMITIVES[kind]
        if kind == "int" and schema.get("connect.type") in ("int8", "int16"):
            connect_type = schema["connect.type"]
        out = _connect_meta(schema, {"type": connect_type, "optional": optional})
        if "name" not in out:
            _logical_name(schema, out)
        convert = {"bytes": _bytes_value, "float": _float_value}.get(kind)
        return out, convert

    def _define(self, schema: dict[str, Any], namespace: str | None) -> str | None:
        """Record a named type; the namespace its own children resolve names in."""
        own = schema.get("namespace", namespace)
        name = str(schema["name"])
        if "." in name:
            own = name.rsplit(".", 1)[0]
        self.names.types[self.names.full_name(name, schema.get("namespace", namespace))] = schema
        return own

    def _union(self, members: list[Any], namespace: str | None) -> tuple[dict[str, Any], Convert | None]:
        others = [m for m in members if m != "null"]
        if len(others) != 1 or len(members) > 2:
            raise UnsupportedSchema(
                f"Avro union {json.dumps(members)[:200]}: AvroData writes only unions of null and one type"
            )
        out, convert = self.connect(others[0], namespace, optional="null" in members)
        return out, None if convert is None else _nullable(convert)

    def _array(
        self, schema: dict[str, Any], namespace: str | None, optional: bool
    ) -> tuple[dict[str, Any], Convert | None]:
        items = schema["items"]
        resolved = (
            self.names.resolve(items, namespace) if isinstance(items, str) and items not in _PRIMITIVES else items
        )
        if _is_map_entry(resolved):
            # A Connect map whose keys are not strings: an array of {key, value} records, which
            # JsonConverter writes as an array of [key, value] pairs.
            entry, convert = self.connect(resolved, namespace)
            fields = {f["field"]: f for f in entry["fields"]}
            out: dict[str, Any] = {
                "type": "map",
                "keys": _field_schema(fields["key"]),
                "values": _field_schema(fields["value"]),
                "optional": optional,
            }
            entry_convert = convert or (lambda v: v)
            return _connect_meta(schema, out), lambda v: [
                [e["key"], e["value"]] for e in (entry_convert(item) for item in v)
            ]
        element, convert = self.connect(items, namespace)
        out = _connect_meta(schema, {"type": "array", "items": element, "optional": optional})
        return out, None if convert is None else (lambda v: [convert(item) for item in v])

    def _record(
        self, schema: dict[str, Any], namespace: str | None, optional: bool
    ) -> tuple[dict[str, Any], Convert | None]:
        own = self._define(schema, namespace)
        fields: list[dict[str, Any]] = []
        converts: list[tuple[str, str, Convert | None]] = []
        for avro_field in schema.get("fields") or []:
            name = str(avro_field["name"])
            field_schema, convert = self.connect(avro_field["type"], own)
            default = _field_default(avro_field, field_schema)
            if default is not None:
                field_schema["default"] = default
            column = self.names.rename(name)
            fields.append({**field_schema, "field": column})
            converts.append((name, column, convert))
        full_name = self.names.full_name(str(schema["name"]), schema.get("namespace", namespace))
        out = {"type": "struct", "fields": fields, "optional": optional, "name": full_name}
        out = _connect_meta(schema, out)
        if all(convert is None and name == column for name, column, convert in converts):
            return out, None
        return out, _record_value(converts)


_LOGICAL_NAMES = {
    ("int", "date"): "org.apache.kafka.connect.data.Date",
    ("int", "time-millis"): "org.apache.kafka.connect.data.Time",
    ("long", "timestamp-millis"): "org.apache.kafka.connect.data.Timestamp",
}


def _logical_name(schema: dict[str, Any], out: dict[str, Any]) -> None:
    """A schema written without Connect's properties (``connect.meta.data: false``) still says its
    Avro logical type; AvroData reads Decimal, Date, Time and Timestamp back from it."""
    logical = schema.get("logicalType")
    if schema["type"] == "bytes" and logical == "decimal":
        out["name"] = "org.apache.kafka.connect.data.Decimal"
        precision = schema.get("precision")
        params = {"scale": str(schema.get("scale", 0))}
        if precision is not None:
            params["connect.decimal.precision"] = str(precision)
        out["parameters"] = params
    elif isinstance(logical, str) and (str(schema["type"]), logical) in _LOGICAL_NAMES:
        out["name"] = _LOGICAL_NAMES[(str(schema["type"]), logical)]


def _field_schema(field: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in field.items() if k != "field"}


def _nullable(convert: Convert) -> Convert:
    return lambda v: None if v is None else convert(v)


def _bytes_value(value: Any) -> Any:
    return _base64(value) if isinstance(value, (bytes, bytearray)) else value


def _float_value(value: Any) -> Any:
    return _float32(value) if isinstance(value, float) else value


def _map_values(convert: Convert) -> Convert:
    return lambda v: {k: convert(item) for k, item in v.items()}


def _record_value(converts: list[tuple[str, str, Convert | None]]) -> Convert:
    def record(value: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for name, column, convert in converts:
            item = value.get(name)
            out[column] = item if convert is None or item is None else convert(item)
        return out

    return record


def _field_default(avro_field: dict[str, Any], connect: dict[str, Any]) -> Any:
    """The Connect default of a field (JsonConverter's JSON form): the Avro field default, else the
    ``connect.default`` AvroData also writes; None when it has none."""
    if "default" in avro_field and avro_field["default"] is not None:
        default = avro_field["default"]
    else:
        kind = avro_field["type"]
        members = kind if isinstance(kind, list) else [kind]
        found = [
            m.get("connect.default") for m in members if isinstance(m, dict) and m.get("connect.default") is not None
        ]
        if not found:
            return None
        default = found[0]
    return _default_value(connect, default)


def _default_value(connect: dict[str, Any], default: Any) -> Any:
    """An Avro JSON default in JsonConverter's form: Avro writes bytes defaults as ISO-8859-1 text,
    JsonConverter as base64."""
    kind = connect.get("type")
    if kind == "bytes" and isinstance(default, str):
        return _base64(default.encode("latin-1"))
    if kind == "struct" and isinstance(default, dict):
        by_name = {f["field"]: f for f in connect.get("fields", [])}
        return {k: _default_value(by_name.get(k, {}), v) for k, v in default.items()}
    if kind == "array" and isinstance(default, list):
        return [_default_value(connect.get("items", {}), v) for v in default]
    if kind == "float" and isinstance(default, float):
        return _float32(default)
    return default


def _without_logical_types(schema: Any) -> Any:
    """The schema with every ``logicalType`` removed: fastavro then reads the values AvroData wrote
    (days, milliseconds, unscaled decimal bytes), as JsonConverter writes them, not Python objects."""
    if isinstance(schema, list):
        return [_without_logical_types(s) for s in schema]
    if isinstance(schema, dict):
        return {k: _without_logical_types(v) for k, v in schema.items() if k != "logicalType"}
    return schema


@dataclass(frozen=True)
class AvroEnvelope:
    """One writer schema of the registry, ready to read records with."""

    registry_id: int
    parsed: Any
    """The fastavro schema, without logical types."""
    connect: dict[str, Any]
    """The Connect schema in JsonConverter's JSON form (what a JSON record's ``schema`` holds)."""
    convert: Convert | None
    """Datum -> JsonConverter's payload; None where fastavro's datum already is it."""
    images: dict[str, KnownImage] = field(default_factory=dict, compare=False)
    """What :attr:`connect` says of its images, worked out on its first record."""

    @classmethod
    def from_text(cls, registry_id: int, text: str, unescape_names: bool = False) -> AvroEnvelope:
        """Read a registry schema; :class:`UnsupportedSchema` says why one cannot be read (whatever
        went wrong: a schema nested deeper than the reader recurses is refused like any other)."""
        try:
            return cls._read(registry_id, text, unescape_names)
        except UnsupportedSchema:
            raise
        except Exception as exc:  # noqa: BLE001 (a schema that breaks the reader is a schema it refuses)
            raise UnsupportedSchema(f"the schema cannot be read: {type(exc).__name__}: {str(exc)[:200]}") from None

    @classmethod
    def _read(cls, registry_id: int, text: str, unescape_names: bool) -> AvroEnvelope:
        try:
            schema = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UnsupportedSchema(f"the registry's schema text is not JSON: {exc}") from None
        if not isinstance(schema, dict) or schema.get("type") != "record":
            raise UnsupportedSchema(f"a Debezium envelope is an Avro record, not {json.dumps(schema)[:100]}")
        reader = _Reader(unescape_name if unescape_names else (lambda n: n))
        connect, convert = reader.connect(schema, None)
        try:
            parsed = parse_schema(_without_logical_types(schema))
        except Exception as exc:  # fastavro raises several types for schemas it refuses
            raise UnsupportedSchema(f"fastavro refuses the schema: {exc}") from None
        return cls(registry_id, parsed, connect, convert)

    def payload(self, value: bytes) -> Any:
        """The datum of a record (wire header included) in JsonConverter's form; ValueError when the
        bytes do not hold one datum of this schema."""
        buffer = io.BytesIO(value)
        buffer.seek(HEADER_BYTES)
        try:
            datum = schemaless_reader(buffer, self.parsed, None)
        except Exception as exc:  # EOFError, struct/Unicode errors, fastavro's own: all mean "not this schema"
            raise ValueError(f"{type(exc).__name__}: {exc}") from None
        if buffer.tell() != len(value):
            raise ValueError(f"{len(value) - buffer.tell()} bytes left over after the datum")
        return datum if self.convert is None else self.convert(datum)


def decode_avro(
    topic: str,
    partition: int,
    offset: int,
    value: bytes | None,
    envelopes: Mapping[int, AvroEnvelope | str],
    plan: DecodePlan,
) -> Decoded:
    """Decode one Kafka record in the Confluent Avro wire format. ``envelopes`` maps each schema id of
    the batch to its :class:`AvroEnvelope`, or to the reason it has none (unknown to the registry,
    not a Debezium envelope). Never raises: see :func:`~cdc_delta.events.envelope.undecodable`."""
    try:
        return _decode_avro(topic, partition, offset, value, envelopes, plan)
    except Exception as exc:  # noqa: BLE001 (one record's failure, whatever it is, is that record's)
        return undecodable(exc)


def _decode_avro(
    topic: str,
    partition: int,
    offset: int,
    value: bytes | None,
    envelopes: Mapping[int, AvroEnvelope | str],
    plan: DecodePlan,
) -> Decoded:
    if value is None:
        return Decoded(SKIP, TOMBSTONE)
    found = registry_id(value)
    if found is None:
        head = value[:HEADER_BYTES].hex(" ") or "empty"
        return Decoded(
            DEAD,
            f"value is not in the Confluent Avro wire format (magic byte 0, then a 4-byte schema id): it starts "
            f"{head}; is kafka.value_format right for this topic?",
        )
    envelope = envelopes.get(found)
    if not isinstance(envelope, AvroEnvelope):
        return Decoded(DEAD, f"Avro schema id {found}: {envelope or 'not read from the schema registry'}")
    try:
        message = envelope.payload(value)
    except ValueError as exc:
        return Decoded(DEAD, f"the bytes do not match Avro schema id {found}: {exc}")
    return decode_message(topic, partition, offset, envelope.connect, message, plan, envelope.images)
