"""Issue 15's sweep: every Delta table a test run left (replicated tables, dead letters, rejects,
snapshot logs, the changelog), read by delta-rs, by DuckDB (its delta extension) and by Spark: the same
rows, and in DuckDB the column types delta-rs reads from the table's schema.

It runs as its own process (``python -m tests.delta_rs_sweep <basetemp>``) after the test session's
SparkSession has stopped: in the session's JVM, at the end of a 50-minute run, it took 295-474 s for
301 tables where a fresh JVM took 191 s (Delta's caches of every table the run opened), and once ran
that JVM's 1 GB heap out (CI, ``OutOfMemoryError: Java heap space``). Exit status 0 when every table
reads alike, 1 when one differs (each named on stderr). Tables with Delta's typeWidening feature are
the documented opt-in that delta-rs cannot open, and are left out."""

from __future__ import annotations

import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# Its heap: the run's tables are read three at a time, a few thousand rows each.
DRIVER_MEMORY = "2g"


def delta_tables(root: Path) -> list[Path]:
    """The folders under ``root`` that hold a Delta table with at least one commit."""
    return sorted({log.parent for log in root.rglob("_delta_log") if list(log.glob("*.json"))})


def sweep(spark: object, paths: list[Path]) -> tuple[list[Path], list[str]]:
    """(the typeWidening tables left out, what differs for each table read differently)."""
    from deltalake import DeltaTable

    from tests.delta_rows import duckdb_connection, spark_and_delta_rs_rows

    duckdb = threading.local()  # one DuckDB connection per thread of the pool

    def compare(path: Path) -> str | None:
        """What differs for the table at ``path``; "opt-in" for a typeWidening table; None when alike."""
        try:
            features = DeltaTable(str(path)).protocol().reader_features or []
        except Exception as exc:  # noqa: BLE001 (a table delta-rs cannot open is the finding)
            return f"{path}: delta-rs cannot open it: {exc}"
        if "typeWidening" in features:
            return "opt-in"
        by_spark, by_delta_rs = spark_and_delta_rs_rows(spark, str(path))  # type: ignore[arg-type]
        if by_spark != by_delta_rs:
            return f"{path}: Spark reads {len(by_spark)} rows, delta-rs {len(by_delta_rs)}, not the same"
        if not hasattr(duckdb, "con"):
            duckdb.con = duckdb_connection()
        return _duckdb_differs(duckdb.con, path, by_spark)

    # Most of a table's time is Delta's log replay on the driver and delta-rs's own read, one thread each:
    # three tables at a time keep both cores busy (the sweep took 140-176 s one table at a time).
    with ThreadPoolExecutor(max_workers=3) as pool:
        found = list(pool.map(compare, paths))
    opt_in = [p for p, said in zip(paths, found, strict=True) if said == "opt-in"]
    return opt_in, [said for said in found if said is not None and said != "opt-in"]


def _duckdb_differs(con: object, path: Path, by_spark: list[tuple[object, ...]]) -> str | None:
    """What DuckDB (its delta extension, through ``con``) reads differently from Spark's rows and
    delta-rs's column types at ``path``; None when alike."""
    from deltalake import DeltaTable

    from tests.delta_rows import duckdb_table, same_arrow_types, sorted_arrow_rows

    try:
        read = duckdb_table(con, str(path))
    except Exception as exc:  # noqa: BLE001 (a table DuckDB cannot read is the finding)
        return f"{path}: DuckDB cannot read it: {str(exc).splitlines()[0]}"
    expected = DeltaTable(str(path)).to_pyarrow_dataset().schema
    if read.schema.names != expected.names:
        return f"{path}: DuckDB reads the columns {read.schema.names}, the table has {expected.names}"
    for got, want in zip(read.schema, expected, strict=True):
        if not same_arrow_types(got.type, want.type):
            return f"{path}: DuckDB reads column {want.name} as {got.type}, the table holds {want.type}"
    by_duckdb = sorted_arrow_rows(read)
    if by_duckdb != by_spark:
        return f"{path}: Spark reads {len(by_spark)} rows, DuckDB {len(by_duckdb)}, not the same"
    return None


def main(argv: list[str]) -> int:
    from cdc_delta.config import SparkConfig
    from cdc_delta.spark_session import build_session

    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python -m tests.delta_rs_sweep <folder holding the test run's Delta tables>", file=sys.stderr)
        return 2
    started = time.monotonic()
    paths = delta_tables(Path(argv[0]))
    spark = build_session(
        SparkConfig(
            master="local[2]",
            shuffle_partitions=2,
            app_name="cdc-delta-tests-sweep",
            # Adaptive execution only plans: a table's read here is one scan, and without it a cold table
            # read took 0.55 s, not 0.69 s.
            conf={
                "spark.ui.enabled": "false",
                "spark.driver.memory": DRIVER_MEMORY,
                "spark.sql.adaptive.enabled": "false",
            },
        )
    )
    try:
        opt_in, differ = sweep(spark, paths)
    finally:
        spark.stop()
    if differ:
        print("tables delta-rs or DuckDB read differently from Spark:\n" + "\n".join(differ), file=sys.stderr)
        return 1
    print(
        f"delta-rs sweep: {len(paths) - len(opt_in)} Delta tables of this run read alike by Spark, delta-rs and "
        f"DuckDB ({len(opt_in)} with the typeWidening opt-in left out) in {time.monotonic() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    # Without the interpreter's teardown, where a native thread of Arrow's still alive after hundreds of
    # delta-rs scans can abort a sweep that succeeded (exit -6), as cdc_delta.cli.main.run says.
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
