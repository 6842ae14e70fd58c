"""The mark a re-snapshot finds missing rows by: the greatest ordering key, compared as the tuple it is,
read from a struct column with pyarrow (no Spark before the signal)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from cdc_delta.events.ordering import SEQ_FIELDS, Seq
from cdc_delta.repair.missing import _newest

_TYPES = {"int": pa.int32(), "bigint": pa.int64()}
SEQ_TYPE = pa.struct([(name, _TYPES[kind]) for name, kind in SEQ_FIELDS])


@pytest.mark.parametrize("seed", range(30))
def test_the_newest_is_the_greatest_tuple_across_chunks(seed: int) -> None:
    rng = random.Random(seed)
    seqs = [Seq(*(rng.randint(0, 3) for _ in SEQ_FIELDS)) for _ in range(rng.randint(1, 200))]
    cut = rng.randint(0, len(seqs))
    chunks = [
        pa.array([s._asdict() for s in part] + [None], SEQ_TYPE) for part in (seqs[:cut], seqs[cut:])
    ]  # a null struct in each chunk (a row without an ordering key) orders nothing
    assert _newest(pa.chunked_array(chunks, SEQ_TYPE)) == max(seqs)


def test_nothing_is_newest_where_there_is_nothing() -> None:
    assert _newest(pa.chunked_array([pa.array([None], SEQ_TYPE)], SEQ_TYPE)) is None
    assert _newest(pa.chunked_array([], SEQ_TYPE)) is None
