"""``<hive table>_current``: the latest snapshot's keys that Delta does not hold, plus Delta's live rows
(the full table, near real time, in Spark SQL)."""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from cdc_delta import columns as C
from cdc_delta.config import AppConfig, TableConfig


def create_current_view(
    spark: SparkSession, config: AppConfig, table: TableConfig, name: str, columns: list[str], latest: str
) -> None:
    """Create or replace the view over Hive table ``name`` (partition ``latest``) and the Delta table."""
    path = config.storage.table_path(table)
    snapshot_cols = ", ".join(f"s.{C.quote(c)}" for c in columns)
    if not DeltaTable.isDeltaTable(spark, path):
        body = f"SELECT {snapshot_cols} FROM {name} s WHERE s.dt = '{latest}'"
    else:
        delta_names = {c.lower() for c in spark.read.format("delta").load(path).columns}
        delta_cols = ", ".join(
            f"CAST(d.{C.quote(c)} AS {t})" if c.lower() in delta_names else f"CAST(NULL AS {t})"
            for c, t in ((f.name, f.dataType.simpleString()) for f in spark.table(name).schema.fields)
            if c in columns
        )
        match = " AND ".join(f"k.{C.quote(k)} = s.{C.quote(k)}" for k in table.key)
        source = C.delta_path_identifier(path)
        body = (
            f"SELECT {delta_cols} FROM {source} d WHERE NOT d.{C.DELETED}\n"
            f"UNION ALL\nSELECT {snapshot_cols} FROM {name} s WHERE s.dt = '{latest}'\n"
            f"  AND NOT EXISTS (SELECT 1 FROM {source} k WHERE {match})"
        )
    spark.sql(f"CREATE OR REPLACE VIEW {name}_current AS\n{body}")
