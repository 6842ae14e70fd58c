"""The consistent point: the newest source transaction such that it and every transaction committed before
it have all their changes landed in the changelog.

With Debezium's transaction metadata (:mod:`cdc_delta.events.transactions`) every change lands with its
transaction's id and its place in it, and every transaction's END lands with its event count per table
(``db.table``). The ENDs land in commit order (the transaction topic's offsets: one partition). Walking
them in that order from the last point, a transaction is *complete* when, for every table of its END that
the lake takes (its changes route to a configured table, and it is not the signal table), the changelog
holds as many distinct changes of it as the END counts (a change Kafka delivered twice counts once); the
point is the last END of the run of complete ones. A change that has not landed (a partition behind, a
dead letter not replayed) holds the point at the transaction before its own, and :attr:`Consistency.waiting`
says which transaction, and what it still lacks.

Only the landings that can hold something past the point are read: :attr:`Point.scan_from`, the oldest
landing of an END or a change of a transaction not passed yet. The stream keeps the point it last
computed in each landing's record (:attr:`cdc_delta.delta.commits.StreamCommit.consistent`), and a reader
goes on from there (:func:`consistent_point`): with delta-rs, no Spark.

A connector that starts again sends again the transactions since its last committed offset: their ENDs and
changes land twice. An END at or below the point (by its GTID's sequence number, or its binlog position)
is one passed already and is skipped. A transaction without an END (a DDL's, a TRUNCATE's) gives the point
nothing to wait for.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_MARIADB = re.compile(r"\s*(\d+)-\d+-(\d+)\s*")
_MYSQL = re.compile(r"\s*([0-9A-Fa-f-]{36}):(\d+)\s*")
_BINLOG = re.compile(r"(.*?)(\d+):(\d+)")


def txn_rank(txn_id: str) -> tuple[tuple[str, str], tuple[int, ...]] | None:
    """Where a transaction stands in its source's commit order: (family, position), the positions of one
    family comparable. A MariaDB GTID ``domain-server-seq``: its domain, its sequence number; a MySQL GTID
    ``uuid:n``: its server, n; a binlog position ``file:pos``: the file's name before its number, (number,
    position). None where the id is none of these."""
    m = _MARIADB.fullmatch(txn_id)
    if m:
        return ("mariadb", m.group(1)), (int(m.group(2)),)
    m = _MYSQL.fullmatch(txn_id)
    if m:
        return ("mysql", m.group(1).lower()), (int(m.group(2)),)
    m = _BINLOG.fullmatch(txn_id)
    if m:
        return ("binlog", m.group(1)), (int(m.group(2)), int(m.group(3)))
    return None


def at_or_before(a: str, b: str) -> bool:
    """Whether transaction ``a`` is ``b`` or committed before it (False where their ranks do not compare)."""
    if a == b:
        return True
    ra, rb = txn_rank(a), txn_rank(b)
    return ra is not None and rb is not None and ra[0] == rb[0] and ra[1] <= rb[1]


@dataclass(frozen=True)
class End:
    """A transaction's END as the changelog holds it."""

    txn_id: str
    topic: str
    partition: int
    offset: int
    counts: dict[str, int]
    """Events per data collection (``db.table``)."""
    source_ts_ms: int | None
    land_seq: int


@dataclass(frozen=True)
class Point:
    """A consistent point: the END of the last transaction of the complete run, where it is on the
    transaction topic, its commit time, and the landings it was computed from."""

    txn_id: str | None
    """None: no transaction passed yet (the point is before the first END landed)."""
    topic: str | None
    partition: int | None
    offset: int | None
    source_ts_ms: int | None
    through: int
    """The newest landing when it was computed: every change of a transaction up to the point landed at
    or before it."""
    scan_from: int
    """The oldest landing that may hold an END or a change of a transaction after the point."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Point | None:
        """The point a landing's record keeps; None where it keeps none, or one this version cannot read."""
        if not isinstance(data, Mapping):
            return None
        try:
            values: dict[str, Any] = {f.name: data.get(f.name) for f in dataclasses.fields(cls)}
            if not isinstance(values["through"], int) or not isinstance(values["scan_from"], int):
                return None
            return cls(**values)
        except TypeError:
            return None


@dataclass(frozen=True)
class Waiting:
    """The first transaction past the point: what it still lacks."""

    txn_id: str
    missing: dict[str, tuple[int, int]]
    """Per data collection: (changes landed, changes its END counts)."""

    def line(self) -> str:
        lacks = ", ".join(f"{c} {landed} of {expected}" for c, (landed, expected) in sorted(self.missing.items()))
        return f"transaction {self.txn_id} has not landed whole ({lacks} changes landed)"


