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


def entry(
    version: int,
    operation: str,
    read: int | None = None,
    zorder: str | None = None,
    added: int = 0,
    removed: int = 0,
    where: str = "[]",
    vectors: int = 0,
) -> Row:
    """A history entry as Delta writes it (``added``/``removed``: its files; ``vectors``: deletion vectors)."""
    parameters = {"zOrderBy": zorder, "predicate": where} if zorder is not None else {"status": "COMPLETED"}
    metrics = {"numAddedFiles": str(added), "numRemovedFiles": str(removed), "numDeletionVectorsAdded": str(vectors)}
    return Row(
        version=version, readVersion=read, operation=operation, operationParameters=parameters, operationMetrics=metrics
    )


ZORDERED = entry(1, "OPTIMIZE", 0, '["id"]', added=2, removed=5)
"""Version 1: the table (5 files) Z-ordered by id into 2 files."""


@pytest.mark.parametrize(
    ("history", "files", "unchanged"),
    [
        ([entry(3, "VACUUM END", 2), entry(2, "VACUUM START", 1), ZORDERED], 2, True),
        # The tombstone purge's DELETE only removes rows (here: one file rewritten, one dropped).
        ([entry(2, "DELETE", 1, added=1, removed=2), ZORDERED], 1, True),
        # A DELETE that wrote a deletion vector left the rows in the file: the Z-order drops them.
        ([entry(2, "DELETE", 1, vectors=1), ZORDERED], 2, False),
        # Two commits of one OPTIMIZE run (its batches), both from the version it read.
        ([entry(2, "OPTIMIZE", 0, '["id"]', added=1, removed=3), ZORDERED], 3, True),
        ([entry(2, "MERGE", 1, added=1), ZORDERED], 3, False),
        ([entry(1, "OPTIMIZE", 0, '["k"]', added=2)], 2, False),
        ([entry(1, "OPTIMIZE", 0, "[]", added=2)], 2, False),
        # Z-ordered where a predicate held only: the rest of the table was not.
        ([entry(1, "OPTIMIZE", 0, '["id"]', added=2, where='["(k = 1)"]')], 2, False),
        # A merge committed while the Z-order ran: its files are not Z-ordered.
        ([entry(3, "OPTIMIZE", 1, '["id"]', added=2), entry(2, "MERGE", 1, added=1)], 3, False),
        # ... nor where the Z-order's commit was retried from a newer version: the file count shows it.
        ([entry(3, "OPTIMIZE", 2, '["id"]', added=2, removed=5), entry(2, "MERGE", 1, added=1)], 3, False),
        # The version the Z-order read is out of the entries read: unknown.
        ([entry(9, "OPTIMIZE", 5, '["id"]', added=2), entry(8, "VACUUM END", 7)], 2, False),
        ([entry(3, "VACUUM END", 2), entry(2, "VACUUM START", 1)], 2, False),
        ([], 0, False),
    ],
)
def test_unchanged_since_zorder_reads_the_history(history: list[Row], files: int, unchanged: bool) -> None:
    assert commands.unchanged_since_zorder(history, ["id"], files) is unchanged
