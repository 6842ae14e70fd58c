"""The consistent point against a plain model: random transactions over several tables whose changes and
ENDs land in random interleavings (each topic in order, some changes twice, a connector sending a run of
transactions again), computed after every landing from the point before (as the stream does) and from
nothing (as a reader without one does). The point is always the newest transaction with it and every one
before it whole in the landings, and never passes one whose change is missing."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass

import pytest

from cdc_delta.consistency.point import (
    End,
    Point,
    advance,
    at_or_before,
    committed_before,
    first_past,
    passed_ids,
    txn_rank,
)

TABLES = ("shop.accounts", "shop.ledger", "shop.audit", "shop.untaken")
TAKEN = set(TABLES) - {"shop.untaken"}


@dataclass(frozen=True)
class Row:
    land_seq: int
    end: End | None = None
    change: tuple[str, str, int] | None = None
    """(transaction id, data collection, total order)."""


def workload(rng: random.Random, n: int) -> tuple[list[dict[str, int]], list[Row]]:
    """``n`` transactions (GTIDs 0-1-1..n) and their rows, landed in random order per topic. Transaction k
    commits at :func:`commit_ms` (k)."""
    txns = []
    for _ in range(n):
        counts = {t: rng.choice((0, 0, 1, 2, 3)) for t in TABLES}
        txns.append({t: c for t, c in counts.items() if c})
    queues: dict[str, list[tuple]] = defaultdict(list)
    offset = 0
    for k, counts in enumerate(txns, start=1):
        order = 0
        for table, count in counts.items():
            for _ in range(count):
                order += 1
                queues[table].append(("change", f"0-1-{k}", table, order))
        queues["txn"].append(("end", f"0-1-{k}", dict(counts), offset))
        offset += 2  # a BEGIN between two ENDs
    resent = rng.random() < 0.5 and n > 3
    if resent:  # the connector starts again and sends transactions 2..4 again
        for k in range(2, 5):
            order = 0
            for table, count in txns[k - 1].items():
                for _ in range(count):
                    order += 1
                    queues[table].append(("change", f"0-1-{k}", table, order))
            queues["txn"].append(("end", f"0-1-{k}", dict(txns[k - 1]), offset))
            offset += 2
    rows: list[Row] = []
    land = 0
    cursors = {name: 0 for name in queues}
    while any(cursors[q] < len(queues[q]) for q in queues):
        land += 1
        for name, items in queues.items():
            take = rng.choice((0, 0, 1, 2, 4))
            for item in items[cursors[name] : cursors[name] + take]:
                if item[0] == "end":
                    _, txn, counts, off = item
                    ts = commit_ms(int(txn.split("-")[-1]))
                    rows.append(Row(land, end=End(txn, "srv.transaction", 0, off, counts, ts, land)))
                else:
                    rows.append(Row(land, change=item[1:]))
                    if rng.random() < 0.1:  # delivered twice
                        rows.append(Row(land + 1, change=item[1:]))
            cursors[name] += take
    return txns, rows


def commit_ms(k: int) -> int:
    """Transaction k's commit time: in commit order but for a clock that steps back by up to 3 ms."""
    return 1000 + 4 * k - random.Random(k).randint(0, 3) * (k % 3 == 0) * 2


def expected(txns: list[dict[str, int]], rows: list[Row], through: int, cutoff_ms: int | None = None) -> str | None:
    """The model: the newest transaction k with every transaction 1..k's END landed and its taken changes;
    with ``cutoff_ms``, and every transaction 1..k committed before it."""
    ends = {r.end.txn_id for r in rows if r.end is not None and r.land_seq <= through}
    have = defaultdict(set)
    for r in rows:
        if r.change is not None and r.land_seq <= through:
            txn, table, order = r.change
            have[(txn, table)].add(order)
    point = None
    for k, counts in enumerate(txns, start=1):
        txn = f"0-1-{k}"
        if cutoff_ms is not None and commit_ms(k) >= cutoff_ms:
            break
        whole = txn in ends and all(len(have[(txn, t)]) == c for t, c in counts.items() if t in TAKEN)
        if not whole:
            break
        point = txn
    return point


def window(rows: list[Row], start: int, through: int) -> tuple[list[End], dict[tuple[str, str], tuple[int, int]]]:
    ends = [r.end for r in rows if r.end is not None and start <= r.land_seq <= through]
    orders: dict[tuple[str, str], set[int]] = defaultdict(set)
    first: dict[tuple[str, str], int] = {}
    for r in rows:
        if r.change is not None and start <= r.land_seq <= through:
            key = (r.change[0], r.change[1])
            orders[key].add(r.change[2])
            first[key] = min(first.get(key, r.land_seq), r.land_seq)
    return ends, {k: (len(v), first[k]) for k, v in orders.items()}


