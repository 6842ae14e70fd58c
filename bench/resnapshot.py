"""Benchmark: ``cdc-delta resnapshot`` of a large table while the source is written, beside the stream.

Measures how long a re-snapshot of a --rows table (default 1M) takes until the rows it read are merged while
a writer changes the table --rate times a second, and the stream's batch times beside it as a ratio to the
same writer's without a re-snapshot, measured first in the same run:

1. MariaDB, Kafka and Kafka Connect with Debezium (scripts/mariadb.sh, kafka.sh, connect.sh, as
   tests/services.py starts them) on free ports in a temporary folder; bench_rs.orders with --rows rows,
   the signal table bench_rs.debezium_signal (INSERT, DELETE granted to cdc) and bench_rs.marker; the
   connector of connectors/mariadb-inventory.yaml with the repair settings (snapshot.mode initial,
   incremental.snapshot.chunk.size --chunk), waited for until its initial snapshot is in Kafka.
2. ``cdc-delta stream`` as a process (trigger 2 s, merge.max_delay_seconds 10), waited for until the lake's
   bench_rs.orders holds --rows live rows (delta-rs).
3. Without: a writer thread makes --rate single-row writes a second (4 updates to 1 insert) for --duration
   seconds; the stream's batch lines and merge rounds meanwhile are the baseline.
4. Beside: the same writer, and ``cdc-delta resnapshot --table bench_rs.orders`` as a process: its wall time
   until it exits (once the rows read are merged), its exit code, when it sent the signal and when Debezium
   reported the table read, the rows read (its last line); the stream's lines meanwhile.
5. bench/results/resnapshot.json: batch time, source lag and merge round p50/p95 without and beside, and
   the ratios beside / without; a short table printed; the stream and the services stopped.

Not a test: nothing fails on a time. Needs ``make setup``. Kafka holds each row read as JSON with its schema
(about 1.5 KB): a few GB at 1M rows, in the run folder, removed after a run that succeeded (--keep keeps it,
with stream.log, resnapshot.log and the services' logs; a failed run's is kept).

    python bench/resnapshot.py                                 # 1M rows, 100 writes/s, 120 s baseline
    python bench/resnapshot.py --rows 100000 --duration 60     # a quick look
"""

from __future__ import annotations

import argparse
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import yaml
from deltalake.exceptions import DeltaError
from results_file import write_results

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests' helpers
from cdc_delta import columns as C  # noqa: E402
from cdc_delta.config import load_config  # noqa: E402
from cdc_delta.delta.delta_rs import open_table, read  # noqa: E402
from tests.e2e.pipeline import Pipeline  # noqa: E402
from tests.services import ConnectWorker, MariaDB, NativeKafka, StreamProcess, free_port_pair  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "resnapshot.json"
DB, TABLE = "bench_rs", "bench_rs.orders"
TRIGGER_S, MAX_DELAY_S = 2, 10
BATCH_LINE = re.compile(r"stream\.query: batch \d+: (\d+) in, \d+ landed.*? in ([\d.]+)s(?:, source lag (-?[\d.]+)s)?")
ROUND_LINE = re.compile(r"merge through landing \d+: \d+ tables, (\d+) changes.*\] in ([\d.]+)s")
ASKED = re.compile(r"resnapshot: \w+ snapshot of .* asked of ")
SCANNED = re.compile(r"resnapshot: \S+: read \d+ rows \(")
REPAIRED = re.compile(r"repaired \S+: (\d+) rows read from ")


def mariadb_script(server: MariaDB, command: str) -> None:
    env = {**os.environ, "MARIADB_DIR": str(server.folder)}
    subprocess.run([str(ROOT / "scripts" / "mariadb.sh"), command, str(server.port)], env=env, check=command == "start")


def services(stack: ExitStack, folder: Path) -> tuple[MariaDB, str, ConnectWorker]:
    """MariaDB, Kafka and Connect started on free ports, each stopped when ``stack`` closes."""
    mariadb = MariaDB(free_port_pair(), folder / "mariadb")
    mariadb_script(mariadb, "start")
    stack.callback(mariadb_script, mariadb, "stop")
    kafka = NativeKafka(free_port_pair(), folder / "kafka")
    kafka.start()
    stack.callback(kafka.stop)
    connect = ConnectWorker(free_port_pair(), folder / "connect", kafka.bootstrap)
    connect.start()
    stack.callback(connect.stop)
    return mariadb, kafka.bootstrap, connect


