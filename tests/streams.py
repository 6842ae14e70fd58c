"""Hypothesis strategies for change streams: a simulated source database, then a messy delivery.

The source makes inserts, updates, deletes (then re-inserts), purges (several deletes in one transaction),
truncates, a column added and a column dropped mid-stream, on one plain table and two shards that reuse
primary keys; every binlog transaction has a MariaDB GTID. The delivery then adds
Debezium tombstones, snapshot reads arriving after binlog events, duplicates, older events after
newer ones, replays of earlier records in later batches, bad records, and random batch boundaries.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import zlib
from typing import Any

from hypothesis import strategies as st

from cdc_delta.demo.generator import Column, SourceTable, envelope
from tests.oracle import Delivery, Event

ITEM_BASE = (
    Column("id", "int64"),
    Column("name", "string"),
    Column(
        "price", "bytes", "org.apache.kafka.connect.data.Decimal", {"scale": "2", "connect.decimal.precision": "10"}
    ),
    Column("day", "int32", "io.debezium.time.Date"),
    Column("ts", "int64", "io.debezium.time.MicroTimestamp"),
    Column("tags", "string", "io.debezium.data.EnumSet", {"allowed": "a,b,c"}),
)
LEGACY = Column("legacy", "string")
EXTRA = Column("extra", "int32")
SHARD_COLUMNS = (Column("id", "int64"), Column("name", "string"), Column("qty", "int32"))

ITEMS = SourceTable("inventory", "items", ITEM_BASE)
SHARDS = (SourceTable("shop_0", "orders_000", SHARD_COLUMNS), SourceTable("shop_1", "orders_001", SHARD_COLUMNS))

CONFIG = {
    "app_id": "prop",
    "tables": [
        {
            "name": "inventory.items",
            "topics": ["srv.inventory.items"],
            "key": ["id"],
            # purges of two or more rows are kept, but for rows named beta
            "archival_deletes": {"min_rows": 2, "where": "name <> 'beta'"},
            "history": True,
        },
        {
            "name": "shop.orders",
            "topic_pattern": r"srv\.shop_\d\.orders_\d{3}",
            "source_database": r"shop_\d",
            "source_table": r"orders_\d{3}",
            "key": ["id"],
            "key_includes_source": True,
            "history": True,
        },
    ],
}
KEYS = {"inventory.items": ("id",), "shop.orders": ("id",)}
ARCHIVAL = {"inventory.items": (2, lambda row: row.get("name") != "beta")}
"""CONFIG's archival deletes, for the oracle."""
SHARD_KEYED = frozenset({"shop.orders"})
GARBAGE = (
    b"{broken json",
    json.dumps({"op": "z", "after": {"id": 1}, "source": {"db": "inventory", "table": "items"}}).encode(),
    json.dumps({"op": "c", "after": {"name": "no key"}, "source": {"db": "inventory", "table": "items"}}).encode(),
)


def logical_name(source: SourceTable) -> str:
    return "inventory.items" if source is ITEMS else "shop.orders"


def topic(source: SourceTable) -> str:
    return f"srv.{source.db}.{source.table}"


@st.composite
def _row(draw: st.DrawFn, source: SourceTable, key: int, with_legacy: bool, with_extra: bool) -> dict[str, Any]:
    if source is not ITEMS:
        return {"id": key, "name": draw(st.sampled_from(["x", "y", "ü"])), "qty": draw(st.integers(-5, 5))}
    row = {
        "id": key,
        "name": draw(st.sampled_from(["alpha", "beta", "", "gamma δ"])),
        "price": decimal.Decimal(draw(st.integers(-(10**6), 10**6))).scaleb(-2),
        "day": dt.date(2026, 1, 1) + dt.timedelta(days=draw(st.integers(-400, 400))),
        "ts": dt.datetime(2026, 1, 1) + dt.timedelta(microseconds=draw(st.integers(0, 10**12))),
        "tags": tuple(draw(st.lists(st.sampled_from("abc"), unique=True, max_size=3))),
    }
    if with_legacy:
        row["legacy"] = draw(st.sampled_from(["old", None]))
    if with_extra:
        row["extra"] = draw(st.integers(-(2**31), 2**31 - 1))
    return row


def _columns(source: SourceTable, with_legacy: bool, with_extra: bool) -> tuple[Column, ...]:
    if source is not ITEMS:
        return source.columns
    return source.columns + ((LEGACY,) if with_legacy else ()) + ((EXTRA,) if with_extra else ())


