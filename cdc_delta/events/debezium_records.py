"""Debezium's records that carry no row change, told apart from change events.

A connector writes, besides change events: schema changes (the topic named ``<topic.prefix>``, with
``include.schema.changes``), transaction boundaries (``<topic.prefix>.transaction``, with
``provide.transaction.metadata``), heartbeats (``__debezium-heartbeat.<topic.prefix>``), in its
internal schema-history topic, history records, and the changes of its signal table (``signal.data
.collection``: the watermarks of incremental snapshots, the signals sent there), which Debezium captures
like any table's and which are recognised by the table's name. A topic pattern may match any of them. They are
recognised by their value schema's name, or without schemas by their fields, and skipped with a count;
a schema change that drops a table is the one that changes the lake (see :func:`dropped_tables`).
"""

from __future__ import annotations

from typing import Any

SCHEMA_CHANGE = "schema change"
SCHEMA_HISTORY = "schema history record"
TRANSACTION = "transaction marker"
HEARTBEAT = "heartbeat"
SIGNAL = "signal table"

_BY_SCHEMA_NAME = (
    (".SchemaChangeValue", SCHEMA_CHANGE),
    ("TransactionMetadataValue", TRANSACTION),
    ("io.debezium.connector.common.Heartbeat", HEARTBEAT),
)


def control_kind(schema: Any, message: dict[str, Any]) -> str | None:
    """What kind of non-change record ``message`` is (None: not one Debezium writes)."""
    name = schema.get("name") if isinstance(schema, dict) else None
    if isinstance(name, str):
        for suffix, kind in _BY_SCHEMA_NAME:
            if name.endswith(suffix):
                return kind
    keys = set(message)
    if {"ddl", "tableChanges"} <= keys or {"ddl", "databaseName"} <= keys:
        return SCHEMA_HISTORY if "position" in keys else SCHEMA_CHANGE
    if {"status", "id"} <= keys and message.get("status") in ("BEGIN", "END"):
        return TRANSACTION
    if keys == {"ts_ms"}:
        return HEARTBEAT
    return None


def _table_id(text: str) -> tuple[str, str] | None:
    """``"db"."table"`` (Debezium's quoted table id) -> (db, table)."""
    parts = [p.strip('"`') for p in text.split('"."')] if '"."' in text else text.split(".")
    return (parts[0].strip('"`'), parts[-1].strip('"`')) if len(parts) == 2 else None


def dropped_tables(message: dict[str, Any]) -> list[tuple[str, str]]:
    """The (database, table) pairs a schema-change record drops."""
    out = []
    for change in message.get("tableChanges") or []:
        if isinstance(change, dict) and change.get("type") == "DROP" and isinstance(change.get("id"), str):
            table_id = _table_id(change["id"])
            if table_id is not None:
                out.append(table_id)
    return out


def control_ts_ms(message: dict[str, Any]) -> int | None:
    """When the source made the change a control record describes (its ``source.ts_ms``, else its
    ``ts_ms``: a heartbeat's is when the connector wrote it)."""
    source = message.get("source")
    value = source.get("ts_ms") if isinstance(source, dict) and source.get("ts_ms") else message.get("ts_ms")
    return value if isinstance(value, int) and not isinstance(value, bool) else None
