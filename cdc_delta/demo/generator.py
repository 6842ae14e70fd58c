"""Debezium-shaped change events for demos, tests and benchmarks (MySQL connector, JsonConverter).

:func:`envelope` encodes one change as Debezium does (``schema`` + ``payload`` or payload only, a MySQL
``source`` block with binlog file/pos/row, ``ts_ms``); :class:`ChangeGenerator` makes a random but
reproducible stream of inserts, updates and deletes over a few tables, sharded ones included.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from cdc_delta.events.logical_types import EPOCH, EPOCH_DATE


@dataclass(frozen=True)
class Column:
    """A source column as Debezium describes it: a Connect type, maybe a logical name and parameters."""

    name: str
    connect_type: str
    logical: str | None = None
    params: dict[str, str] = field(default_factory=dict)

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.connect_type, "optional": True, "field": self.name}
        if self.logical:
            out["name"] = self.logical
        if self.params:
            out["parameters"] = dict(self.params)
        return out

    def encode(self, value: Any) -> Any:
        """A Python value (int, str, Decimal, date, datetime, bytes) as Debezium's JSON puts it."""
        if value is None:
            return None
        if self.logical == "org.apache.kafka.connect.data.Decimal":
            scale = int(self.params.get("scale", "0"))
            unscaled = int(decimal.Decimal(value).scaleb(scale))
            length = max(1, (unscaled.bit_length() + 8) // 8)
            return base64.b64encode(unscaled.to_bytes(length, "big", signed=True)).decode()
        if self.logical == "io.debezium.time.Date":
            return (value - EPOCH_DATE).days
        if self.logical == "io.debezium.time.MicroTimestamp":
            delta = value.replace(tzinfo=dt.timezone.utc) - EPOCH
            return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        if self.logical == "io.debezium.time.ZonedTimestamp":
            return value.astimezone(dt.timezone.utc).isoformat().replace("+00:00", "Z")
        if self.logical == "io.debezium.data.EnumSet":
            return ",".join(value)
        if self.connect_type == "bytes":
            return base64.b64encode(value).decode()
        return value


@dataclass(frozen=True)
class SourceTable:
    """A physical source table: database, table, columns (key first)."""

    db: str
    table: str
    columns: tuple[Column, ...]
    key: tuple[str, ...] = ("id",)


def _source_field(field_name: str, connect_type: str, optional: bool = False, **more: Any) -> dict[str, Any]:
    return {"type": connect_type, "optional": optional, **more, "field": field_name}


# The MySQL connector's source block, as Debezium 2.7+ describes it.
SOURCE_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "name": "io.debezium.connector.mysql.Source",
    "version": 1,
    "optional": False,
    "fields": [
        _source_field("version", "string"),
        _source_field("connector", "string"),
        _source_field("name", "string"),
        _source_field("ts_ms", "int64"),
        _source_field(
            "snapshot",
            "string",
            True,
            name="io.debezium.data.Enum",
            version=1,
            parameters={
                "allowed": "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"
            },
            default="false",
        ),
        _source_field("db", "string"),
        _source_field("sequence", "string", True),
        _source_field("ts_us", "int64", True),
        _source_field("ts_ns", "int64", True),
        _source_field("table", "string", True),
        _source_field("server_id", "int64"),
        _source_field("gtid", "string", True),
        _source_field("file", "string"),
        _source_field("pos", "int64"),
        _source_field("row", "int32"),
        _source_field("thread", "int64", True),
        _source_field("query", "string", True),
    ],
}