@st.composite
def source_history(draw: st.DrawFn) -> list[tuple[Event, bytes, bytes]]:
    """What the source did, in binlog order, each change with its Kafka key and value."""
    sources = (ITEMS, *SHARDS)
    live: dict[str, dict[int, dict[str, Any]]] = {s.table: {} for s in sources}
    out: list[tuple[Event, bytes, bytes]] = []
    n_ops = draw(st.integers(4, 36))
    drop_legacy_at = draw(st.integers(0, n_ops))
    add_extra_at = draw(st.integers(0, n_ops))
    file_num, pos, ts_ms, gtid = 1, 4, 1_767_225_600_000, 0

    def emit(
        source: SourceTable,
        op: str,
        values: dict[str, Any] | None,
        legacy: bool,
        extra: bool,
        snapshot_pos: int | None = None,
        same_transaction: bool = False,
    ) -> None:
        nonlocal pos, ts_ms, gtid
        pos += 100
        ts_ms += draw(st.integers(0, 3)) * 1000
        at = snapshot_pos if snapshot_pos is not None else pos
        if op != "r" and not same_transaction:
            gtid += 1  # a transaction of its own; the initial snapshot's reads have none
        table = SourceTable(source.db, source.table, _columns(source, legacy, extra))
        before = values if op == "d" else None
        after = values if op in ("c", "u", "r") else None
        value = envelope(
            table,
            op,
            before,
            after,
            file=f"mysql-bin.{file_num:06d}",
            pos=at,
            ts_ms=ts_ms,
            gtid=None if op == "r" else f"0-1-{gtid}",
            server="srv",
            with_schema=True,
        )
        key = json.dumps({"id": values["id"]} if values else {}).encode()
        event = Event(
            logical_name(source), source.db, source.table, op, values, file_num, at, 0, ts_ms, 0 if op == "r" else gtid
        )
        out.append((event, key, json.dumps(value).encode()))

    # The initial snapshot: op r for rows that exist before capture starts, at one binlog position.
    for source in sources:
        for key in draw(st.lists(st.integers(0, 5), unique=True, max_size=3)):
            live[source.table][key] = draw(_row(source, key, True, False))
            emit(source, "r", live[source.table][key], True, False, snapshot_pos=4)
    for i in range(n_ops):
        legacy, extra = i < drop_legacy_at, i >= add_extra_at
        source = draw(st.sampled_from(sources))
        rows = live[source.table]
        action = draw(st.sampled_from(["write", "write", "write", "delete", "purge", "purge", "rotate", "truncate"]))
        if action == "rotate":  # binlog rotation: file number up, position back to 4
            file_num, pos = file_num + 1, 4
            continue
        if action == "purge":  # one transaction deleting several rows of items (an archive job's purge)
            source, rows = ITEMS, live[ITEMS.table]
            purged = sorted(draw(st.sets(st.sampled_from(sorted(rows)), max_size=4))) if rows else []
            for n, key in enumerate(purged):
                values = {**rows.pop(key)} if source is not ITEMS else _reshape(rows.pop(key), legacy, extra)
                emit(source, "d", values, legacy, extra, same_transaction=n > 0)
            continue
        if action == "truncate" and draw(st.booleans()):
            emit(source, "t", None, legacy, extra)
            rows.clear()
            continue
        key = draw(st.integers(0, 5))
        if action == "delete" and key in rows:
            emit(
                source,
                "d",
                {**rows.pop(key)} if source is not ITEMS else _reshape(rows.pop(key), legacy, extra),
                legacy,
                extra,
            )
        elif action != "delete":
            op = "u" if key in rows else "c"
            rows[key] = draw(_row(source, key, legacy, extra))
            emit(source, op, rows[key], legacy, extra)
    return out


def _reshape(values: dict[str, Any], legacy: bool, extra: bool) -> dict[str, Any]:
    """A before image carries the columns the table has at the time of the delete."""
    out = {k: v for k, v in values.items() if k not in ("legacy", "extra")}
    if legacy:
        out["legacy"] = values.get("legacy")
    if extra:
        out["extra"] = values.get("extra")
    return out


@st.composite
def delivered_batches(draw: st.DrawFn) -> list[list[Delivery]]:
    """The history, delivered messily through Kafka and cut into micro-batches."""
    history = draw(source_history())
    items: list[tuple[str, bytes | None, bytes | None, Event | None, str]] = []
    for event, key, value in history:
        t = topic(ITEMS if event.table == "inventory.items" else next(s for s in SHARDS if s.db == event.db))
        items.append((t, key, value, event, "ok"))
        if event.op == "d" and draw(st.booleans()):
            items.append((t, key, None, None, "skip"))  # Debezium's tombstone after a delete
    # Older events after newer ones, snapshot reads after binlog events, producer duplicates.
    for _ in range(draw(st.integers(0, 4))):
        if len(items) > 1:
            i = draw(st.integers(0, len(items) - 2))
            j = draw(st.integers(i + 1, len(items) - 1))
            items.insert(j, items.pop(i))
    for _ in range(draw(st.integers(0, 3))):
        if items:
            items.insert(draw(st.integers(0, len(items))), items[draw(st.integers(0, len(items) - 1))])
    for garbage in draw(st.lists(st.sampled_from(GARBAGE), max_size=2)):
        items.insert(draw(st.integers(0, len(items))), ("srv.inventory.items", b"{}", garbage, None, "dead"))
    offsets: dict[tuple[str, int], int] = {}
    records = []
    for t, key, value, event, expect in items:
        partition = zlib.crc32(key) & 1 if key else 0
        offset = offsets.get((t, partition), 0)
        offsets[(t, partition)] = offset + 1
        records.append(Delivery(t, partition, offset, key, value, event, expect))
    cuts = sorted(draw(st.lists(st.integers(0, len(records)), max_size=3)))
    bounds = [0, *cuts, len(records)]
    batches = [records[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    # Replays: records an earlier batch already held come again (same offsets) in a later batch.
    if len(batches) > 1 and draw(st.booleans()):
        src = draw(st.integers(0, len(batches) - 2))
        if batches[src]:
            batches[-1] = batches[-1] + batches[src][: draw(st.integers(1, len(batches[src])))]
    return batches
