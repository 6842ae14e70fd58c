"""The reference model: applies the same change events to a dict of key -> row, in plain Python.

It knows nothing of Spark or Delta and does not use cdc_delta's decoder or ordering code: it works
on the logical events the test generated, so the Delta table must agree with it independently.
Semantics (DESIGN.md, "Merge semantics"), batch by batch:
- per key, the event with the greatest ordering key in the batch is the candidate;
- it replaces the stored row only when its ordering key is greater (older or equal: no change);
  the row becomes its image (before image for a delete) with _cdc_deleted = (op == 'd');
- a truncate of a source table soft-deletes that source's rows whose ordering key is smaller;
- archival deletes (``archival``: table -> (min_rows, which rows)): a source transaction (a GTID, in its
  binlog file, of one source table) whose distinct deleted positions, over every batch so far, reach
  ``min_rows`` is a purge. Its deletes of rows that ``which`` takes are archived: op ``a``, the row live.
  Deletes of it applied before it was known to be a purge turn archived then. At one ordering key, an
  ``a`` replaces a ``d``.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
from collections.abc import Callable
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
    gtid: int = 0
    """The sequence number of the event's MariaDB GTID (its transaction); 0: none."""


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


Archival = dict[str, tuple[int, Callable[[dict[str, Any]], bool]]]


