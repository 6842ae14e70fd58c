"""OPTIMIZE is not run for a table of one file (nothing to compact), unless it may rewrite a lone file
(Z-order, deletion vectors); a table of two files is compacted. Whether OPTIMIZE ran is read from the
Spark jobs the call started."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

from cdc_delta.config import parse_config
from cdc_delta.maintenance import commands

pytestmark = pytest.mark.spark


def optimized(spark: Any, path: str, files: int, zorder: bool = False) -> tuple[int, int]:
    """OPTIMIZE as maintenance runs it: (files it replaced, Spark jobs the call started)."""
    config = parse_config(
        {
            "app_id": "lone",
            "storage": {"root": str(Path(path).parent)},
            "tables": [{"name": "db.t", "topics": ["t"], "key": ["id"]}],
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
    spark.range(0, 100, 1, files).write.format("delta").save(str(path))
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
