"""Issue 15's sweep: every Delta table a test run left (replicated tables, dead letters, rejects,
snapshot logs, the changelog), read by delta-rs, by DuckDB (its delta extension) and by Spark: the same
rows, and in DuckDB the column types delta-rs reads from the table's schema.

It runs as its own process (``python -m tests.delta_rs_sweep <basetemp>``) after the test session's
SparkSession has stopped: in the session's JVM, at the end of a 50-minute run, it took 295-474 s for
301 tables where a fresh JVM took 191 s (Delta's caches of every table the run opened), and once ran
that JVM's 1 GB heap out (CI, ``OutOfMemoryError: Java heap space``). Exit status 0 when every table
reads alike, 1 when one differs (each named on stderr). Tables with Delta's typeWidening feature are
the documented opt-in that delta-rs cannot open, and are left out.

Most tables are written by one test and read by no later one, so most of the sweep runs while the tests
do (``--watch``, at the lowest CPU priority: the run is waiting on a process or a broker a quarter of the
time): a table whose files have not changed for one look (half a minute) is read then, and recorded with
what its content depends on (:func:`fingerprint`). At the end, a table whose fingerprint is still the one
recorded alike is not read again; every other one is read as before. A difference found while the tests
ran is not trusted either way: the table is read again at the end."""

from __future__ import annotations

import hashlib
import json
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


def fingerprint(path: Path) -> str:
    """What the content of the Delta table at ``path`` depends on: its newest commit and its files (every
    path and size under it but the log's), which any write changes."""
    commits = sorted(p.name for p in (path / "_delta_log").glob("*.json"))
    files = []
    for folder, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if not (folder == str(path) and d == "_delta_log")]
        files += [
            f"{os.path.relpath(os.path.join(folder, n), path)}:{os.path.getsize(os.path.join(folder, n))}"
            for n in names
        ]
    return hashlib.sha256("\n".join([commits[-1] if commits else "", *sorted(files)]).encode()).hexdigest()


def sweep(spark: object, paths: list[Path]) -> tuple[list[Path], list[str]]:
    """(the typeWidening tables left out, what differs for each table read differently)."""
    found = compare_all(spark, paths)
    opt_in = [p for p, said in zip(paths, found, strict=True) if said == OPT_IN]
    return opt_in, [said for said in found if said is not None and said != OPT_IN]


OPT_IN = "opt-in"


def compare_all(spark: object, paths: list[Path]) -> list[str | None]:
    """Per table: what differs; :data:`OPT_IN` for a typeWidening table; None when read alike."""
    from deltalake import DeltaTable

    from tests.delta_rows import duckdb_connection, spark_and_delta_rs_rows

    duckdb = _DUCKDB

    def compare(path: Path) -> str | None:
        """What differs for the table at ``path``; "opt-in" for a typeWidening table; None when alike."""
        try:
            features = DeltaTable(str(path)).protocol().reader_features or []
        except Exception as exc:  # noqa: BLE001 (a table delta-rs cannot open is the finding)
            return f"{path}: delta-rs cannot open it: {exc}"
        if "typeWidening" in features:
            return OPT_IN
        by_spark, by_delta_rs = spark_and_delta_rs_rows(spark, str(path))  # type: ignore[arg-type]
        if by_spark != by_delta_rs:
            return f"{path}: Spark reads {len(by_spark)} rows, delta-rs {len(by_delta_rs)}, not the same"
        if not hasattr(duckdb, "con"):
            duckdb.con = duckdb_connection()
        return _duckdb_differs(duckdb.con, path, by_spark)

    return list(_POOL.map(compare, paths))


# Most of a table's time is Delta's log replay on the driver and delta-rs's own read, one thread each:
# three tables at a time keep both cores busy (the sweep took 140-176 s one table at a time). The pool's
# threads live as long as the process, each with its DuckDB connection.
_POOL = ThreadPoolExecutor(max_workers=3)
_DUCKDB = threading.local()


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


