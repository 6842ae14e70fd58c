"""The snapshot log of a run with several tables, one of which fails: written once, after every table
is done, with the tables that were published; the failed one is not in it and keeps no partition. A log
written by a version before ``absorbed_before`` gains the column."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.config import parse_config
from cdc_delta.delta.snapshot_log import LOG_SCHEMA, log_path, published_all
from cdc_delta.delta.tables import create_table, table_schema
from cdc_delta.exceptions import SnapshotError
from cdc_delta.snapshot import hive_publish as hive
from cdc_delta.snapshot.run import run_snapshot
from tests.delta_rows import write_as_merged

DAY = dt.date(2026, 3, 1)
BUSINESS = (("id", "bigint"), ("name", "string"))
PAST_CUTOFF_MS = int(dt.datetime(2026, 3, 2, 1, tzinfo=dt.timezone.utc).timestamp() * 1000)


def test_one_log_commit_for_the_published_tables_when_one_fails(spark, tmp_path: Path) -> None:
    names = ["log.a", "log.b", "log.dup", "log.c"]
    config = parse_config(
        {
            "app_id": "snaplog",
            "storage": {"root": str(tmp_path)},
            "snapshot": {"database": "snaplog", "idle_grace_minutes": 0, "concurrency": 2},
            "tables": [{"name": n, "topics": [f"snaplog.{n}"], "key": ["id"]} for n in names],
        }
    )
    schema = table_schema(BUSINESS)
    values = {
        "id": F.col("id") % 5,  # log.dup: every key five times over
        "name": F.concat(F.lit("n-"), F.col("id").cast("string")),
        C.DELETED: F.lit(False),
        C.SOURCE_TS: F.timestamp_millis(F.lit(PAST_CUTOFF_MS - 86_400_000)),
    }
    frames = {}
    for name in names:
        create_table(spark, config.storage.table_path(config.table(name)), BUSINESS)
        key = values["id"] if name == "log.dup" else F.col("id")
        frames[name] = spark.range(25).select(
            *[{**values, "id": key}.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name) for f in schema.fields]
        )
    write_as_merged(spark, config, frames, {f"snaplog.{n}": {"0": PAST_CUTOFF_MS} for n in names})
    older = LOG_SCHEMA.removesuffix(", absorbed_before timestamp")
    assert older != LOG_SCHEMA
    spark.createDataFrame([], older).write.format("delta").save(log_path(config))  # as an older version made it
    before = spark.sql(f"DESCRIBE HISTORY delta.`{log_path(config)}`").count()

    with pytest.raises(SnapshotError, match="log.dup holds 5 duplicate key"):
        run_snapshot(spark, config, DAY, lambda: None)

    logged = published_all(spark, config)
    assert sorted(logged) == ["log.a", "log.b", "log.c"]
    assert all([r["dt"] for r in logged[n]] == [DAY.isoformat()] and logged[n][0]["rows"] == 25 for n in logged)
    # Without transaction metadata, what a snapshot absorbed is what came before its cut-off.
    assert all(logged[n][0]["absorbed_before"] == logged[n][0]["cutoff"] for n in logged)
    history = spark.sql(f"DESCRIBE HISTORY delta.`{log_path(config)}`").where("operation = 'WRITE'")
    assert history.count() - before == 1  # one commit for the three tables
    for name in ("log.a", "log.b", "log.c"):
        table = hive.hive_table(config, config.table(name))
        assert spark.table(table).where(F.col(hive.PARTITION_COLUMN) == DAY.isoformat()).count() == 25
    dup = hive.hive_table(config, config.table("log.dup"))
    assert not spark.catalog.tableExists(dup) or spark.table(dup).count() == 0