def create_source(pipe: Pipeline, rows: int, step: int = 100_000) -> None:
    fill = "seq, (seq % 100000) / 100, ELT(seq % 3 + 1, 'new', 'paid', 'shipped'), CONCAT('order ', seq)"
    pipe.sql(
        [
            f"CREATE DATABASE {DB}",
            f"CREATE TABLE {TABLE} (id INT PRIMARY KEY, amount DECIMAL(10,2), status VARCHAR(20), note VARCHAR(100))",
            f"CREATE TABLE {DB}.debezium_signal (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL,"
            " data VARCHAR(2048))",
            f"GRANT INSERT, DELETE ON {DB}.debezium_signal TO 'cdc'@'%'",
            f"CREATE TABLE {DB}.marker (id INT PRIMARY KEY)",
            *(
                f"INSERT INTO {TABLE} SELECT {fill} FROM {DB}.seq_{n}_to_{min(n + step - 1, rows)}"
                for n in range(1, rows + 1, step)
            ),
        ]
    )


def write_config(pipe: Pipeline, timeout: float, per_trigger: int) -> Path:
    data: dict[str, Any] = {
        "app_id": "bench-resnapshot",
        "kafka": {
            "bootstrap_servers": pipe.kafka,
            "topic_pattern": rf"^{pipe.prefix}(\..*)?$",
            "starting_offsets": "earliest",
            "max_offsets_per_trigger": per_trigger,
        },
        "spark": {"master": "local[2]", "shuffle_partitions": 2, "conf": {"spark.ui.enabled": "false"}},
        "storage": {"root": str(pipe.folder / "lake")},
        "trigger_interval": f"{TRIGGER_S} seconds",
        "merge": {"max_delay_seconds": MAX_DELAY_S},
        "connect": {"url": pipe.connect.url},
        "source": {"port": pipe.mariadb.port, "user": "cdc", "password_file": str(pipe.source_password())},
        "repair": {"wait_seconds": timeout, "settle_seconds": 3},
        "tables": [{"name": "{db}.{table}", "topic_pattern": rf"{pipe.prefix}\.{DB}\.[^.]+"}],
    }
    path = pipe.folder / "cdc.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def live_rows(config: Path) -> int:
    """The lake's live orders (not count_rows with a filter: its pruning is wrong for booleans, delta/status.py)."""
    cfg = load_config(config, env={})
    try:
        table = open_table(cfg, cfg.table_path(TABLE))
        if table is None:
            return 0
        flags = read(table.to_pyarrow_dataset(), [C.DELETED]).column(0)
    except (OSError, DeltaError):  # a commit beside the read: read again later
        return 0
    return len(flags) - int(pc.sum(flags.cast("int64")).as_py() or 0)


def wait_until(done: Callable[[], bool], stream: StreamProcess, timeout: float, what: str, poll: float = 5) -> None:
    """Wait for ``done`` while the stream runs (its log's tail when it exits)."""
    deadline = time.monotonic() + timeout
    while not done():
        assert stream.proc is not None
        if stream.proc.poll() is not None:
            tail = stream.log.read_text(errors="replace")[-3000:]
            raise SystemExit(f"the stream exited ({stream.proc.returncode}) waiting for {what}:\n{tail}")
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:g}s waiting for {what}; see {stream.log}")
        time.sleep(poll)


def stop_stream(stream: StreamProcess) -> None:
    if stream.proc is not None and stream.proc.poll() is None:
        stream.proc.terminate()
        try:
            stream.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            stream.kill9()


class Writer:
    """``rate`` single-row writes a second to the source's orders (4 updates to 1 insert), by the clock."""

    def __init__(self, mariadb: MariaDB, rows: int, rate: float, next_id: int) -> None:
        self.mariadb, self.rows, self.rate, self.next_id = mariadb, rows, rate, next_id
        self.writes, self.started, self.seconds = 0, 0.0, 0.0
        self.error: BaseException | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        rng = random.Random(self.next_id)
        try:
            conn = self.mariadb.connect()
            with conn.cursor() as cur:
                due = time.monotonic()
                while not self.stop.is_set():
                    if rng.random() < 0.8:
                        key = rng.randint(1, self.rows)
                        cur.execute(f"UPDATE {TABLE} SET amount = amount + 1, status = 'paid' WHERE id = {key}")
                    else:
                        self.next_id += 1
                        cur.execute(f"INSERT INTO {TABLE} VALUES ({self.next_id}, 9.99, 'new', 'written meanwhile')")
                    self.writes += 1
                    due += 1 / self.rate
                    self.stop.wait(max(0.0, due - time.monotonic()))
            conn.close()
        except BaseException as exc:  # noqa: B036 (reported by __exit__)
            self.error = exc

    def __enter__(self) -> Writer:
        self.started = time.monotonic()
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=30)
        self.seconds = time.monotonic() - self.started
        if self.error is not None:
            raise SystemExit(f"the writer failed: {self.error!r}")

    def summary(self) -> dict[str, Any]:
        return {"writes": self.writes, "seconds": round(self.seconds, 1), "rate": round(self.writes / self.seconds, 1)}


