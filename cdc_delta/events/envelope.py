"""Decode one Kafka record holding a Debezium change event (JsonConverter, with or without schemas;
Avro records are read into the same form by :mod:`cdc_delta.events.avro`).

Pure Python, no Spark: :mod:`cdc_delta.decode` runs :func:`decode_record` on the executors. Every
record ends in exactly one of three outcomes: ``ok`` (an event for a table), ``skip`` (a Debezium
tombstone, or a truncate the policy skips), or ``dead`` (with the reason), so that
rows in = applied + dead-lettered + skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from cdc_delta.events import logical_types
from cdc_delta.events.debezium_records import (
    SCHEMA_CHANGE,
    SIGNAL,
    TRANSACTION,
    control_kind,
    control_ts_ms,
    dropped_tables,
)
from cdc_delta.events.masking import (
    Masks,
    Rule,
    masked_envelope,
    unmasked,
    unmasked_reason,
    unmasked_values,
    unverified,
)
from cdc_delta.events.ordering import Seq, event_seq
from cdc_delta.events.routing import Router
from cdc_delta.events.transactions import TXN_END, Txn, change_txn, transaction_end

OPS = ("c", "u", "d", "r", "t")
OK, SKIP, DEAD = "ok", "skip", "dead"
TOMBSTONE = "tombstone"


class Decoded(NamedTuple):
    """The outcome of decoding one record. ``row_json``/``schema_json`` are set for row events only.

    ``payload`` and ``schema_ref`` are set instead where the image is still as Debezium wrote it: the
    JVM decoder lands such an event with its envelope's payload text and a reference to its Connect
    schema, and the image is made canonical where a table's changes are read back
    (:mod:`cdc_delta.decode.canonical`). The reference decoder never sets them."""

    status: str
    reason: str | None = None
    table: str | None = None
    op: str | None = None
    source_db: str | None = None
    source_table: str | None = None
    seq: Seq | None = None
    source_ts_ms: int | None = None
    row_json: str | None = None
    schema_json: str | None = None
    payload: str | None = None
    schema_ref: str | None = None
    redacted: str | None = None
    """For a record dead-lettered because a masked column arrived unmasked: its envelope with those
    columns masked (:func:`~cdc_delta.events.masking.masked_envelope`), which the dead letter keeps instead
    of the value."""
    txn: Txn | None = None
    """The change's source transaction (:mod:`cdc_delta.events.transactions`); of a transaction's END
    (skipped as a change, landed as a boundary: op ``x``, its counts in ``row_json``), its id and event count."""


@dataclass(frozen=True)
class DecodePlan:
    """What the decoder needs from the config, small and picklable for the executors
    (:func:`cdc_delta.decode.plan.decode_plan` makes it from the config)."""

    router: Router
    keys: dict[str, tuple[str, ...]]
    """The key of each listed table and of each pattern entry (by its name template)."""
    columns: dict[str, dict[str, str]] = field(default_factory=dict)
    truncate_policy: str = "soft_delete"
    signal_table: str | None = None
    """The name of Debezium's signal table: its rows are the connector's signals and watermarks."""
    masks: Masks = field(default_factory=Masks)

    def is_signal(self, source_table: str | None) -> bool:
        """Whether a change of ``source_table`` is a row of Debezium's signal table (skipped, never landed)."""
        return source_table is not None and source_table == self.signal_table

    def key(self, table: str) -> tuple[str, ...]:
        """The key columns of a table the router named."""
        return self.keys.get(table) or self.keys[self.router.pattern_of(table) or table]

    def mask_rules(self, table: str) -> dict[str, Rule]:
        """The mask rules of a table the router named (none: empty)."""
        rules = self.masks.rules
        return rules.get(table) or rules.get(self.router.pattern_of(table) or table) or {}


def _dead(reason: str, **known: Any) -> Decoded:
    return Decoded(DEAD, reason, **known)


