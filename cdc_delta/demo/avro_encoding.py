"""Debezium's JSON records re-encoded as its Avro converter would have written them, for tests and
benchmarks: the same change events in both encodings.

:func:`avro_schema` maps a Connect schema (JsonConverter's JSON form) to the Avro schema Confluent's
``AvroData.fromConnectSchema`` builds for it (``connect.*`` properties, ``connect.type`` for int8/int16,
Avro logical types for Connect's Decimal/Date/Time/Timestamp, optional fields as unions with null - null
second when the field has a default - and a named type written once, then referred to by name).
:func:`avro_datum` maps a JSON payload to the datum (base64 bytes back to bytes, maps with non-string
keys to ``{key, value}`` records). :class:`AvroEncoder` writes the Confluent wire format.
"""

from __future__ import annotations

import base64
import io
import json
from typing import Any

from fastavro import parse_schema, schemaless_writer

_AVRO_TYPES = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "long",
    "float": "float",
    "float32": "float",
    "double": "double",
    "float64": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "bytes",
}
_NAMESPACE = "io.confluent.connect.avro"
_DECIMAL = "org.apache.kafka.connect.data.Decimal"
_LOGICAL = {
    "org.apache.kafka.connect.data.Date": "date",
    "org.apache.kafka.connect.data.Time": "time-millis",
    "org.apache.kafka.connect.data.Timestamp": "timestamp-millis",
}


def _split(name: str | None) -> tuple[str, str]:
    if not name:
        return _NAMESPACE, "ConnectDefault"
    namespace, _, short = name.rpartition(".")
    return namespace, short


def _default(schema: dict[str, Any], value: Any) -> Any:
    """A Connect default (JsonConverter's form) as an Avro JSON default: bytes as ISO-8859-1 text."""
    if schema.get("type") == "bytes" and isinstance(value, str):
        return base64.b64decode(value).decode("latin-1")
    return value


class _Writer:
    def __init__(self) -> None:
        self.defined: set[str] = set()

    def schema(self, connect: dict[str, Any], ignore_optional: bool = False) -> Any:
        kind = connect["type"]
        namespace, name = _split(connect.get("name"))
        base: Any
        if kind == "struct":
            full = f"{namespace}.{name}"
            if full in self.defined:
                base = full
            else:
                self.defined.add(full)
                fields = [self.field(f) for f in connect.get("fields", [])]
                base = {"type": "record", "name": name, "namespace": namespace, "fields": fields}
        elif kind == "array":
            base = {"type": "array", "items": self.schema(connect["items"])}
        elif kind == "map":
            keys = connect["keys"]
            if keys.get("type") == "string" and not keys.get("optional"):
                base = {"type": "map", "values": self.schema(connect["values"])}
            else:
                entry = {
                    "type": "record",
                    "name": "MapEntry",
                    "namespace": _NAMESPACE,
                    "fields": [
                        self.field({**keys, "field": "key"}),
                        self.field({**connect["values"], "field": "value"}),
                    ],
                }
                base = {"type": "array", "items": entry}
        else:
            base = {"type": _AVRO_TYPES[kind]}
        if isinstance(base, dict):
            self._annotate(base, connect, kind)
        if connect.get("optional") and not ignore_optional:
            return [base, "null"] if connect.get("default") is not None else ["null", base]
        return base

    def _annotate(self, base: dict[str, Any], connect: dict[str, Any], kind: str) -> None:
        name, params = connect.get("name"), connect.get("parameters")
        if connect.get("doc") is not None:
            base["connect.doc"] = connect["doc"]
        if connect.get("version") is not None:
            base["connect.version"] = connect["version"]
        if params:
            base["connect.parameters"] = dict(params)
        if connect.get("default") is not None:
            base["connect.default"] = _default(connect, connect["default"])
        if name:
            base["connect.name"] = name
        if kind in ("int8", "int16"):
            base["connect.type"] = kind
        if name == _DECIMAL:
            params = params or {}
            scale = int(params.get("scale", 0))
            precision = int(params.get("connect.decimal.precision", 64))
            base["scale"], base["precision"] = scale, precision
            if 0 <= scale <= precision:
                base["logicalType"] = "decimal"
        elif name in _LOGICAL:
            base["logicalType"] = _LOGICAL[name]

    def field(self, connect: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"name": connect["field"], "type": self.schema(connect)}
        if connect.get("default") is not None:
            out["default"] = _default(connect, connect["default"])
        elif connect.get("optional"):
            out["default"] = None
        return out


def avro_schema(connect: dict[str, Any]) -> dict[str, Any]:
    """The Avro schema AvroData writes for a (non-optional, struct) Connect envelope schema."""
    schema = _Writer().schema(connect)
    assert isinstance(schema, dict)
    return schema


def avro_datum(connect: dict[str, Any], value: Any) -> Any:
    """A JsonConverter payload value as the Avro datum of :func:`avro_schema`'s schema."""
    if value is None:
        return None
    kind = connect["type"]
    if kind == "struct":
        return {f["field"]: avro_datum(f, value.get(f["field"])) for f in connect.get("fields", [])}
    if kind == "bytes":
        return base64.b64decode(value)
    if kind == "array":
        return [avro_datum(connect["items"], v) for v in value]
    if kind == "map":
        keys = connect["keys"]
        if keys.get("type") == "string" and not keys.get("optional"):
            return {k: avro_datum(connect["values"], v) for k, v in value.items()}
        pairs = value.items() if isinstance(value, dict) else value
        return [{"key": avro_datum(keys, k), "value": avro_datum(connect["values"], v)} for k, v in pairs]
    return value


class AvroEncoder:
    """Re-encodes JsonConverter records (``{"schema": ..., "payload": ...}``) as Confluent wire-format
    Avro, registering each distinct schema through ``register(subject, schema_text) -> id``."""

    def __init__(self, register: Any) -> None:
        self.register = register
        self._schemas: dict[tuple[str, str], tuple[int, Any]] = {}

    def encode(self, topic: str, value: bytes | None) -> bytes | None:
        if value is None:
            return None
        record = json.loads(value)
        connect = record["schema"]
        key = (topic, json.dumps(connect, sort_keys=True))
        if key not in self._schemas:
            text = json.dumps(avro_schema(connect))
            self._schemas[key] = (self.register(f"{topic}-value", text), parse_schema(json.loads(text)))
        registry_id, parsed = self._schemas[key]
        out = io.BytesIO()
        out.write(b"\x00" + registry_id.to_bytes(4, "big"))
        schemaless_writer(out, parsed, avro_datum(connect, record["payload"]))
        return out.getvalue()
