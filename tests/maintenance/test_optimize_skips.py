"""OPTIMIZE is not run where it has nothing to do: a table of one file (nothing to compact), unless it may
rewrite a lone file (Z-order, deletion vectors), and a Z-ordered table with no change since its last
Z-order (which would rewrite every file again). Whether OPTIMIZE ran is read from the Spark jobs the call
started and from the table's versions."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from pyspark.sql import Row

from cdc_delta.config import parse_config
from cdc_delta.maintenance import commands

pytestmark = pytest.mark.spark


def optimized(spark: Any, path: str, files: int, zorder: bool = False, by: list[str] | None = None) -> tuple[int, int]:
    """OPTIMIZE as maintenance runs it (Z-ordered by ``by``, default the key ``id``): (files it replaced,
    Spark jobs the call started)."""
    config = parse_config(
        {
            "app_id": "lone",
            "storage": {"root": str(Path(path).parent)},
            "tables": [{"name": "db.t", "topics": ["t"], "key": ["id"], "zorder_by": by or []}],
            "maintenance": {"zorder": zorder},
        }
    )
    group = f"optimize-{uuid.uuid4().hex}"
    spark.sparkContext.setJobGroup(group, "OPTIMIZE under test")
    try:
        replaced = commands.optimize(spark, config, config.table("db.t"), path, files)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    return replaced, len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def table(spark: Any, path: Path, files: int, properties: str = "") -> str:
    spark.range(0, 100, 1, files).selectExpr("id", "id % 7 AS k").write.format("delta").save(str(path))
    if properties:
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({properties})")
    return str(path)


def test_a_lone_file_is_not_optimized_two_files_are(spark: Any, tmp_path: Path) -> None:
    assert optimized(spark, table(spark, tmp_path / "one", 1), files=1) == (0, 0)
    replaced, jobs = optimized(spark, table(spark, tmp_path / "two", 2), files=2)
    assert replaced == 2 and jobs > 0
    assert spark.read.format("delta").load(str(tmp_path / "two")).count() == 100


def test_a_lone_file_is_optimized_where_optimize_may_rewrite_it(spark: Any, tmp_path: Path) -> None:
    # Z-order rewrites a lone file; deletion vectors: some Delta versions rewrite a file to drop what its
    # vector deletes. OPTIMIZE runs (its planning starts jobs) in both cases.
    assert optimized(spark, table(spark, tmp_path / "zorder", 1), files=1, zorder=True)[1] > 0
    dv = table(spark, tmp_path / "dv", 1, "'delta.enableDeletionVectors' = 'true'")
    spark.sql(f"DELETE FROM delta.`{dv}` WHERE id < 10")
    assert optimized(spark, dv, files=1)[1] > 0
    # Written here, not by the product: left out of the session's delta-rs sweep, which cannot read it.
    shutil.rmtree(dv)


def test_an_unchanged_table_is_not_zordered_again(spark: Any, tmp_path: Path) -> None:
    path = table(spark, tmp_path / "z", 3)
    target = DeltaTable.forPath(spark, path)

    def version() -> int:
        return int(target.history(1).first()["version"])

    assert optimized(spark, path, files=3, zorder=True)[0] == 3
    zordered = version()
    # Unchanged: only the history is read (one job); no commit.
    assert optimized(spark, path, files=1, zorder=True) == (0, 1)
    # VACUUM's commits change no file, a DELETE only removes rows: still as the Z-order left it.
    target.vacuum()
    target.delete("id = 0")
    assert version() == zordered + 3
    assert optimized(spark, path, files=1, zorder=True) == (0, 1)
    # Another order, or a new file, is Z-ordered again.
    assert optimized(spark, path, files=1, zorder=True, by=["k"])[0] == 1
    assert optimized(spark, path, files=1, zorder=True, by=["k"])[0] == 0
    spark.range(100, 110, 1, 1).selectExpr("id", "id % 7 AS k").write.format("delta").mode("append").save(path)
    assert optimized(spark, path, files=2, zorder=True, by=["k"])[0] == 2
    assert spark.read.format("delta").load(path).count() == 109


def entry(version: int, operation: str, read: int | None = None, zorder: str | None = None) -> Row:
    parameters = {"zOrderBy": zorder} if zorder is not None else {"status": "COMPLETED"}
    return Row(version=version, readVersion=read, operation=operation, operationParameters=parameters)


@pytest.mark.parametrize(
    ("history", "unchanged"),
    [
        ([entry(3, "VACUUM END", 2), entry(2, "VACUUM START", 1), entry(1, "OPTIMIZE", 0, '["id"]')], True),
        # The tombstone purge's DELETE only removes rows.
        ([entry(2, "DELETE", 1), entry(1, "OPTIMIZE", 0, '["id"]')], True),
        # Two commits of one OPTIMIZE run (its batches), both from the version it read.
        ([entry(2, "OPTIMIZE", 0, '["id"]'), entry(1, "OPTIMIZE", 0, '["id"]')], True),
        ([entry(2, "MERGE", 1), entry(1, "OPTIMIZE", 0, '["id"]')], False),
        ([entry(1, "OPTIMIZE", 0, '["k"]')], False),
        ([entry(1, "OPTIMIZE", 0, "[]")], False),
        # A merge committed while the Z-order ran: its files are not Z-ordered.
        ([entry(3, "OPTIMIZE", 1, '["id"]'), entry(2, "MERGE", 1)], False),
        # The version the Z-order read is out of the entries read: unknown.
        ([entry(9, "OPTIMIZE", 5, '["id"]'), entry(8, "VACUUM END", 7)], False),
        ([entry(3, "VACUUM END", 2), entry(2, "VACUUM START", 1)], False),
        ([], False),
    ],
)
def test_unchanged_since_zorder_reads_the_history(history: list[Row], unchanged: bool) -> None:
    assert commands.unchanged_since_zorder(history, ["id"]) is unchanged