def image_fields(schema: Any, image_name: str) -> dict[str, dict[str, Any]] | None:
    """The Connect field schemas of the ``before``/``after`` struct, by column name; None if absent."""
    if not isinstance(schema, dict):
        return None
    for envelope_field in schema.get("fields") or []:
        if isinstance(envelope_field, dict) and envelope_field.get("field") == image_name:
            return {f["field"]: f for f in envelope_field.get("fields") or [] if isinstance(f, dict)}
    return None


def descriptor_entry(name: str, field: dict[str, Any]) -> list[Any]:
    """``[column, type(, default)]``: one column of an image descriptor, from its Connect field schema."""
    return [name, logical_types.connect_column_type(field), *_default(field)]


def _default(field: dict[str, Any]) -> tuple[Any] | tuple[()]:
    """The column's default at the source, canonical, as a 1-tuple (empty: none, or none readable)."""
    if field.get("default") is None:
        return ()
    try:
        return (logical_types.decode_connect_value(field, field["default"]),)
    except (ValueError, TypeError, ArithmeticError):
        return ()


@dataclass(frozen=True)
class KnownImage:
    """What one Connect schema says of one row image, worked out once for every record of that schema
    (:func:`decode_message`'s ``known``): its columns, their types and its descriptor."""

    fields: dict[str, dict[str, Any]] | None
    columns: tuple[tuple[str, dict[str, Any], str], ...] = ()
    """(column, field schema, column type), in the schema's order."""
    descriptor: str = "[]"

    @classmethod
    def of(cls, schema: Any, image_name: str) -> KnownImage:
        fields = image_fields(schema, image_name)
        if fields is None:
            return cls(None)
        columns = tuple((n, f, logical_types.connect_column_type(f)) for n, f in fields.items())
        return cls(fields, columns, json.dumps([descriptor_entry(n, f) for n, f in fields.items()]))


def _decode_known(image: dict[str, Any], known: KnownImage) -> dict[str, Any]:
    """An image whose columns are exactly its schema's: canonical values (ValueError names the column)."""
    values: dict[str, Any] = {}
    for name, field_schema, type_name in known.columns:
        raw = image[name]
        try:
            values[name] = logical_types.decode_connect_value(field_schema, raw, type_name)
        except (ValueError, TypeError, ArithmeticError) as exc:
            raise ValueError(f"column {name!r}: cannot decode {raw!r}: {exc}") from None
    return values


def _decode_image(
    image: dict[str, Any], fields: dict[str, dict[str, Any]] | None, configured: dict[str, str]
) -> tuple[dict[str, Any], list[list[Any]]]:
    """Canonical values and the descriptor ``[[column, type(, default)], ...]`` of one row image (the
    default where the Connect schema gives one); ValueError names the column."""
    values: dict[str, Any] = {}
    schema: list[list[Any]] = []
    names = list(fields) if fields is not None else list(image)
    names += [name for name in image if name not in names]
    for name in names:
        raw = image.get(name)
        try:
            if fields is not None and name in fields:
                type_name = logical_types.connect_column_type(fields[name])
                value = logical_types.decode_connect_value(fields[name], raw)
            else:
                type_name = configured.get(name) or logical_types.infer_column_type(raw) or ""
                value = logical_types.to_canonical(type_name, raw) if type_name else None
        except (ValueError, TypeError, ArithmeticError) as exc:
            raise ValueError(f"column {name!r}: cannot decode {raw!r}: {exc}") from None
        values[name] = value
        if fields is not None and name in fields:
            schema.append(descriptor_entry(name, fields[name]))
        elif type_name:
            schema.append([name, type_name])
    return values, schema


def _truncate(known: dict[str, Any], plan: DecodePlan, what: str) -> Decoded:
    """A TRUNCATE (or a DROP TABLE, which the lake follows the same way) under the truncate policy."""
    if plan.truncate_policy == "skip":
        return Decoded(SKIP, f"{what} skipped (truncate_policy=skip)", **known)
    if plan.truncate_policy == "dead_letter":
        return _dead(f"{what} parked for review (truncate_policy=dead_letter)", **known)
    return Decoded(OK, **known)


