"""The reference model: applies the same change events to a dict of key -> row, in plain Python.

It knows nothing of Spark or Delta and does not use cdc_delta's decoder or ordering code: it works
on the logical events the test generated, so the Delta table must agree with it independently.
Semantics (DESIGN.md, "Merge semantics"), batch by batch:
- per key, the event with the greatest ordering key in the batch is the candidate;
- it replaces the stored row only when its ordering key is greater (older or equal: no change);
  the row becomes its image (before image for a delete) with _cdc_deleted = (op == 'd');
- a truncate of a source table soft-deletes that source's rows whose ordering key is smaller.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
from dataclasses import dataclass
from typing import Any

EPOCH = dt.datetime(1970, 1, 1)


def canonical(value: Any) -> Any:
    """A Python value in the form the comparison reads back from Delta."""
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime):
        delta = value - EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, tuple):
        return list(value)
    return value


@dataclass(frozen=True)
class Event:
    """One change as the source database made it."""

    table: str
    db: str
    source_table: str
    op: str
    values: dict[str, Any] | None
    file_num: int
    pos: int
    row: int
    ts_ms: int


@dataclass(frozen=True)
class Delivery:
    """One Kafka record as delivered: the event it carries (None for tombstones and garbage)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    event: Event | None
    expect: str  # "ok", "dead" or "skip"


class Oracle:
    def __init__(self, keys: dict[str, tuple[str, ...]], shard_keyed: frozenset[str]) -> None:
        self.keys = keys
        self.shard_keyed = shard_keyed
        self.tables: dict[str, dict[tuple, dict[str, Any]]] = {name: {} for name in keys}

    def _key(self, event: Event) -> tuple:
        key = tuple(event.values[k] for k in self.keys[event.table])  # type: ignore[index]
        return key + ((event.db, event.source_table) if event.table in self.shard_keyed else ())

    @staticmethod
    def _seq(event: Event, partition: int, offset: int) -> tuple:
        return (0 if event.op == "r" else 1, 0, event.file_num, event.pos, event.row, event.ts_ms, partition, offset)

    def apply_batch(self, batch: list[Delivery]) -> None:
        candidates: dict[tuple[str, tuple], tuple[tuple, Event]] = {}
        truncates: dict[tuple[str, str, str], tuple] = {}
        for d in batch:
            if d.expect != "ok" or d.event is None:
                continue
            e = d.event
            seq = self._seq(e, d.partition, d.offset)
            if e.op == "t":
                where = (e.table, e.db, e.source_table)
                truncates[where] = max(truncates.get(where, seq), seq)
                continue
            slot = (e.table, self._key(e))
            if slot not in candidates or seq > candidates[slot][0]:
                candidates[slot] = (seq, e)
        for (table, key), (seq, e) in candidates.items():
            current = self.tables[table].get(key)
            if current is None or seq > current["_cdc_seq"]:
                row = {k: canonical(v) for k, v in (e.values or {}).items()}
                row.update(
                    _cdc_op=e.op,
                    _cdc_deleted=e.op == "d",
                    _cdc_seq=seq,
                    _cdc_source_db=e.db,
                    _cdc_source_table=e.source_table,
                )
                self.tables[table][key] = row
        for (table, db, source_table), seq in truncates.items():
            for row in self.tables[table].values():
                same = (row["_cdc_source_db"], row["_cdc_source_table"]) == (db, source_table)
                if same and row["_cdc_seq"] < seq:
                    row.update(_cdc_deleted=True, _cdc_op="t", _cdc_seq=seq)

    def rows(self, table: str, columns: list[str]) -> list[dict[str, Any]]:
        """The expected table, every row with exactly ``columns`` (absent values are None)."""
        return sorted(
            ({c: row.get(c) for c in columns} for row in self.tables[table].values()),
            key=repr,
        )