def pct(values: list[float], q: int) -> float | None:
    """The nearest-rank ``q``-th percentile; None for no values."""
    ordered = sorted(values)
    return round(ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)], 2) if ordered else None


def log_end(stream: StreamProcess) -> int:
    return stream.log.stat().st_size if stream.log.exists() else 0


def stream_stats(log: Path, start: int, end: int) -> dict[str, Any]:
    """The stream's batch lines and merge rounds logged between byte offsets ``start`` and ``end``."""
    with log.open("rb") as f:
        f.seek(start)
        lines = f.read(end - start).decode(errors="replace").splitlines()
    batches = [m for m in map(BATCH_LINE.search, lines) if m]
    rounds = [m for m in map(ROUND_LINE.search, lines) if m]
    out: dict[str, Any] = {
        "batches": len(batches),
        "events_in": sum(int(m.group(1)) for m in batches),
        "merge_rounds": len(rounds),
        "merged_changes": sum(int(m.group(1)) for m in rounds),
    }
    for name, values in (
        ("batch_s", [float(m.group(2)) for m in batches]),
        ("source_lag_s", [float(m.group(3)) for m in batches if m.group(3)]),
        ("merge_s", [float(m.group(2)) for m in rounds]),
    ):
        out.update(
            {f"{name}_p50": pct(values, 50), f"{name}_p95": pct(values, 95), f"{name}_max": max(values, default=None)}
        )
    return out


def resnapshot(config: Path, log: Path) -> dict[str, Any]:
    """``cdc-delta resnapshot --table bench_rs.orders`` as a process, its lines stamped as they come."""
    command = [sys.executable, "-m", "cdc_delta.cli", "resnapshot", "--config", str(config), "--table", TABLE]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env)
    asked_s: float | None = None
    read_s: float | None = None
    rows_read: int | None = None
    assert proc.stdout is not None
    with log.open("w") as out:
        for line in proc.stdout:
            out.write(line)
            now = round(time.monotonic() - started, 1)
            asked_s = now if asked_s is None and ASKED.search(line) else asked_s
            read_s = now if read_s is None and SCANNED.search(line) else read_s
            repaired = REPAIRED.search(line)
            rows_read = int(repaired.group(1)) if repaired else rows_read
    code = proc.wait()
    seconds = time.monotonic() - started
    return {
        "exit_code": code,
        "seconds_until_merged": round(seconds, 1),
        "signal_sent_after_s": asked_s,
        "table_read_after_s": read_s,
        "rows_read": rows_read,
        "rows_per_s": round(rows_read / seconds) if rows_read else None,
    }