def envelope(
    table: SourceTable,
    op: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    *,
    file: str = "mysql-bin.000001",
    pos: int = 4,
    row: int = 0,
    ts_ms: int = 0,
    gtid: str | None = None,
    with_schema: bool = True,
    server: str = "dbserver1",
) -> dict[str, Any]:
    """One Debezium change event value (a dict; ``json.dumps`` it for Kafka)."""
    by_name = {c.name: c for c in table.columns}

    def image(values: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if values is None else {k: by_name[k].encode(v) for k, v in values.items()}

    payload = {
        "before": image(before),
        "after": image(after),
        "source": {
            "version": "2.7.0.Final",
            "connector": "mysql",
            "name": server,
            "ts_ms": ts_ms,
            "snapshot": "true" if op == "r" else "false",
            "db": table.db,
            "table": table.table,
            "server_id": 1,
            "gtid": gtid,
            "file": file,
            "pos": pos,
            "row": row,
        },
        "op": op,
        "ts_ms": ts_ms + 5,
    }
    if not with_schema:
        return payload
    row_schema = {"type": "struct", "optional": True, "fields": [c.schema() for c in table.columns]}
    schema = {
        "type": "struct",
        "name": f"{server}.{table.db}.{table.table}.Envelope",
        "fields": [
            {**row_schema, "field": "before", "name": f"{server}.{table.db}.{table.table}.Value"},
            {**row_schema, "field": "after", "name": f"{server}.{table.db}.{table.table}.Value"},
            {**SOURCE_SCHEMA, "field": "source"},
            {"type": "string", "field": "op", "optional": False},
            {"type": "int64", "field": "ts_ms", "optional": True},
        ],
    }
    return {"schema": schema, "payload": payload}


def topic_of(table: SourceTable, server: str = "dbserver1") -> str:
    """Debezium's default topic name: ``<server>.<db>.<table>``."""
    return f"{server}.{table.db}.{table.table}"


class Change(NamedTuple):
    """One generated change and where it goes (``value`` None is a Debezium tombstone)."""

    topic: str
    key: bytes
    value: bytes | None


ORDER_COLUMNS = (
    Column("id", "int64"),
    Column("customer", "string"),
    Column(
        "amount", "bytes", "org.apache.kafka.connect.data.Decimal", {"scale": "2", "connect.decimal.precision": "10"}
    ),
    Column("status", "string", "io.debezium.data.Enum", {"allowed": "new,paid,shipped"}),
    Column("order_date", "int32", "io.debezium.time.Date"),
    Column("updated_at", "int64", "io.debezium.time.MicroTimestamp"),
)


class ChangeGenerator:
    """A reproducible stream of inserts (60%), updates (30%) and deletes (10%) over source tables.

    Binlog positions grow monotonically, as one MySQL server writes them. With ``tombstones`` each
    delete is followed by a Debezium tombstone (a null value), as Debezium's default does.
    ``rows`` holds the source state after the changes generated so far: the expected live rows.
    With ``live`` the source timestamps are the wall clock (for lag and latency), else synthetic.
    """

    def __init__(
        self,
        tables: tuple[SourceTable, ...],
        seed: int = 7,
        start_ts_ms: int = 1_767_225_600_000,
        tombstones: bool = False,
        live: bool = False,
        server: str = "dbserver1",
    ) -> None:
        self.tables = tables
        self.server = server
        self.tombstones = tombstones
        self.live = live
        self.rng = random.Random(seed)
        self.rows: dict[tuple[str, str], dict[int, dict[str, Any]]] = {(t.db, t.table): {} for t in tables}
        self.deleted: dict[tuple[str, str], set[int]] = {(t.db, t.table): set() for t in tables}
        self.next_id = 1
        self.pos = 4
        self.ts_ms = start_ts_ms

    def _order_row(self, key: int) -> dict[str, Any]:
        rng = self.rng
        when = dt.datetime(2026, 1, 1) + dt.timedelta(
            seconds=rng.randrange(86_400 * 30), microseconds=rng.randrange(10**6)
        )
        return {
            "id": key,
            "customer": f"customer-{rng.randrange(1000)}",
            "amount": decimal.Decimal(rng.randrange(1, 10**7)).scaleb(-2),
            "status": rng.choice(("new", "paid", "shipped")),
            "order_date": when.date(),
            "updated_at": when,
        }

    def changes(self, count: int) -> Iterator[Change]:
        for _ in range(count):
            table = self.rng.choice(self.tables)
            rows = self.rows[(table.db, table.table)]
            roll = self.rng.random()
            self.pos += self.rng.randrange(100, 400)
            self.ts_ms = int(time.time() * 1000) if self.live else self.ts_ms + self.rng.randrange(0, 50)
            if roll < 0.6 or len(rows) < 3:
                key = self.next_id
                self.next_id += 1
                op, before, after = "c", None, self._order_row(key)
            else:
                key = self.rng.choice(list(rows))
                if roll < 0.9:
                    op, before, after = "u", rows[key], {**self._order_row(key), "order_date": rows[key]["order_date"]}
                else:
                    op, before, after = "d", rows[key], None
            if after is None:
                del rows[key]
                self.deleted[(table.db, table.table)].add(key)
            else:
                rows[key] = after
            value = envelope(table, op, before, after, pos=self.pos, ts_ms=self.ts_ms, server=self.server)
            # Compact, as Kafka Connect's JsonConverter writes them.
            kafka_key = json.dumps({"id": key}, separators=(",", ":")).encode()
            topic = topic_of(table, self.server)
            yield Change(topic, kafka_key, json.dumps(value, separators=(",", ":")).encode())
            if op == "d" and self.tombstones:
                yield Change(topic, kafka_key, None)
