"""Benchmark: how far the consistent point trails the newest landing, at 100 busy tables under load.

A consistent read shows the lake at the consistent point (:mod:`cdc_delta.consistency.point`): the newest
source transaction that landed whole with every one before it. This measures how far that point stays
behind the newest change landed while a writer keeps --tables tables busy, against the landed lag itself
(what a plain live read trails the source by), measured in the same run, through real components:
MariaDB -> Debezium (Kafka Connect, the project's connector file: transaction metadata on) -> Kafka ->
``cdc-delta stream`` (a process, running throughout, merges on their defaults) -> Delta.

1. MariaDB, Kafka and Kafka Connect with Debezium on free ports in a temporary folder (as bench/resnapshot.py
   starts them); bench_cp.t000 .. t099 (id INT PRIMARY KEY, v BIGINT, note VARCHAR(40)), --rows rows each,
   and bench_cp.marker; the connector of connectors/mariadb-inventory.yaml (tests/e2e/pipeline.py), waited
   for until a marker row is in Kafka.
2. ``cdc-delta stream`` as a process, with the config of tests/e2e/test_consistent_reads.py (its
   kafka.topic_pattern takes <prefix>.transaction too; trigger 1 s, local[2], shuffle partitions 2) without
   its merge section (so merge.min_events and merge.max_delay_seconds are the defaults) and its snapshot
   section; waited for until the consistent point is at the marker's transaction.
3. A writer thread (one connection) commits --rate transactions a second, by the clock, for --seconds
   seconds: each touches 1-4 random tables, updating a random existing row of each (one in five inserts
   a row instead). Every --every seconds meanwhile, the point is read from the lake with delta-rs (no
   Spark: :func:`cdc_delta.consistency.read.consistent_point`): ``trails_s`` (seconds of source time from
   the point's transaction to the newest change landed), the landed lag (the wall clock when the read
   began, minus the newest source time landed: the baseline), the two summed (the point's lag behind the
   source), the ENDs landed past the point, and the transaction it waits for, if any.
4. Once the writer stops: MariaDB's ``SELECT @@gtid_binlog_pos`` (its last transaction), and the time from
   the writer's stop until a read finds the point there ("caught up after"), read every second.
5. bench/results/consistent_point_lag.json (bench/results_file.py): the settings, the writer's rate, the
   number of samples, p50/p95/max of ``trails_s``, of the landed lag and of the point's lag, the p50 ratio
   point's lag / landed lag, the samples where the point waited (the first few lines), the catch-up time,
   and the stream's batch and merge figures meanwhile (its log); a one-line summary printed.

MariaDB's binlog keeps whole seconds, so the source times (and the lags) carry up to a second of that.
Not a test: nothing fails on a figure. Needs ``make setup``. The run folder (logs, lake, Kafka) is removed
after a run that succeeded (--keep keeps it; a failed run's is kept).

    python bench/consistent_point_lag.py --seconds 120 --rate 20
    python bench/consistent_point_lag.py --seconds 30 --keep          # a quick look, logs kept
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import yaml
from deltalake.exceptions import DeltaError
from resnapshot import log_end, pct, services, stop_stream, stream_stats, wait_until
from results_file import write_results

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests' helpers
from cdc_delta.config import AppConfig, load_config  # noqa: E402
from cdc_delta.consistency.point import Consistency, at_or_before  # noqa: E402
from cdc_delta.consistency.read import consistent_point  # noqa: E402
from cdc_delta.exceptions import one_line  # noqa: E402
from tests.e2e.pipeline import Pipeline  # noqa: E402
from tests.e2e.test_consistent_reads import source_rows, write_config  # noqa: E402
from tests.e2e.writer import BackgroundWriter  # noqa: E402
from tests.services import StreamProcess  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "consistent_point_lag.json"
DB = "bench_cp"
SERVER_ID = 5491  # the connector's database.server.id: one no test uses
OPTIONS: tuple[tuple[str, type, float, str], ...] = (
    ("--seconds", int, 120, "seconds the writer writes, the point sampled meanwhile"),
    ("--rate", float, 20, "transactions a second the writer commits, each over 1-4 random tables"),
    ("--tables", int, 100, "source tables: bench_cp.t000 and on"),
    ("--rows", int, 10, "rows each table holds before the connector starts"),
    ("--every", float, 2, "seconds from one read of the point to the next while the writer writes"),
    ("--timeout", float, 900, "seconds each wait may take: the connector's snapshot, the stream's start, the catch-up"),
)
"""The options but --keep and --out: flag, type, default, what it sets."""
SHOWN = 5
"""Waiting lines (and reasons for no point) kept in the results, the first ones."""


def table(n: int) -> str:
    return f"{DB}.t{n:03d}"


def create_source(pipe: Pipeline, tables: int, rows: int) -> None:
    """``tables`` tables of ``rows`` rows each, and the marker table."""
    filled = ", ".join(f"({i}, 0, 'row {i}')" for i in range(1, rows + 1))
    statements = [f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.marker (id INT PRIMARY KEY)"]
    for n in range(tables):
        statements.append(f"CREATE TABLE {table(n)} (id INT PRIMARY KEY, v BIGINT, note VARCHAR(40))")
        statements.append(f"INSERT INTO {table(n)} VALUES {filled}")
    pipe.sql(statements)


def stream_config(pipe: Pipeline) -> Path:
    """The consistent-reads test's config (the transaction topic subscribed, no limit a batch), without its
    merge section (it merges every landing) and its snapshot section (its tables are not these)."""
    path = write_config(pipe, None, "cdc.yaml")
    data = yaml.safe_load(path.read_text())
    data.pop("merge")
    data.pop("snapshot")
    data["app_id"] = "bench-consistent-point-lag"
    path.write_text(yaml.safe_dump(data))
    return path


class Writer(BackgroundWriter):
    """``rate`` transactions a second by the clock, over one connection: each touches 1-4 random tables,
    updating a random existing row of each, or (one in five) inserting a row."""

    def __init__(self, pipe: Pipeline, tables: int, rows: int, rate: float) -> None:
        super().__init__(pipe, seed=17, pause=0)  # the pace is write's own
        self.tables, self.rate = tables, rate
        self.last_id = [rows] * tables
        """Per table, its highest id (the rows pre-filled, then those inserted)."""
        self.changes = 0
        self.due = self.started = self.seconds = 0.0

    def write(self, conn: Any, cur: Any) -> None:
        conn.begin()
        for n in self.rng.sample(range(self.tables), self.rng.randint(1, min(4, self.tables))):
            if self.rng.random() < 0.8:
                key = self.rng.randint(1, self.last_id[n])
                cur.execute(f"UPDATE {table(n)} SET v = v + 1, note = 'updated' WHERE id = {key}")
            else:
                self.last_id[n] += 1
                cur.execute(f"INSERT INTO {table(n)} VALUES ({self.last_id[n]}, 0, 'inserted')")
            self.changes += 1
        conn.commit()
        self.due += 1 / self.rate
        self.stop.wait(max(0.0, self.due - time.monotonic()))

    def __enter__(self) -> Writer:
        self.started = self.due = time.monotonic()
        super().__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        self.seconds = time.monotonic() - self.started

    def summary(self) -> dict[str, Any]:
        seconds = self.seconds or time.monotonic() - self.started
        return {
            "transactions": self.writes,
            "changes": self.changes,
            "seconds": round(seconds, 1),
            "transactions_per_s": round(self.writes / seconds, 1),
        }


def point_now(config: AppConfig) -> Consistency:
    """The consistent point read from the lake with delta-rs; a read that failed (a commit beside it) as no
    point, its error the reason."""
    try:
        return consistent_point(config)
    except (OSError, ValueError, DeltaError) as e:
        return Consistency(None, unavailable=f"the read failed: {one_line(e)}")


class Sampler:
    """Reads the point every ``every`` seconds (whatever a read takes) and keeps what each read found."""

    def __init__(self, config: AppConfig, every: float) -> None:
        self.config, self.every = config, every
        self.started = self.next_at = time.monotonic()
        self.samples: list[dict[str, Any]] = []
        self.without_point: list[str] = []
        """Per read that found no point past a transaction: why, with its time."""

    def take(self) -> None:
        began, wall = time.monotonic(), time.time()
        found = point_now(self.config)
        at_s = round(began - self.started, 1)
        point = found.point
        if point is None or point.txn_id is None:
            self.without_point.append(f"{at_s}s: {found.line()}")
            return
        newest = found.newest_source_ts_ms
        self.samples.append(
            {
                "at_s": at_s,
                "txn_id": point.txn_id,
                "through": point.through,
                "trails_s": found.trails_s(),
                "landed_lag_s": None if newest is None else max(0.0, wall - newest / 1000),
                "ends_after": found.ends_after,
                "waiting": None if found.waiting is None else f"{at_s}s: {found.waiting.line()}",
                "read_s": time.monotonic() - began,
            }
        )

    def tick(self) -> None:
        """A sample now, then a wait for the next one's time."""
        self.take()
        self.next_at = max(self.next_at + self.every, time.monotonic())
        time.sleep(max(0.0, self.next_at - time.monotonic()))