def _schema_change(partition: int, offset: int, message: dict[str, Any], plan: DecodePlan) -> Decoded:
    """Skipped, unless it drops a configured table: then its rows are soft-deleted like a TRUNCATE's."""
    source: dict[str, Any] = message["source"] if isinstance(message.get("source"), dict) else {}
    skipped = Decoded(SKIP, SCHEMA_CHANGE, source_ts_ms=control_ts_ms(message))
    if source.get("snapshot") not in (None, False, "false"):
        # A connector's snapshot writes DROP TABLE IF EXISTS + CREATE TABLE for every table it reads:
        # history for schema-history consumers, not a drop.
        return skipped
    dropped = []
    for db, tbl in dropped_tables(message):
        # The topic the dropped table's changes went to: <topic.prefix>.<db>.<table>.
        table = plan.router.route(f"{source.get('name')}.{db}.{tbl}", db, tbl)
        if table is not None:
            dropped.append((db, tbl, table))
    if not dropped:
        return skipped
    if len(dropped) > 1:
        names = ", ".join(f"{db}.{tbl}" for db, tbl, _ in dropped)
        return _dead(f"one schema change drops several replicated tables ({names}): apply it by hand")
    db, tbl, table = dropped[0]
    seq = event_seq("t", source, message.get("ts_ms"), partition, offset)
    known = {"op": "t", "source_db": db, "source_table": tbl, "table": table, "seq": seq}
    return _truncate({**known, "source_ts_ms": seq.ts_ms or None}, plan, f"DROP TABLE {db}.{tbl}")


def _transaction_marker(message: dict[str, Any]) -> Decoded:
    """A BEGIN or END of a source transaction: skipped as a change; an END carries its id and counts, and
    lands as the transaction's boundary."""
    ts_ms = control_ts_ms(message)
    end = transaction_end(message)
    if end is None:
        return Decoded(SKIP, TRANSACTION, source_ts_ms=ts_ms)
    txn, counts = end
    return Decoded(SKIP, TRANSACTION, op=TXN_END, source_ts_ms=ts_ms, row_json=counts, txn=txn)


def _unmasked(
    schema: Any, message: dict[str, Any], image: dict[str, Any], rules: dict[str, Rule], plan: DecodePlan, **known: Any
) -> Decoded | None:
    """The dead letter of an event whose masked columns arrive unmasked (its schema says so, or its
    values), the envelope kept masked here; None where they arrive masked."""
    fields = image_fields(schema, "after") or image_fields(schema, "before")
    if fields is None:
        problems = unmasked_values(image, rules, schemaless=True)
    else:
        problems = unmasked(fields, rules) + unmasked_values(image, unverified(fields, rules))
    if not problems:
        return None
    return Decoded(
        DEAD,
        unmasked_reason(known["table"], problems),
        redacted=masked_envelope(schema, message, fields, rules, plan.masks.salt),
        **known,
    )


REASON_LIMIT = 500
"""Characters of an exception's text kept in a dead letter's reason (a poison record's message can
quote megabytes of it)."""


def undecodable(exc: BaseException) -> Decoded:
    """The dead letter of a record whose decoding raised: any error while reading one record (nesting
    deeper than the parser recurses, a value too large for memory, a bug) parks that record, never the
    batch."""
    text = str(exc)
    if len(text) > REASON_LIMIT:
        text = text[:REASON_LIMIT] + "..."
    return _dead(f"cannot decode the record: {type(exc).__name__}: {text}")


def decode_record(topic: str, partition: int, offset: int, value: bytes | None, plan: DecodePlan) -> Decoded:
    """Decode one Kafka record value into an event for a table, a skip, or a dead letter; never raises."""
    try:
        return _decode_json(topic, partition, offset, value, plan)
    except Exception as exc:  # noqa: BLE001 (one record's failure, whatever it is, is that record's)
        return undecodable(exc)


