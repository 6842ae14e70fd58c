"""Debezium's transaction metadata (``provide.transaction.metadata``), as the changelog keeps it.

With it on, a change event's payload has a ``transaction`` block: the source transaction's ``id`` (a
MariaDB/MySQL GTID, or a binlog file and position), ``total_order`` (the event's place among all the
transaction's events, from 1) and ``data_collection_order`` (its place among the transaction's events
of its table). And the connector writes a BEGIN and an END record per transaction on
``<topic.prefix>.transaction``; the END has the transaction's event count, in total and per data
collection (``db.table``). Every change lands with its block (:class:`Txn`), and every END lands as a
boundary row of the changelog (op :data:`TXN_END`, no table; its counts as :func:`end_counts` JSON), so
that which transactions have all their changes landed can be read from the changelog alone.

A block or an END that is not as Debezium writes it (an id that is not text, an order that is not a
positive integer) is read as none: the change still lands, without a transaction.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

TXN_END = "x"
"""The op of a transaction's END in the changelog (a boundary, not a change of any table)."""
TXN_DDL = "struct<id: string, total_order: bigint, data_collection_order: bigint>"


class Txn(NamedTuple):
    """The transaction block of a change; of an END row, its id and event count (``total_order``)."""

    id: str
    total_order: int | None
    data_collection_order: int | None


def _number(value: Any, least: int) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and least <= value < 2**63 else None


def _order(value: Any) -> int | None:
    """A place in a transaction: from 1."""
    return _number(value, 1)


def _count(value: Any) -> int | None:
    """An END's count: from 0 (a transaction that changed no captured table)."""
    return _number(value, 0)


def change_txn(payload: dict[str, Any]) -> Txn | None:
    """The transaction block of a change event's payload; None where it has none (metadata off, a
    snapshot read) or one not as Debezium writes it."""
    block = payload.get("transaction")
    if not isinstance(block, dict) or not isinstance(block.get("id"), str):
        return None
    total, per_table = _order(block.get("total_order")), _order(block.get("data_collection_order"))
    if total is None or per_table is None:
        return None
    return Txn(block["id"], total, per_table)


def transaction_end(message: dict[str, Any]) -> tuple[Txn, str] | None:
    """Of a transaction marker, where it is an END: its id and event count, and its counts per data
    collection as JSON (``{"db.table": n, ...}``, sorted); None for a BEGIN or a marker not as Debezium
    writes it."""
    if message.get("status") != "END" or not isinstance(message.get("id"), str):
        return None
    total = _count(message.get("event_count"))
    collections = message.get("data_collections")
    if total is None or not isinstance(collections, list):
        return None
    counts: dict[str, int] = {}
    for entry in collections:
        if not isinstance(entry, dict) or not isinstance(entry.get("data_collection"), str):
            return None
        n = _count(entry.get("event_count"))
        if n is None:
            return None
        counts[entry["data_collection"]] = counts.get(entry["data_collection"], 0) + n
    return Txn(message["id"], total, None), end_counts(counts)


def end_counts(counts: dict[str, int]) -> str:
    """An END's counts per data collection, as its changelog row keeps them."""
    return json.dumps(dict(sorted(counts.items())), separators=(",", ":"))