def spread(name: str, values: list[float]) -> dict[str, float | None]:
    return {
        f"{name}_p50": pct(values, 50),
        f"{name}_p95": pct(values, 95),
        f"{name}_max": round(max(values), 2) if values else None,
    }


def figures(sampler: Sampler) -> dict[str, Any]:
    """The samples' figures: the point's trail, the landed lag (the baseline), and the two summed."""
    samples = sampler.samples
    trails = [s["trails_s"] for s in samples if s["trails_s"] is not None]
    landed = [s["landed_lag_s"] for s in samples if s["landed_lag_s"] is not None]
    both = [s["landed_lag_s"] + s["trails_s"] for s in samples if None not in (s["landed_lag_s"], s["trails_s"])]
    waiting = [s["waiting"] for s in samples if s["waiting"] is not None]
    p50_point, p50_landed = pct(both, 50), pct(landed, 50)
    throughs = [s["through"] for s in samples]
    return {
        "samples": len(samples),
        "samples_without_point": len(sampler.without_point),
        "without_point_first": sampler.without_point[:SHOWN],
        **spread("trails_s", trails),
        **spread("landed_lag_s", landed),
        **spread("point_lag_s", both),
        "point_to_landed_lag_p50": round(p50_point / p50_landed, 2) if p50_point is not None and p50_landed else None,
        **spread("ends_after", [float(s["ends_after"]) for s in samples]),
        "waiting_samples": len(waiting),
        "waiting_first": waiting[:SHOWN],
        "distinct_points": len({s["txn_id"] for s in samples}),
        "landings": max(throughs) - min(throughs) if throughs else 0,
        **spread("point_read_s", [s["read_s"] for s in samples]),
    }


