"""The snapshot's checks beside its own counts: the Delta side's keys, and the source's row count."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.config import TableConfig
from cdc_delta.exceptions import SnapshotError


def source_count(spark: SparkSession, table: TableConfig, day: str) -> int | None:
    """The source's row count from the file the export job wrote, or over JDBC (None: not configured)."""
    if table.source_count_path:
        path = table.source_count_path.replace("{date}", day)
        try:
            return int(" ".join(r["value"] for r in spark.read.text(path).collect()).strip())
        except Exception as exc:  # a missing file or a number that is not one
            raise SnapshotError(
                f"source count file {path} of {table.name} is missing or does not hold one integer: "
                f"{str(exc).splitlines()[0] if str(exc) else exc!r}"
            ) from None
    jdbc = table.source_count_jdbc
    if jdbc is None:
        return None
    reader = spark.read.format("jdbc").option("url", jdbc.url).option("query", jdbc.query)
    reader = reader.option("driver", jdbc.driver)
    if jdbc.url.startswith(("jdbc:mariadb:", "jdbc:mysql:")):
        # Spark has no dialect for jdbc:mariadb and quotes column names with double quotes, which
        # MariaDB/MySQL read as strings unless ANSI_QUOTES is on.
        reader = reader.option("sessionInitStatement", "SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')")
    if jdbc.user:
        reader = reader.option("user", jdbc.user)
    password = jdbc.password()
    if password is not None:
        reader = reader.option("password", password)
    try:
        row = reader.load().first()
        return int(row[0]) if row is not None and row[0] is not None else 0
    except Exception as exc:  # the JVM's SQL errors carry no Python type
        first = str(exc).splitlines()[0] if str(exc) else repr(exc)
        raise SnapshotError(
            f"counting {table.name} at the source over {jdbc.url} ({jdbc.query!r}) failed: {first}. "
            "Check source_count_jdbc (URL, user, password, the query) and that the database is reachable"
        ) from None


def key_counts(delta: DataFrame | None, key: list[str]) -> tuple[int, int]:
    """Keys the Delta side holds, and how many of them occur more than once: one aggregate."""
    if delta is None:
        return 0, 0
    per_key = delta.groupBy(*[C.quote(k) for k in key]).count()
    row = per_key.agg(F.count(F.lit(1)).alias("keys"), F.count(F.when(F.col("count") > 1, 1)).alias("repeated")).first()
    return (int(row["keys"]), int(row["repeated"])) if row is not None else (0, 0)
