"""Benchmark: the fixed cost of a small Delta MERGE and of a small append, per Delta setting and per
engine pair (issue 26, step 6: newest engines and a cheaper MERGE).

A merge round costs one MERGE per table whatever its size, and a landing one append: these fixed costs
bound how many tables the merger keeps up with. For each engine pair and each setting, one Spark
session (local[2], the project's settings: :func:`cdc_delta.spark_session.session_conf`) makes a
10,000-row table, then, round after round and setting after setting in turn (so that the machine's
drift falls on all alike):
  merge  - 100 rows (50 updates of existing keys, 50 new keys) with a guarded MERGE of the stream's
           shape (an update only where the change is newer), SQL;
  append - the same 100 rows appended to a table of their own.
Per setting: the median wall time and the median CPU of the JVM (user + system, from /proc) of a
MERGE and of an append, after two rounds of warm-up; ratios against the project's settings on this
project's engines, measured in the same run. Results go to bench/results/merge_cost.json. Not a test:
nothing here fails on a time.

Engines: ``current`` is this checkout's (``.venv``, ``.jars/spark``); ``newest`` is the newest pair
pip and Maven Central serve together, pyspark 4.2.0 with io.delta:delta-spark_2.13:4.4.0 (built for
Spark 4.2.0), in a venv of its own under ``.cache/bench-engines`` made on first use (a pip download
of about 450 MB; its jars come from Maven Central through Spark's resolver).

    python bench/merge_cost.py                          # current engines, every setting
    python bench/merge_cost.py --engines current,newest --rounds 9
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results" / "merge_cost.json"
ENGINES_DIR = ROOT / ".cache" / "bench-engines"
NEWEST = {"pyspark": "4.2.0", "packages": "io.delta:delta-spark_2.13:4.4.0"}

SETTINGS: dict[str, dict[str, Any]] = {
    "project": {"conf": {}, "properties": {}},
    "no_commit_stats": {"conf": {"spark.databricks.delta.commitStats.collect": "false"}, "properties": {}},
    "deletion_vectors": {"conf": {}, "properties": {"delta.enableDeletionVectors": "true"}},
    "snapshot_partitions_50": {"conf": {"spark.databricks.delta.snapshotPartitions": "50"}, "properties": {}},
}
"""What each setting changes from the project's: session settings around each operation, table
properties at creation. ``snapshot_partitions_50`` is Delta's default, which the project lowers."""

TARGET_ROWS = 10_000
CHANGE_ROWS = 100
COLUMNS = "id BIGINT, seq BIGINT, name STRING, amount DECIMAL(10,2), status STRING, updated_at TIMESTAMP"


# --- the child: one engine pair, in its own interpreter ------------------------------------------------
# It imports pyspark only: the newest engines' venv has nothing else (hence no cdc_delta helpers here).


def _jvm_cpu_s(spark: Any) -> float:
    """User + system CPU seconds of the JVM so far (local mode: the driver holds the executors)."""
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rows(spark: Any, first_id: int, count: int, seq: int) -> Any:
    return spark.sql(
        f"SELECT id, CAST({seq} AS BIGINT) AS seq, concat('name ', id) AS name, CAST(id % 1000 AS DECIMAL(10,2)) "
        f"AS amount, IF(id % 2 = 0, 'open', 'paid') AS status, TIMESTAMP'2026-01-01 00:00:00' + make_interval(0, 0, "
        f"0, 0, 0, 0, id) AS updated_at FROM range({first_id}, {first_id + count})"
    )


def _timed(spark: Any, conf: dict[str, str], action: Any) -> tuple[float, float]:
    from cdc_delta.spark_session import session_confs

    with session_confs(spark, conf):
        cpu, wall = _jvm_cpu_s(spark), time.perf_counter()
        action()
        return time.perf_counter() - wall, _jvm_cpu_s(spark) - cpu


