"""A change whose key column is null would never match a row (``t.k = s.k`` is never true for null) and
be inserted again at every merge: the MERGE refuses it, so the table stops with the reason (a key that a
connector's ``message.key.columns`` names over a nullable column). Refused before either form of the
MERGE writes: the guarded one into a table with rows, the insert-only one into a new table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cdc_delta.delta.commits import Commit, StreamCommit
from cdc_delta.delta.tables import current_version
from cdc_delta.merger.merge import NullKey, merge_rows

pytestmark = pytest.mark.spark

SCHEMA = "id int, line string, v string, _cdc_seq int"


@pytest.mark.parametrize("empty", [False, True], ids=["guarded MERGE", "insert-only MERGE"])
def test_a_change_with_a_null_key_column_is_refused_and_nothing_is_written(
    spark: Any, tmp_path: Path, empty: bool
) -> None:
    path = str(tmp_path / "t")
    held = [] if empty else [(1, "x", "a", 1)]
    spark.createDataFrame(held, SCHEMA).write.format("delta").save(path)
    rows = spark.createDataFrame([(2, "y", "b", 2), (3, None, "c", 2), (None, "z", "d", 2)], SCHEMA)
    commit = Commit("t.merge", 1, StreamCommit(app_id="t", land_seq=1))
    with pytest.raises(NullKey, match=r"2 change\(s\) of table db\.t have a null key column \(key \['id', 'line'\]\)"):
        merge_rows(spark, path, rows, ["id", "line"], {"id": "int", "line": "string"}, commit, "db.t", empty=empty)
    assert current_version(spark, path) == 0
    assert [tuple(r) for r in spark.read.format("delta").load(path).collect()] == held