def last_transaction(pipe: Pipeline) -> str:
    """The source's last transaction: its GTID (``domain-server-seq``)."""
    return str(source_rows(pipe.mariadb, "SELECT @@gtid_binlog_pos")[0][0])


def wait_for_point(config: AppConfig, stream: StreamProcess, txn_id: str, timeout: float) -> float:
    """Read the point every second until it is at transaction ``txn_id`` (or past it); the monotonic time
    the read that found it there began."""
    found_at: list[float] = []

    def there() -> bool:
        began = time.monotonic()
        point = point_now(config).point
        if point is None or point.txn_id is None or not at_or_before(txn_id, point.txn_id):
            return False
        found_at.append(began)
        return True

    wait_until(there, stream, timeout, f"the consistent point at transaction {txn_id}", poll=1)
    return found_at[0]


def run(args: argparse.Namespace, folder: Path, stack: ExitStack) -> dict[str, Any]:
    mariadb, bootstrap, connect = services(stack, folder)
    pipe = Pipeline(DB, folder, bootstrap, mariadb, connect, server_id=SERVER_ID)
    create_source(pipe, args.tables, args.rows)
    pipe.register()  # the project's connector file: provide.transaction.metadata true
    pipe.mark(1, timeout=args.timeout)
    print(f"source: {args.tables} tables of {args.rows} rows, the connector's snapshot in Kafka", flush=True)

    config_path = stream_config(pipe)
    config = load_config(config_path, env={})
    stream = StreamProcess(config_path, folder / "stream.log")
    clock = time.monotonic()
    stream.start()
    stack.callback(stop_stream, stream)
    marker = last_transaction(pipe)
    startup_s = round(wait_for_point(config, stream, marker, args.timeout) - clock, 1)
    print(f"the point is at the marker's transaction {marker} after {startup_s}s; writing", flush=True)

    start = log_end(stream)
    sampler = Sampler(config, args.every)
    with Writer(pipe, args.tables, args.rows, args.rate) as writer:
        until = time.monotonic() + args.seconds

        def sampled() -> bool:
            if not writer.thread.is_alive():
                raise SystemExit("the writer stopped early (its error is printed above)")
            sampler.tick()
            return time.monotonic() >= until

        wait_until(sampled, stream, args.seconds + args.timeout, "the writer's end", poll=0)
    stopped = time.monotonic()
    last = last_transaction(pipe)
    caught_up_s = round(wait_for_point(config, stream, last, args.timeout) - stopped, 1)
    print(f"the point reached the last transaction {last} {caught_up_s}s after the writer stopped", flush=True)
    return {
        "settings": {
            **{k: getattr(args, k) for k in ("tables", "rows", "rate", "seconds", "every")},
            "trigger_interval": config.trigger_interval,
            "merge_min_events": config.merge.min_events,
            "merge_max_delay_seconds": config.merge.max_delay_seconds,
        },
        "startup_s": startup_s,
        "writer": writer.summary(),
        **figures(sampler),
        "last_transaction": last,
        "caught_up_after_s": caught_up_s,
        "stream": stream_stats(stream.log, start, log_end(stream)),
    }


