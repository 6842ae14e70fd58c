"""The key ranges ``check`` names for a repair: counted by range on both sides, differing ranges merged
into a --where that takes every differing key and, where the whole table is as good, none."""

from __future__ import annotations

import datetime as dt
import random

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from cdc_delta import columns as C
from cdc_delta.check import delta_side
from cdc_delta.check.key_ranges import BUCKETS, Buckets, differing, repair_where, width


def test_only_an_integer_first_key_column_is_cut_into_ranges() -> None:
    assert width("a", "z") is None and width(1.5, 3) is None and width(True, True) is None and width(5, 1) is None
    assert width(1, 1) == 1 and width(1, BUCKETS) == 1 and width(1, BUCKETS + 1) == 2
    buckets = Buckets.over(101, 1100)
    assert buckets is not None and buckets.width == 16
    assert [buckets.of(k) for k in (101, 116, 117, 1100)] == [0, 0, 1, 62]
    assert buckets.span(62, 63) == (1093, 1100)  # the last range ends at the source's high


def test_differing_ranges_become_one_where_that_takes_each_of_their_keys() -> None:
    buckets = Buckets(1, 6400, 100)
    assert differing({0: 100, 1: 100, 5: 100}, {0: 100, 1: 99, 5: 101, 9: 1}) == [1, 5, 9]
    assert repair_where("id", buckets, []) is None
    assert repair_where("id", buckets, [3]) == "id BETWEEN 301 AND 400"
    assert repair_where("id", buckets, [3, 4, 7]) == "(id BETWEEN 301 AND 500 OR id BETWEEN 701 AND 800)"
    # More runs than MAX_RANGES: one range from the first to the last.
    assert repair_where("id", buckets, [1, 3, 5, 7, 9]) == "id BETWEEN 101 AND 1000"
    # Most of the table differs: read it whole.
    assert repair_where("id", buckets, list(range(40))) is None
    assert repair_where("order id", buckets, [0]) == "`order id` BETWEEN 1 AND 100"


@pytest.mark.parametrize("seed", range(20))
def test_the_where_takes_every_key_whose_presence_differs(seed: int) -> None:
    """Random damage (keys lost, keys added inside the source's range): every damaged key of a range whose
    count differs is inside the --where, or the whole table is read (a key lost and one added in the same
    range cancel out: counts are what check compares)."""
    rng = random.Random(seed)
    low, high = rng.randint(-50, 50), rng.randint(100, 50_000)
    source = set(rng.sample(range(low, high + 1), min(high - low + 1, 2_000))) | {low, high}
    damaged = set(rng.sample(sorted(source), rng.randint(1, 4)))
    added = {rng.randint(low, high) for _ in range(rng.randint(0, 3))} - source
    lake = (source - damaged) | added
    buckets = Buckets.over(low, high)
    assert buckets is not None

    def counts(keys: set[int]) -> dict[int, int]:
        out: dict[int, int] = {}
        for k in keys:
            out[buckets.of(k)] = out.get(buckets.of(k), 0) + 1
        return out

    ranges = differing(counts(source), counts(lake))
    where = repair_where("id", buckets, ranges)
    if where is None:
        return
    spans = [
        tuple(int(x) for x in term.split(" BETWEEN ")[1].split(" AND ")) for term in where.strip("()").split(" OR ")
    ]
    for key in damaged | added:
        if buckets.of(key) not in ranges:
            continue
        assert any(lo <= key <= hi for lo, hi in spans), (key, where)


def test_the_lake_is_counted_by_range_as_the_source_is(tmp_path: object) -> None:
    """Rows that existed at the source's moment (live, or deleted after it) counted in the same ranges; an
    archived row (a purge the lake keeps) is gone at the source since its purge."""
    at = dt.datetime(2026, 12, 1, 12, tzinfo=dt.timezone.utc)
    ids = list(range(1, 201))
    deleted = [i in (5, 6, 150) for i in ids]
    ops = ["a" if i in (7, 8) else "d" if deleted[i - 1] else "c" for i in ids]
    later = (150, 8)
    when = [at + dt.timedelta(seconds=10) if i in later else at - dt.timedelta(seconds=10) for i in ids]
    table = pa.table(
        {
            "id": pa.array(ids, pa.int32()),
            C.OP: pa.array(ops),
            C.DELETED: pa.array(deleted),
            C.SOURCE_TS: pa.array(when, pa.timestamp("us", tz="UTC")),
        }
    )
    path = f"{tmp_path}/t"
    write_deltalake(path, table)
    size = width(1, 200)
    assert size == 4
    state = delta_side.read_state(DeltaTable(path), ["id"], 1, 200, int(at.timestamp() * 1000), (200,), size)
    assert state.rows == 197 and state.newest_key_present is True
    expected = {b: 4 for b in range(50)}
    # keys 5..8: 5 and 6 deleted before the moment, 7 purged (archived) before it; 8 purged after it, and
    # 150 deleted after it, still count
    expected[1] = 1
    assert state.range_rows == expected