class Oracle:
    def __init__(
        self, keys: dict[str, tuple[str, ...]], shard_keyed: frozenset[str], archival: Archival | None = None
    ) -> None:
        self.keys = keys
        self.shard_keyed = shard_keyed
        self.archival = archival or {}
        self.tables: dict[str, dict[tuple, dict[str, Any]]] = {name: {} for name in keys}
        self.changes: dict[str, list[tuple[tuple, tuple, Event, int]]] = {name: [] for name in keys}
        """Every change of each table as landed, for its history: (key, ordering key, event, landing)."""
        self.truncated: dict[str, list[tuple[str, str, tuple, int]]] = {name: [] for name in keys}
        """Every truncate of each table: (source db, source table, ordering key, landing)."""
        self.landings = 0
        self.deleted: dict[tuple[str, str, str, int, int], set[tuple[int, int]]] = {}
        """(table, source db and table, binlog file, gtid) -> the positions its deletes were at, over every
        batch so far."""

    def _key(self, event: Event) -> tuple:
        key = tuple(event.values[k] for k in self.keys[event.table])  # type: ignore[index]
        return key + ((event.db, event.source_table) if event.table in self.shard_keyed else ())

    @staticmethod
    def _seq(event: Event, partition: int, offset: int) -> tuple:
        phase = 0 if event.op == "r" else 1
        return (phase, event.gtid, event.file_num, event.pos, event.row, event.ts_ms, partition, offset)

    def _purges(self, batch: list[Delivery]) -> set[tuple[str, str, str, int, int]]:
        for d in batch:
            e = d.event
            if d.expect == "ok" and e is not None and e.op == "d" and e.gtid > 0 and e.table in self.archival:
                where = (e.table, e.db, e.source_table, e.file_num, e.gtid)
                self.deleted.setdefault(where, set()).add((e.pos, e.row))
        return {k for k, rows in self.deleted.items() if len(rows) >= self.archival[k[0]][0]}

    def _op(self, e: Event, purges: set[tuple[str, str, str, int, int]]) -> str:
        purged = e.op == "d" and (e.table, e.db, e.source_table, e.file_num, e.gtid) in purges
        return "a" if purged and self.archival[e.table][1](e.values or {}) else e.op

    @staticmethod
    def _replaces(seq: tuple, op: str, current_seq: tuple, current_op: str) -> bool:
        return seq > current_seq or (seq == current_seq and op == "a" and current_op == "d")

    def apply_batch(self, batch: list[Delivery]) -> None:
        land, self.landings = self.landings, self.landings + 1
        purges = self._purges(batch)
        for table, rows in self.tables.items():  # deletes of a purge known only now
            for row in rows.values():
                seq = row["_cdc_seq"]
                where = (table, row["_cdc_source_db"], row["_cdc_source_table"], seq[2], seq[1])
                if row["_cdc_op"] == "d" and where in purges and self.archival[table][1](row):
                    row.update(_cdc_op="a", _cdc_deleted=False)
        candidates: dict[tuple[str, tuple], tuple[tuple, str, Event]] = {}
        truncates: dict[tuple[str, str, str], tuple] = {}
        for d in batch:
            if d.expect != "ok" or d.event is None:
                continue
            e = d.event
            seq = self._seq(e, d.partition, d.offset)
            if e.op == "t":
                self.truncated[e.table].append((e.db, e.source_table, seq, land))
            else:
                self.changes[e.table].append((self._key(e), seq, e, land))
            if e.op == "t":
                where = (e.table, e.db, e.source_table)
                truncates[where] = max(truncates.get(where, seq), seq)
                continue
            slot = (e.table, self._key(e))
            op = self._op(e, purges)
            if slot not in candidates or self._replaces(seq, op, *candidates[slot][:2]):
                candidates[slot] = (seq, op, e)
        for (table, key), (seq, op, e) in candidates.items():
            current = self.tables[table].get(key)
            if current is None or self._replaces(seq, op, current["_cdc_seq"], current["_cdc_op"]):
                row = {k: canonical(v) for k, v in (e.values or {}).items()}
                row.update(
                    _cdc_op=op,
                    _cdc_deleted=op == "d",
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

    def versions(self, table: str, columns: list[str]) -> list[dict[str, Any]]:
        """The table's history (SCD type 2), every version with exactly ``columns`` (the image of its last
        change), its first and last change's ordering keys, the op of its last change, what closed it and
        the ordering key of that. Per key, in ordering-key order, its changes and the truncates that reach
        it (a change of the key from the truncated source landed in the truncate's batch or before); one
        change per ordering key (an archived delete before a delete); a delete or truncate closes the open
        version, a change whose image differs from the open version's opens a new one, and one whose image
        is the same updates it."""
        purges = {k for k, rows in self.deleted.items() if len(rows) >= self.archival[k[0]][0]}
        per_key: dict[tuple, list[tuple[tuple, str, Event | None, int]]] = {}
        for key, seq, e, land in self.changes[table]:
            per_key.setdefault(key, []).append((seq, self._op(e, purges), e, land))
        out: list[dict[str, Any]] = []
        for items in per_key.values():
            first: dict[tuple[str, str], int] = {}
            for _, _, e, land in items:
                assert e is not None
                where = (e.db, e.source_table)
                first[where] = min(first.get(where, land), land)
            marks = [
                (seq, "t", None, land)
                for db, source_table, seq, land in self.truncated[table]
                if first.get((db, source_table), land + 1) <= land
            ]
            one: dict[tuple, tuple[tuple, str, Event | None, int]] = {}
            for item in items + marks:
                kept = one.get(item[0])
                if kept is None or ((item[1] == "a", item[3]) > (kept[1] == "a", kept[3])):
                    one[item[0]] = item
            current: dict[str, Any] | None = None
            for seq, op, e, _ in sorted(one.values(), key=lambda i: i[0]):
                closer = e is None or op in ("d", "t")
                image = {} if closer else {c: canonical((e.values or {}).get(c)) for c in columns}  # type: ignore[union-attr]
                if not closer and current is not None and image == {c: current[c] for c in columns}:
                    current.update(_cdc_op=op, _cdc_seq=seq)
                    continue
                if current is not None:
                    out.append({**current, "_cdc_valid_to_seq": seq, "_cdc_closed_by": op})
                    current = None
                if not closer:
                    assert e is not None
                    current = {
                        **image,
                        "_cdc_valid_from_seq": seq,
                        "_cdc_op": op,
                        "_cdc_seq": seq,
                        "_cdc_source_db": e.db,
                        "_cdc_source_table": e.source_table,
                    }
            if current is not None:
                out.append({**current, "_cdc_valid_to_seq": None, "_cdc_closed_by": None})
        return sorted(out, key=repr)