def _decode_json(topic: str, partition: int, offset: int, value: bytes | None, plan: DecodePlan) -> Decoded:
    if value is None:
        return Decoded(SKIP, TOMBSTONE)
    try:
        # Decoded strictly first: json.loads on bytes lets UTF-8-encoded surrogates through.
        message = json.loads(value.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return _dead(f"value is not valid UTF-8 JSON: {exc}")
    schema = None
    if isinstance(message, dict) and "payload" in message and "schema" in message:
        schema, message = message["schema"], message["payload"]
    return decode_message(topic, partition, offset, schema, message, plan)


def decode_message(
    topic: str,
    partition: int,
    offset: int,
    schema: Any,
    message: Any,
    plan: DecodePlan,
    images: dict[str, KnownImage] | None = None,
) -> Decoded:
    """Decode one envelope, already read: its Connect ``schema`` in JsonConverter's JSON form (None when
    the record carries none) and its ``message`` (the payload) in JsonConverter's value form. Every
    encoding (:func:`decode_record` for JSON, :func:`cdc_delta.events.avro.decode_avro` for Avro) ends
    here. ``images`` keeps what ``schema`` says of its images from record to record, for a caller that
    decodes many records of one schema object (Avro's registry schemas)."""
    if message is None:
        return Decoded(SKIP, TOMBSTONE)
    if not isinstance(message, dict):
        return _dead(f"value is JSON {type(message).__name__}, not a Debezium envelope object")
    op = message.get("op")
    if op not in OPS:
        kind = control_kind(schema, message)
        if kind == SCHEMA_CHANGE:
            return _schema_change(partition, offset, message, plan)
        if kind == TRANSACTION:
            return _transaction_marker(message)
        if kind is not None:
            # Its time still tells how far the connector has got on this partition (readiness).
            return Decoded(SKIP, kind, source_ts_ms=control_ts_ms(message))
        return _dead(f"unknown op {op!r}: expected one of {', '.join(OPS)}")
    source = message.get("source")
    if not isinstance(source, dict):
        source = {}
    db, tbl = source.get("db"), source.get("table")
    if plan.is_signal(tbl):
        return Decoded(SKIP, SIGNAL, source_ts_ms=control_ts_ms(message))
    known: dict[str, Any] = {"op": op, "source_db": db, "source_table": tbl, "txn": change_txn(message)}
    table = plan.router.route(topic, db, tbl)
    if table is None:
        return _dead(plan.router.refusal(topic, db, tbl), **known)
    known["table"] = table
    rules = plan.mask_rules(table) if op != "t" else {}
    if rules:  # before anything else can refuse the record with its raw value
        image = message.get("before" if op == "d" else "after")
        refused = _unmasked(schema, message, image if isinstance(image, dict) else {}, rules, plan, **known)
        if refused is not None:
            return refused
    try:
        seq = event_seq(op, source, message.get("ts_ms"), partition, offset)
    except ValueError as exc:
        return _dead(str(exc), **known)
    known.update(seq=seq, source_ts_ms=seq.ts_ms or None)
    if op == "t":
        return _truncate(known, plan, "truncate")
    image_name = "before" if op == "d" else "after"
    image = message.get(image_name)
    if not isinstance(image, dict):
        return _dead(f"op {op!r} event has no {image_name!r} row image", **known)
    try:
        image_schema = images.get(image_name) if images is not None else None
        if image_schema is None:
            image_schema = KnownImage.of(schema, image_name)
            if images is not None:
                images[image_name] = image_schema
        if image_schema.fields is not None and image.keys() == image_schema.fields.keys():
            values, descriptor = _decode_known(image, image_schema), image_schema.descriptor
        else:
            values, columns = _decode_image(image, image_schema.fields, plan.columns.get(table, {}))
            descriptor = json.dumps(columns)
    except ValueError as exc:
        return _dead(str(exc), **known)
    missing = [k for k in plan.key(table) if values.get(k) is None]
    if missing:
        return _dead(f"key column(s) {missing} missing or null in the {image_name!r} image", **known)
    return Decoded(OK, row_json=json.dumps(values), schema_json=descriptor, **known)
