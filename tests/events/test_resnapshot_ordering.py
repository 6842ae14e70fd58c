"""A re-snapshot repairs: random interleavings of binlog changes with the reads of an incremental or a
blocking snapshot, taken as Debezium 3.5 takes them (a chunk's rows read between an open and a close
watermark, dropped for a key the binlog changes inside the window, emitted at the close's position; a
blocking snapshot's rows at the position where streaming paused), applied to a lake that drifted (values
changed, rows soft-deleted or lost, rows the source never had) with the merge's rule (per key, the change
with the greatest ordering key wins) give the source's rows for every key the snapshot read; the keys the
lake still holds live at or below its newest change before the snapshot are exactly those the source no
longer has. The connector's initial snapshot stays below every binlog change, as before."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cdc_delta.events.ordering import Seq, event_seq

FILE = "mysql-bin.000007"
KEYS = 12


@dataclass
class Change:
    key: int
    op: str
    value: int | None
    seq: Seq


@dataclass
class Binlog:
    """The source database and its binlog: every write is one transaction (a GTID) at the next position."""

    rows: dict[int, int] = field(default_factory=dict)
    pos: int = 4
    gtid: int = 0
    offset: int = 0
    emitted: list[Change] = field(default_factory=list)

    def source(self, **extra: Any) -> dict[str, Any]:
        return {"file": FILE, "pos": self.pos, "row": 0, "ts_ms": 1_000 + self.pos, **extra}

    def emit(self, key: int, op: str, value: int | None, source: dict[str, Any]) -> Change:
        self.offset += 1
        change = Change(key, op, value, event_seq(op, source, None, 0, self.offset))
        self.emitted.append(change)
        return change

    def write(self, key: int, value: int | None) -> Change | None:
        """Insert, update or delete ``key`` (None: delete); the binlog event it logs, None for no change."""
        before = self.rows.get(key)
        if value is None and before is None:
            return None
        self.gtid += 1
        self.pos += 100
        op = "d" if value is None else ("c" if before is None else "u")
        if value is None:
            del self.rows[key]
        else:
            self.rows[key] = value
        return self.emit(key, op, value, self.source(gtid=f"0-1-{self.gtid}"))

    def marker(self) -> None:
        """A write to another table (the signal table's watermark): a position, no change of this table."""
        self.gtid += 1
        self.pos += 100


def writes(draw: st.DrawFn, n: int) -> list[tuple[int, int | None]]:
    return draw(st.lists(st.tuples(st.integers(0, KEYS - 1), st.none() | st.integers(0, 99)), max_size=n))


def apply(lake: dict[int, Change], changes: list[Change]) -> None:
    """The merge's rule: per key, the change with the greatest ordering key wins (a delete soft-deletes)."""
    for change in changes:
        held = lake.get(change.key)
        if held is None or change.seq > held.seq:
            lake[change.key] = change


def live(lake: dict[int, Change]) -> dict[int, int | None]:
    return {k: c.value for k, c in lake.items() if c.op != "d"}


@st.composite
def histories(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "initial": draw(st.dictionaries(st.integers(0, KEYS - 1), st.integers(0, 99), max_size=KEYS)),
        "before": writes(draw, 15),
        "damage": draw(
            st.lists(st.tuples(st.sampled_from(["value", "soft_delete", "lose", "extra"]), st.integers(0, 2 * KEYS)))
        ),
        "chunk": draw(st.integers(1, 5)),
        "inside": [writes(draw, 3) for _ in range(KEYS)],
        "between": [writes(draw, 3) for _ in range(KEYS)],
        "after": writes(draw, 10),
        "only_even": draw(st.booleans()),
        "blocking": draw(st.booleans()),
        "paused_mid_transaction": draw(st.booleans()),
    }


def initial_snapshot(binlog: Binlog, rows: dict[int, int]) -> list[Change]:
    """The connector's first snapshot: every row at the position streaming starts from, no gtid."""
    binlog.rows = dict(rows)
    return [
        binlog.emit(k, "r", v, binlog.source(snapshot="true", ts_ms=5_000_000)) for k, v in sorted(binlog.rows.items())
    ]


def damaged(lake: dict[int, Change], damage: list[tuple[str, int]]) -> None:
    """What goes wrong in a lake: a value changed, a row soft-deleted or lost, a row the source never had;
    each keeps an ordering key the lake already held (no change from the future)."""
    newest = max((c.seq for c in lake.values()), default=None)
    for kind, key in damage:
        held = lake.get(key % KEYS)
        if kind == "extra" and newest is not None:
            lake[KEYS + key] = Change(KEYS + key, "u", -1, newest)
        elif held is not None and kind == "value":
            lake[held.key] = Change(held.key, held.op, -7, held.seq)
        elif held is not None and kind == "soft_delete":
            lake[held.key] = Change(held.key, "d", None, held.seq)
        elif held is not None and kind == "lose":
            del lake[held.key]


def incremental_snapshot(binlog: Binlog, h: dict[str, Any], wanted: list[int]) -> None:
    """Chunks of ``wanted`` keys in key order: open watermark, SELECT, writes inside the window (each
    drops the read of its key), close watermark, the window's reads at the close's position."""
    chunks = [wanted[i : i + h["chunk"]] for i in range(0, len(wanted), h["chunk"])]
    for i, chunk in enumerate(chunks):
        binlog.marker()  # open
        window = {k: binlog.rows[k] for k in chunk if k in binlog.rows}
        for key, value in h["inside"][i]:
            if binlog.write(key, value) is not None:
                window.pop(key, None)
        binlog.marker()  # close
        close = binlog.source(snapshot="incremental", gtid=f"0-1-{binlog.gtid}", ts_ms=9_999_999_999)
        for key, value in window.items():
            binlog.emit(key, "r", value, close)
        for key, value in h["between"][i]:
            binlog.write(key, value)


def blocking_snapshot(binlog: Binlog, h: dict[str, Any], wanted: list[int]) -> None:
    """Streaming paused: every wanted row read at the position of the event not handled yet, with the
    gtid of the last transaction begun and a stale row number. Paused between transactions, that is the
    last one's commit (after its row events); paused inside one, its next row event, which is committed
    (the SELECT sees it) and comes after the reads, at that very position."""
    if h["paused_mid_transaction"] and h["after"]:
        key, value = h["after"][0]
        change = binlog.write(key, value)
        if change is not None:
            binlog.emitted.pop()
            at = binlog.source(snapshot="true", gtid=f"0-1-{binlog.gtid}", row=3)
            for k in wanted:
                if k in binlog.rows:
                    binlog.emit(k, "r", binlog.rows[k], at)
            binlog.emitted.append(change)
            return
    at = {**binlog.source(snapshot="true", gtid=f"0-1-{binlog.gtid}", row=3), "pos": binlog.pos + 50}
    for k in wanted:
        if k in binlog.rows:
            binlog.emit(k, "r", binlog.rows[k], at)


@settings(max_examples=400, deadline=None)
@given(h=histories())
def test_a_resnapshot_gives_the_source_rows_and_names_the_keys_the_source_lacks(h: dict[str, Any]) -> None:
    binlog = Binlog()
    lake: dict[int, Change] = {}
    apply(lake, initial_snapshot(binlog, h["initial"]))
    for key, value in h["before"]:
        change = binlog.write(key, value)
        apply(lake, [change] if change else [])
    damaged(lake, h["damage"])
    newest_before = max((c.seq for c in lake.values()), default=None)

    binlog.emitted.clear()
    wanted = [k for k in range(KEYS) if not h["only_even"] or k % 2 == 0]
    if h["blocking"]:
        blocking_snapshot(binlog, h, wanted)
    else:
        incremental_snapshot(binlog, h, wanted)
    for key, value in h["after"]:
        binlog.write(key, value)
    apply(lake, list(reversed(binlog.emitted)))  # the order of delivery does not matter: the guard decides

    rows = live(lake)
    source = binlog.rows
    assert {k: rows.get(k) for k in wanted if k in source} == {k: source[k] for k in wanted if k in source}
    # What the lake holds live and the source has not: never read again nor changed since the snapshot began.
    missing = {k for k, c in lake.items() if c.op != "d" and newest_before is not None and c.seq <= newest_before}
    stale = {k for k in rows if k not in source and (k in wanted or k >= KEYS)}
    assert stale <= missing
    assert not {k for k in missing if k in source and k in wanted}


@settings(max_examples=200, deadline=None)
@given(h=histories())
def test_the_initial_snapshot_stays_below_every_binlog_change(h: dict[str, Any]) -> None:
    binlog = Binlog()
    lake: dict[int, Change] = {}
    reads = initial_snapshot(binlog, h["initial"])
    changes = [c for key, value in h["before"] if (c := binlog.write(key, value)) is not None]
    apply(lake, changes + reads)  # the snapshot's reads delivered last, as after a replay
    assert live(lake) == binlog.rows
    assert all(r.seq.phase == 0 for r in reads) and all(c.seq.phase == 1 for c in changes)