def visible(rows: list[Row], point: Point) -> set[tuple[str, str, int]]:
    """The changes a read at ``point`` shows, by the product's rule: those landed before its scan_from, and
    from there through its landing, those of the transactions it passed."""
    window = [r for r in rows if point.scan_from <= r.land_seq <= point.through]
    ends = {r.end.txn_id: r.end.offset for r in window if r.end is not None}
    passed = passed_ids(point, ends, {r.change[0] for r in window if r.change is not None})
    return {
        r.change
        for r in rows
        if r.change is not None
        and r.land_seq <= point.through
        and (r.land_seq < point.scan_from or r.change[0] in passed)
    }


def changes_up_to(rows: list[Row], point: Point) -> set[tuple[str, str, int]]:
    """The model: every change landed of a transaction at or before the point (GTID 0-1-k: k in order)."""
    last = 0 if point.txn_id is None else int(point.txn_id.split("-")[-1])
    return {
        r.change
        for r in rows
        if r.change is not None and r.land_seq <= point.through and int(r.change[0].split("-")[-1]) <= last
    }


@pytest.mark.parametrize("seed", range(300))
def test_the_point_is_the_newest_whole_run_of_transactions(seed: int) -> None:
    rng = random.Random(seed)
    txns, rows = workload(rng, rng.randint(1, 12))
    newest = max(r.land_seq for r in rows)
    previous: Point | None = None
    kept_points: list[Point] = []  # the points the stream kept, as kept_before looks for one
    for through in range(1, newest + 1):
        ends, landed = window(rows, previous.scan_from if previous else 0, through)
        found = advance(previous, ends, landed, lambda c: c in TAKEN, through)
        assert found.unavailable is None and found.point is not None
        assert found.point.txn_id == expected(txns, rows, through), (seed, through)
        previous = found.point
        assert visible(rows, previous) == changes_up_to(rows, previous), (seed, through)
        # A reader with no point of its own, from the changelog's start, finds the same.
        ends, landed = window(rows, 0, through)
        assert advance(None, ends, landed, lambda c: c in TAKEN, through).point == previous
        # At or before a cut-off (the nightly snapshot's), from nothing and from the newest point kept
        # before the first END past it (as point_before goes on).
        cutoff = rng.randint(1000, commit_ms(len(txns)) + 2)
        bounded = advance(None, committed_before(ends, cutoff), landed, lambda c: c in TAKEN, through).point
        assert bounded is not None and bounded.txn_id == expected(txns, rows, through, cutoff), (seed, through, cutoff)
        assert visible(rows, bounded) == changes_up_to(rows, bounded), (seed, through, cutoff)
        bound = first_past(ends, cutoff)
        kept = next(
            (p for p in reversed(kept_points) if p.offset is not None and (bound is None or p.offset < bound)), None
        )
        if kept is not None:
            ends, landed = window(rows, kept.scan_from, through)
            onward = advance(kept, committed_before(ends, cutoff), landed, lambda c: c in TAKEN, through).point
            assert onward is not None and onward.txn_id == bounded.txn_id, (seed, through, cutoff)
            assert visible(rows, onward) == changes_up_to(rows, onward), (seed, through, cutoff)
        if previous.txn_id is not None:
            kept_points.append(previous)
    assert previous is not None and previous.txn_id == f"0-1-{len(txns)}"  # every transaction landed
    if previous.scan_from <= newest:  # what is left to read holds only transactions sent again
        assert all(
            r.end is None or at_or_before(r.end.txn_id, previous.txn_id)
            for r in rows
            if r.land_seq >= previous.scan_from
        )


def test_what_a_transaction_lacks_is_named() -> None:
    end = End("0-1-7", "srv.transaction", 0, 10, {"shop.accounts": 2, "shop.ledger": 1, "shop.untaken": 5}, 99, 3)
    found = advance(
        None, [end], {("0-1-7", "shop.accounts"): (1, 2), ("0-1-7", "shop.ledger"): (1, 2)}, TAKEN.__contains__, 3
    )
    assert found.point is not None and found.point.txn_id is None and found.ends_after == 1
    assert found.waiting is not None
    assert found.waiting.line() == "transaction 0-1-7 has not landed whole (shop.accounts 1 of 2 changes landed)"


def test_ends_from_two_partitions_cannot_be_ordered() -> None:
    ends = [End(f"0-1-{p}", "srv.transaction", p, 0, {}, None, 1) for p in (0, 1)]
    found = advance(None, ends, {}, TAKEN.__contains__, 1)
    assert found.point is None and found.unavailable is not None and "one partition" in found.unavailable


def test_transaction_ids_order_within_their_source() -> None:
    assert at_or_before("0-1-9", "0-2-10") and not at_or_before("0-1-11", "0-1-10")
    assert not at_or_before("1-1-9", "0-1-10")  # another GTID domain: no order known
    uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    assert at_or_before(f"{uuid}:5", f"{uuid.upper()}:6")
    assert at_or_before("mysql-bin.000003:900", "mysql-bin.000004:4")
    assert txn_rank("not a position") is None and not at_or_before("a", "b")
