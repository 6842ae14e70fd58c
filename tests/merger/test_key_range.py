"""A MERGE bounds its condition by the source's key range, so that Delta skips the table's files whose
statistics lie outside it. Seen by what the MERGE reads: the files outside the range are deleted from
disk before it, and it neither reads them nor fails."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from cdc_delta.delta.commits import Commit, StreamCommit
from cdc_delta.merger.merge import merge_rows

pytestmark = pytest.mark.spark

SCHEMA = "id int, v string, _cdc_seq int, _cdc_op string"


FILES = 8


def test_a_table_of_many_files_is_read_only_where_the_source_keys_are(spark: Any, tmp_path: Path) -> None:
    """A table of 8 files of 100 keys each, in key order, whose files past the first are deleted from disk;
    a MERGE of a newer change of key 5 and an equally old one of key 50 (both in the first file)."""
    path = str(tmp_path / "t")
    for f in range(FILES):
        rows = [(f * 100 + i, "a", 1, "c") for i in range(100)]
        spark.createDataFrame(rows, SCHEMA).coalesce(1).write.format("delta").mode("append").save(path)
    located = spark.read.format("delta").load(path).select("id", F.col("_metadata.file_path").alias("file"))
    far = located.groupBy("file").agg(F.min("id").alias("lo")).where("lo >= 100").collect()
    assert len(far) == FILES - 1
    for row in far:
        Path(row["file"].removeprefix("file:")).unlink()
    changes = spark.createDataFrame([(5, "b", 2, "u"), (50, "c", 1, "u")], SCHEMA)
    commit = Commit("t.merge", 1, StreamCommit(app_id="t", land_seq=1))
    try:
        merge_rows(spark, path, changes, ["id"], {"id": "int"}, commit, "db.t")
        read = spark.read.format("delta").load(path).where("id in (5, 50)").orderBy("id")
        got = read.select("id", "v", "_cdc_seq").collect()
    finally:
        shutil.rmtree(path)  # files gone: no table for the run's sweep to read (tests/conftest.py)
    assert [tuple(r) for r in got] == [(5, "b", 2), (50, "a", 1)]  # 50: not newer, changes nothing