@dataclass(frozen=True)
class Consistency:
    """The consistent point now, and why it is not further."""

    point: Point | None
    """None: it cannot be computed (:attr:`unavailable` says why)."""
    waiting: Waiting | None = None
    ends_after: int = 0
    """ENDs landed past the point (transactions a consistent read does not show yet)."""
    unavailable: str | None = None
    newest_source_ts_ms: int | None = None
    """The newest source time landed (where the reader knows it): what the point trails."""

    def trails_s(self) -> float | None:
        """Seconds of source time between the point's transaction and the newest change landed."""
        point = self.point
        if point is None or point.source_ts_ms is None or self.newest_source_ts_ms is None:
            return None
        return max(0.0, (self.newest_source_ts_ms - point.source_ts_ms) / 1000)

    def line(self) -> str:
        """One line for ``status``."""
        point = self.point
        if point is None or point.txn_id is None:
            why = self.unavailable or (self.waiting.line() if self.waiting else "no transaction landed whole yet")
            return f"consistent point: none ({why})"
        when = "" if point.source_ts_ms is None else f" committed {_utc(point.source_ts_ms)} UTC"
        trails = self.trails_s()
        behind = "" if trails is None else f", {trails:.1f}s behind the newest change landed"
        after = f"; {self.ends_after} transactions landed past it" if self.ends_after else ""
        waiting = f" ({self.waiting.line()})" if self.waiting else ""
        return f"consistent point: transaction {point.txn_id}{when}{behind}{after}{waiting}"


def _utc(ts_ms: int) -> str:
    return dt.datetime.fromtimestamp(ts_ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def advance(
    previous: Point | None,
    ends: list[End],
    landed: Mapping[tuple[str, str], tuple[int, int]],
    taken: Callable[[str], bool],
    newest: int,
) -> Consistency:
    """The point after ``previous`` (None: from the start), given what the landings from its
    :attr:`~Point.scan_from` through ``newest`` hold: ``ends``, the ENDs landed there, and ``landed``, per
    (transaction id, data collection) the distinct changes landed there and the oldest landing of one.
    ``taken``: whether the lake takes a data collection's changes."""
    topics: set[tuple[str | None, int | None]] = {(e.topic, e.partition) for e in ends}
    if previous is not None and previous.topic is not None:
        topics.add((previous.topic, previous.partition))
    if len(topics) > 1:
        where = ", ".join(f"{t} partition {p}" for t, p in sorted(topics))
        return Consistency(
            None,
            unavailable=f"transaction ENDs come from several topic partitions ({where}), whose order across them "
            "is unknown: give the transaction topic one partition, and one connector to each app",
        )
    point = previous or Point(None, None, None, None, None, newest, 0)
    start = point.offset
    after = sorted((e for e in ends if start is None or e.offset > start), key=lambda e: e.offset)
    seen: set[str] = set()
    fresh = []
    for e in after:
        if e.txn_id in seen or (point.txn_id is not None and at_or_before(e.txn_id, point.txn_id)):
            continue  # sent again by a connector that started again
        seen.add(e.txn_id)
        fresh.append(e)
    passed = 0
    waiting = None
    for e in fresh:
        have = {c: landed.get((e.txn_id, c), (0, 0))[0] for c in e.counts}
        missing = {c: (have[c], n) for c, n in e.counts.items() if n > 0 and taken(c) and have[c] < n}
        if missing:
            waiting = Waiting(e.txn_id, missing)
            break
        point = Point(e.txn_id, e.topic, e.partition, e.offset, e.source_ts_ms, newest, point.scan_from)
        passed += 1
    # Passed: those of this walk, and those at or before the point it started from.
    done = {e.txn_id for e in fresh[:passed]} | {e.txn_id for e in ends if start is not None and e.offset <= start}
    rest = fresh[passed:]
    later = [e.land_seq for e in rest]
    later += [
        first
        for (txn_id, _), (_, first) in landed.items()
        if txn_id not in done and (point.txn_id is None or not at_or_before(txn_id, point.txn_id))
    ]
    scan_from = min(later, default=newest + 1)
    return Consistency(
        dataclasses.replace(point, through=newest, scan_from=max(scan_from, point.scan_from)),
        waiting,
        len(rest),
    )


def first_past(ends: Iterable[End], cutoff_ms: int) -> int | None:
    """The offset of the first of ``ends`` (on the transaction topic) that committed at or after ``cutoff_ms``
    (or at a time unknown); None where all committed before it. The commit order is the offsets', not the
    times' (a statement that began before the cut-off can commit after a later one): a point at or before
    a cut-off is before this END."""
    return min((e.offset for e in ends if e.source_ts_ms is None or e.source_ts_ms >= cutoff_ms), default=None)


def committed_before(ends: list[End], cutoff_ms: int) -> list[End]:
    """Of ``ends``, those before :func:`first_past`."""
    bound = first_past(ends, cutoff_ms)
    return [e for e in ends if bound is None or e.offset < bound]


def passed_ids(point: Point, ends: Mapping[str, int], txn_ids: Iterable[str]) -> set[str]:
    """Of ``txn_ids`` (the transactions of changes landed from the point's ``scan_from`` through its
    ``through``), those at or before the point: their END is among ``ends`` (id -> offset on the
    transaction topic, of the ENDs landed in those landings) at or before the point's, or their id ranks
    at or before the point's (a transaction passed whose END landed before ``scan_from``, while a change
    of it landed after)."""
    if point.txn_id is None:
        return set()
    out = set()
    for txn_id in txn_ids:
        offset = ends.get(txn_id)
        if (offset is not None and point.offset is not None and offset <= point.offset) or at_or_before(
            txn_id, point.txn_id
        ):
            out.add(txn_id)
    return out


def parse_counts(text: str | None) -> dict[str, int]:
    """An END row's counts (its ``row_json``)."""
    data = json.loads(text or "{}")
    return {str(k): int(v) for k, v in data.items()} if isinstance(data, dict) else {}