def child(args: argparse.Namespace) -> None:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("merge-cost")
    for k, v in json.loads(args.conf).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    settings: dict[str, dict[str, Any]] = json.loads(args.settings)
    folder = Path(args.folder)
    for name, setting in settings.items():
        props = ", ".join(f"'{k}' = '{v}'" for k, v in setting["properties"].items())
        tblprops = f" TBLPROPERTIES ({props})" if props else ""
        for kind in ("target", "appended"):
            spark.sql(f"CREATE TABLE delta.`{folder / name / kind}` ({COLUMNS}) USING delta{tblprops}")
        _rows(spark, 0, TARGET_ROWS, 0).write.format("delta").mode("append").save(str(folder / name / "target"))
    samples: dict[str, dict[str, list[float]]] = {n: {} for n in settings}
    next_id = TARGET_ROWS
    for r in range(args.rounds + 2):
        for name, setting in settings.items():
            target, appended = folder / name / "target", folder / name / "appended"
            # 50 updates of existing keys, 50 new keys; newer than what the table holds.
            changes = _rows(spark, next_id - CHANGE_ROWS // 2, CHANGE_ROWS, r + 1)
            changes.createOrReplaceTempView("changes")
            merge = (
                f"MERGE INTO delta.`{target}` t USING changes s ON t.id = s.id "
                "WHEN MATCHED AND s.seq > t.seq THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
            )
            wall, cpu = _timed(spark, setting["conf"], lambda q=merge: spark.sql(q).collect())

            def append(c: Any = changes, p: Path = appended) -> None:
                c.write.format("delta").mode("append").save(str(p))

            app_wall, app_cpu = _timed(spark, setting["conf"], append)
            if r >= 2:  # two rounds of warm-up
                measured = {"merge_s": wall, "merge_cpu_s": cpu, "append_s": app_wall, "append_cpu_s": app_cpu}
                for key, value in measured.items():
                    samples[name].setdefault(key, []).append(value)
        next_id += CHANGE_ROWS // 2
    for name in settings:  # every MERGE happened: the table holds what it should
        count = spark.read.format("delta").load(str(folder / name / "target")).count()
        assert count == next_id, (name, count, next_id)
    spark.stop()
    print(json.dumps({"spark": spark.version, "samples": samples}))


# --- the parent: engines, settings, results ------------------------------------------------------------


def _newest_python() -> Path:
    venv = ENGINES_DIR / f"pyspark-{NEWEST['pyspark']}"
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"making {venv} (pyspark {NEWEST['pyspark']}: a download of about 450 MB)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", f"pyspark=={NEWEST['pyspark']}"], check=True)
    return python


def engine_run(engine: str, settings: dict[str, dict[str, Any]], rounds: int) -> dict[str, Any]:
    from cdc_delta.config import SparkConfig
    from cdc_delta.spark_session import session_conf

    conf = session_conf(SparkConfig(master="local[2]", shuffle_partitions=2, conf={"spark.ui.enabled": "false"}))
    if engine == "current":
        python = Path(sys.executable)
        label = "this checkout's (pyproject.toml)"
    else:
        python = _newest_python()
        conf.pop("spark.jars", None)
        conf["spark.jars.packages"] = NEWEST["packages"]
        label = f"pyspark {NEWEST['pyspark']} + {NEWEST['packages']}"
    with tempfile.TemporaryDirectory(prefix="merge-cost-") as folder:
        done = subprocess.run(
            [str(python), __file__, "--child", "--conf", json.dumps(conf), "--settings", json.dumps(settings)]
            + ["--folder", folder, "--rounds", str(rounds)],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
    if done.returncode != 0:
        raise SystemExit(f"engine {engine} failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    medians = {
        name: {key: round(statistics.median(values), 3) for key, values in sample.items()}
        for name, sample in found["samples"].items()
    }
    return {"engines": label, "spark": found["spark"], "medians": medians, "samples": found["samples"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engines", default="current", help="comma-separated: current, newest (default: current)")
    parser.add_argument("--settings", default=",".join(SETTINGS), help=f"comma-separated of {', '.join(SETTINGS)}")
    parser.add_argument("--rounds", type=int, default=7, help="measured rounds per setting, after 2 of warm-up")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--conf", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # the parent passes the settings as JSON
        child(args)
        return
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    names = [n.strip() for n in args.settings.split(",") if n.strip()]
    unknown = [e for e in engines if e not in ("current", "newest")] + [n for n in names if n not in SETTINGS]
    if unknown:
        parser.error(f"unknown engine or setting: {', '.join(unknown)}")
    if "project" not in names:
        parser.error("--settings must include project (the baseline of the ratios)")
    settings = {name: SETTINGS[name] for name in names}
    results: dict[str, Any] = {}
    for engine in engines:
        print(f"engine {engine}: {len(settings)} settings x {args.rounds} rounds", flush=True)
        results[engine] = engine_run(engine, settings, args.rounds)
    base = results[engines[0]]["medians"]["project"]  # the first engine's (current, unless left out)
    table = []
    for engine, found in results.items():
        for name, m in found["medians"].items():
            row = {"engine": engine, "spark": found["spark"], "setting": name, **m}
            row["merge_ratio"] = round(m["merge_s"] / base["merge_s"], 2)
            row["merge_cpu_ratio"] = round(m["merge_cpu_s"] / base["merge_cpu_s"], 2)
            row["append_ratio"] = round(m["append_s"] / base["append_s"], 2)
            table.append(row)
            print(
                f"{engine:8} {name:24} MERGE {m['merge_s']:.2f} s ({m['merge_cpu_s']:.2f} CPU-s, x{row['merge_ratio']})"
                f"  append {m['append_s']:.2f} s ({m['append_cpu_s']:.2f} CPU-s, x{row['append_ratio']})"
            )
    write_results(RESULTS, "merge_cost", table, engines={e: r["engines"] for e, r in results.items()}, raw=results)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    from results_file import write_results

    main()