def sweep_session() -> object:
    from cdc_delta.config import SparkConfig
    from cdc_delta.spark_session import build_session

    return build_session(
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


WATCH_EVERY_S = 30
GROUP = 6
"""Tables read at a time while watching, between looks at the stop file."""


def watch(root: Path, state: Path, stop: Path) -> int:
    """Read the tables under ``root`` whose fingerprint has not changed since the last look, until ``stop``
    exists; each read alike (or an opt-in) appended to ``state`` as JSON lines with its fingerprint."""
    looked: dict[Path, str] = {}
    done: dict[Path, str] = {}
    spark = None
    try:
        while not stop.exists():
            ready = []
            for path in delta_tables(root):
                try:
                    now = fingerprint(path)
                except OSError:  # deleted meanwhile
                    continue
                if looked.get(path) == now and done.get(path) != now:
                    ready.append((path, now))
                looked[path] = now
            for start in range(0, len(ready), GROUP):
                if stop.exists():
                    break
                group = ready[start : start + GROUP]
                spark = spark or sweep_session()
                try:
                    found = compare_all(spark, [path for path, _ in group])
                except Exception:  # noqa: BLE001 (a table written or vacuumed meanwhile: read at the end)
                    continue
                for (path, then), said in zip(group, found, strict=True):
                    if said in (None, OPT_IN) and _fingerprint_or_none(path) == then:
                        done[path] = then
                        with state.open("a") as out:
                            out.write(
                                json.dumps({"path": str(path), "fingerprint": then, "opt_in": said == OPT_IN}) + "\n"
                            )
            deadline = time.monotonic() + WATCH_EVERY_S
            while not stop.exists() and time.monotonic() < deadline:
                time.sleep(1)
    finally:
        if spark is not None:
            spark.stop()  # type: ignore[attr-defined]
    return 0


def _fingerprint_or_none(path: Path) -> str | None:
    try:
        return fingerprint(path)
    except OSError:
        return None


def recorded(state: Path | None) -> dict[Path, tuple[str, bool]]:
    """What ``--watch`` read alike: per table, (its fingerprint then, whether an opt-in)."""
    if state is None or not state.exists():
        return {}
    found = {}
    for line in state.read_text().splitlines():
        if line.strip():
            entry = json.loads(line)
            found[Path(entry["path"])] = (entry["fingerprint"], entry["opt_in"])
    return found


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "--watch":
        return watch(Path(argv[1]), Path(argv[2]), Path(argv[3]))
    if len(argv) not in (1, 3) or not Path(argv[0]).is_dir() or (len(argv) == 3 and argv[1] != "--state"):
        print(
            "usage: python -m tests.delta_rs_sweep <folder holding the test run's Delta tables> [--state FILE]\n"
            "       python -m tests.delta_rs_sweep --watch <folder> <state file> <stop file>",
            file=sys.stderr,
        )
        return 2
    started = time.monotonic()
    paths = delta_tables(Path(argv[0]))
    earlier = recorded(Path(argv[2]) if len(argv) == 3 else None)
    unchanged = [p for p in paths if p in earlier and _fingerprint_or_none(p) == earlier[p][0]]
    left = [p for p in paths if p not in set(unchanged)]
    opt_in: list[Path] = [p for p in unchanged if earlier[p][1]]
    differ: list[str] = []
    if left:
        spark = sweep_session()
        try:
            more, differ = sweep(spark, left)
        finally:
            spark.stop()  # type: ignore[attr-defined]
        opt_in += more
    if differ:
        print("tables delta-rs or DuckDB read differently from Spark:\n" + "\n".join(differ), file=sys.stderr)
        return 1
    print(
        f"delta-rs sweep: {len(paths) - len(opt_in)} Delta tables of this run read alike by Spark, delta-rs and "
        f"DuckDB ({len(opt_in)} with the typeWidening opt-in left out; {len(unchanged)} read while the tests ran, "
        f"unchanged since) in {time.monotonic() - started:.0f} s at the end"
    )
    return 0


if __name__ == "__main__":
    # Without the interpreter's teardown, where a native thread of Arrow's still alive after hundreds of
    # delta-rs scans can abort a sweep that succeeded (exit -6), as cdc_delta.cli.main.run says.
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