def run(args: argparse.Namespace, folder: Path, stack: ExitStack) -> dict[str, Any]:
    mariadb, bootstrap, connect = services(stack, folder)
    settings = {
        "signal.data.collection": f"{DB}.debezium_signal",
        "database.include.list": DB,
        "snapshot.mode": "initial",
        "incremental.snapshot.chunk.size": str(args.chunk),
    }
    pipe = Pipeline(DB, folder, bootstrap, mariadb, connect, server_id=5490, extra_connector_settings=settings)
    clock = time.monotonic()
    create_source(pipe, args.rows)
    print(f"source: {args.rows:,} rows in {time.monotonic() - clock:.0f}s", flush=True)
    clock = time.monotonic()
    pipe.register()
    pipe.mark(1, timeout=args.timeout)
    initial_snapshot_s = round(time.monotonic() - clock, 1)
    print(f"the connector's initial snapshot is in Kafka after {initial_snapshot_s}s", flush=True)

    config = write_config(pipe, args.timeout, args.max_per_trigger)
    stream = StreamProcess(config, folder / "stream.log")
    clock = time.monotonic()
    stream.start()
    stack.callback(stop_stream, stream)
    wait_until(lambda: live_rows(config) >= args.rows, stream, args.timeout, f"{args.rows:,} rows in the lake")
    catch_up_s = round(time.monotonic() - clock, 1)
    print(f"the stream caught up after {catch_up_s}s; the baseline for {args.duration}s", flush=True)
    time.sleep(MAX_DELAY_S + 2 * TRIGGER_S)  # the merger's last rounds of the initial load

    start = log_end(stream)
    with Writer(mariadb, args.rows, args.rate, args.rows) as baseline:
        until = time.monotonic() + args.duration
        wait_until(lambda: time.monotonic() >= until, stream, args.duration + 60, "the baseline's end", poll=0.5)
    without = {**stream_stats(stream.log, start, log_end(stream)), **baseline.summary()}

    print(f"re-snapshot of {TABLE} beside {args.rate:g} writes/s", flush=True)
    start = log_end(stream)
    with Writer(mariadb, args.rows, args.rate, baseline.next_id) as writer:
        repaired = resnapshot(config, folder / "resnapshot.log")
    beside = {**stream_stats(stream.log, start, log_end(stream)), **writer.summary()}
    assert stream.proc is not None
    if stream.proc.poll() is not None:
        raise SystemExit(f"the stream exited ({stream.proc.returncode}) during the re-snapshot; see {stream.log}")
    if repaired["exit_code"] != 0:
        print(f"resnapshot exited {repaired['exit_code']}; see {folder / 'resnapshot.log'}", flush=True)
    ratios: dict[str, float | None] = {}
    for key in ("batch_s_p50", "batch_s_p95", "source_lag_s_p50", "source_lag_s_p95", "merge_s_p50", "merge_s_p95"):
        ratios[key] = round(beside[key] / without[key], 2) if beside[key] is not None and without[key] else None
    return {
        **{k: getattr(args, k) for k in ("rows", "rate", "duration", "chunk", "max_per_trigger")},
        "trigger_s": TRIGGER_S,
        "merge_max_delay_s": MAX_DELAY_S,
        "initial_snapshot_s": initial_snapshot_s,
        "initial_catch_up_s": catch_up_s,
        "resnapshot": repaired,
        "without": without,
        "beside": beside,
        "ratios": ratios,
    }


def show(results: dict[str, Any]) -> None:
    r, without, beside = results["resnapshot"], results["without"], results["beside"]
    rows_read = f"{r['rows_read']:,}" if r["rows_read"] is not None else "?"
    print(
        f"\nre-snapshot of {results['rows']:,} rows beside {results['rate']:g} writes/s: exit {r['exit_code']}, "
        f"merged after {r['seconds_until_merged']}s, {rows_read} rows read ({r['rows_per_s']} rows/s)"
    )
    print(f"{'':18}{'without':>10}{'beside':>10}{'ratio':>8}")
    for key, ratio in results["ratios"].items():
        cells = [str("-" if v is None else v) for v in (without[key], beside[key], ratio)]
        print(f"{key:18}{cells[0]:>10}{cells[1]:>10}{cells[2]:>8}")
    print(f"{'batches':18}{without['batches']:>10}{beside['batches']:>10}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--rows", type=int, default=1_000_000, help="rows in the source table (default 1000000)")
    add("--rate", type=float, default=100, help="single-row writes a second, throughout (default 100)")
    add("--duration", type=int, default=120, help="seconds of the baseline, without a re-snapshot (default 120)")
    add("--chunk", type=int, default=1024, help="Debezium's incremental.snapshot.chunk.size (default 1024, its own)")
    add("--max-per-trigger", type=int, default=200_000, help="kafka.max_offsets_per_trigger (default 200000)")
    add("--timeout", type=float, default=3600, help="seconds each long wait may take: snapshot, catch-up, repair")
    add("--keep", action="store_true", help="keep the run folder (logs, lake, Kafka data)")
    add("--out", type=Path, default=RESULTS, help="the results file (default bench/results/resnapshot.json)")
    args = parser.parse_args()
    os.environ["TZ"] = "UTC"
    time.tzset()
    folder = Path(tempfile.mkdtemp(prefix="cdc-resnapshot-"))
    print(f"run folder: {folder}", flush=True)
    done = False
    try:
        with ExitStack() as stack:
            results = run(args, folder, stack)
        done = results["resnapshot"]["exit_code"] == 0  # else its log is kept
    finally:
        if done and not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
        else:
            print(f"kept {folder}", flush=True)
    write_results(args.out, "resnapshot", results)
    show(results)


if __name__ == "__main__":
    main()