def show(results: dict[str, Any]) -> None:
    r, settings = results, results["settings"]
    print(
        f"\n{settings['tables']} tables, {r['writer']['transactions_per_s']} transactions/s for "
        f"{settings['seconds']}s, {r['samples']} samples: the point trails the newest landing by "
        f"p50 {r['trails_s_p50']}s / p95 {r['trails_s_p95']}s / max {r['trails_s_max']}s; landed lag p50 "
        f"{r['landed_lag_s_p50']}s / p95 {r['landed_lag_s_p95']}s; point lag / landed lag (p50) "
        f"{r['point_to_landed_lag_p50']}; waiting in {r['waiting_samples']} samples; caught up "
        f"{r['caught_up_after_s']}s after the writer stopped"
    )


@contextmanager
def run_folder(keep: bool) -> Iterator[Path]:
    """A temporary folder for the run (services, stream, lake), removed after a run that succeeded unless
    ``keep``; a failed run's is kept."""
    folder = Path(tempfile.mkdtemp(prefix="cdc-consistent-point-lag-"))
    print(f"run folder: {folder}", flush=True)
    try:
        yield folder
    except BaseException:
        print(f"kept {folder}", flush=True)
        raise
    if keep:
        print(f"kept {folder}", flush=True)
    else:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag, kind, default, meaning in OPTIONS:
        parser.add_argument(flag, type=kind, default=default, help=f"{meaning} (default {default})")
    parser.add_argument("--keep", action="store_true", help="keep the run folder (logs, lake, Kafka data)")
    parser.add_argument(
        "--out", type=Path, default=RESULTS, help=f"the results file (default {RESULTS.relative_to(ROOT)})"
    )
    args = parser.parse_args()
    os.environ["TZ"] = "UTC"  # the stream process's too
    time.tzset()
    with run_folder(args.keep) as folder, ExitStack() as stack:
        results = run(args, folder, stack)
    write_results(args.out, "consistent_point_lag", results)
    show(results)


if __name__ == "__main__":
    main()
