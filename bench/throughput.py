"""Benchmark: how the stream keeps up with a real database - many tables, many partitions, JSON envelopes
with the Connect schema in every record, as Debezium's JsonConverter writes them (issues 14 and 26).

Parts (--parts, all by default), every figure measured in this run on this machine:
- decode: the batch's decoding alone (decode + the stats job), --decode-events events of one table: the
  reference decoder as a Python UDF on every record against the JVM path's two halves (decoded at ingest,
  made canonical where changes are read), and the ingest's half alone (jvm_ingest_half_s).
- batch: a micro-batch through the batch function (landing; merges on their defaults are not due
  within it): 1 table x --batch-events on 1 partition vs on 48 partitions (partitions_batch_ratio),
  and 100 tables x --batch-events/100 (one partition each) vs 1 table x --batch-events
  (tables_batch_ratio); each the median of --batch-repeats successive batches of new events.
- batch1000: the batch function's landing for 1,000 tables x --batch-events/1,000 (each of its own
  shape, one partition each) vs 1 table x --batch-events, in the same run (tables_1000_batch_ratio):
  the ingest's cost per table, where the 1,000-table target is decided (merges excluded, as above).
- newtables: the first batch of --batch-events events into tables never seen, 100 tables vs 1 table, the
  same events (new_tables_batch_ratio: landing seconds), and the seconds until every table is created and
  merged (new_tables_until_merged_ratio), after a small first batch of another lake warmed the JVM.
- read: --batch-repeats batches of --read-events events of 1 table (3 partitions) through the batch function
  (the median) against Spark reading and counting the same records (the median; ingest_to_kafka_read_ratio:
  read seconds / batch seconds).
- sustained: the stream as a process (`cdc-delta stream --until-caught-up`, which ends with every
  table merged) over a backlog, batches of --sustained-batch events: 1 table and 100 tables with the
  merge defaults (two phases: merges beside the ingest), and, the baseline in the same run, 100
  tables with `merge.max_delay_seconds: 0` (every table merged after every batch, the design before
  the two phases); ingest events/s = events / batch seconds, end to end = events / wall time until
  every table is merged; the first batch left out.
- sustained1000: the ingest alone (`merge.in_stream: false`: the merges are `cdc-delta merge`'s, a second
  job) as a process over a backlog of twice --sustained-events events in batches of --sustained-batch: 1,000
  tables (one partition each, each of its own shape) against 1 table, in the same run
  (ingest_events_per_s_1000_tables, tables_1000_ingest_ratio). The stream's consumers are pooled across
  batches, which the batch1000 part's one-off reads are not.
- latency: 100 tables, a 10 s trigger, merges on their defaults, produced at --latency-rate (default
  half the 100-table sustained rate) for --latency-seconds: per change, landed (its landing's commit
  time minus its source time) and merged (its table's merge commit time minus its source time).
- merge: where a table's share of a batch goes: the stream's MERGE of 100 rows into a table of
  --snapshot-rows rows (median of 10, and the JVM's CPU seconds each), against the same MERGE by
  delta-rs on the same table.
- snapshot: the nightly snapshot of 100 tables of 10k rows vs 1 table of 10k rows (wall time).
Writes bench/results/throughput.json (the keys of issue 26; a run with --label baseline is kept under
"baseline", any other run is the current one) and prints it. Needs the native broker and Spark jars.
Not a test: nothing fails on a time.

    python bench/throughput.py --label baseline          # before a change
    python bench/throughput.py --parts decode,batch      # a quick look
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from broker import native_broker
from results_file import write_results

ROOT = Path(__file__).parents[1]
RESULTS = ROOT / "bench" / "results" / "throughput.json"
sys.path.insert(0, str(ROOT))  # the tests' helpers
BATCH_LINE = re.compile(r"batch (\d+): (\d+) in, \d+ landed.*? in ([\d.]+)s")
STEPS_LINE = re.compile(r"batch (\d+) steps: (.*)$")
STEP = re.compile(r"(\w+) ([\d.]+)s")
ROUND_LINE = re.compile(r"merge through landing \d+: (\d+) tables, .* in ([\d.]+)s")
LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})")
PARTS = (
    "decode",
    "batch",
    "batch1000",
    "newtables",
    "read",
    "merge",
    "sustained",
    "sustained1000",
    "latency",
    "snapshot",
)
# Batches of 10^5 records of a few KB each need more than Spark's default 1 GB driver (local mode).
SPARK_CONF = {"spark.ui.enabled": "false", "spark.driver.memory": "4g"}


def source_tables(n: int, prefix: str, one_shape: bool = False) -> tuple[Any, ...]:
    """``n`` tables of the generator's order columns; each of its own shape (its enum allows one more value,
    as the tables of a real database differ), or all of one (the shards of a sharded table)."""
    from cdc_delta.demo.generator import ORDER_COLUMNS, Column, SourceTable

    def columns(i: int) -> tuple[Any, ...]:
        if one_shape or i == 0:
            return ORDER_COLUMNS
        allowed = {"allowed": f"new,paid,shipped,v{i}"}
        return tuple(
            Column(c.name, c.connect_type, c.logical, allowed) if c.name == "status" else c for c in ORDER_COLUMNS
        )

    return tuple(SourceTable(f"{prefix}db", f"t{i:03d}", columns(i)) for i in range(n))


def table_configs(tables: tuple[Any, ...], server: str) -> list[dict[str, Any]]:
    from cdc_delta.demo.generator import topic_of

    return [{"name": f"{t.db}.{t.table}", "topics": [topic_of(t, server)], "key": ["id"]} for t in tables]


def bench_config(folder: Path, bootstrap: str, server: str, tables: tuple[Any, ...], **kafka: Any) -> dict[str, Any]:
    return {
        "app_id": f"bench-{server}",
        "kafka": {"bootstrap_servers": bootstrap, "topic_pattern": f"^{server}\\..*", **kafka},
        "spark": {"master": "local[2]", "shuffle_partitions": 2, "conf": SPARK_CONF},
        "storage": {"root": str(folder / server)},
        "tables": table_configs(tables, server),
    }


def produce(bootstrap: str, server: str, tables: tuple[Any, ...], events: int, partitions: int, seed: int) -> None:
    """``events`` generated changes (inserts 60%, updates 30%, deletes 10%) over ``tables``."""
    from cdc_delta.demo.generator import ChangeGenerator, topic_of
    from cdc_delta.demo.producer import ensure_topics
    from cdc_delta.demo.producer import produce as send

    ensure_topics(bootstrap, [topic_of(t, server) for t in tables], partitions)
    send(bootstrap, ChangeGenerator(tables, seed=seed, server=server).changes(events))


def kafka_batch(spark: Any, bootstrap: str, server: str) -> Any:
    """Everything in ``server``'s topics, as the stream's batch DataFrame sees a batch (one task per partition)."""
    from cdc_delta.stream.query import SOURCE_DEFAULTS

    return (
        spark.read.format("kafka")
        .options(**SOURCE_DEFAULTS)  # as the stream reads
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribePattern", f"^{server}\\..*")
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )


def timed(action: Any) -> float:
    t0 = time.monotonic()
    action()
    return time.monotonic() - t0


# --- decode -------------------------------------------------------------------------------------


def part_decode(spark: Any, bootstrap: str, folder: Path, events: int) -> dict[str, Any]:
    """The batch's decoding and its stats job: the Python UDF (the reference decoder on every record,
    as the stream decoded before) against the JVM path (decode_batch), best of three runs each."""
    from pyspark import StorageLevel

    from cdc_delta.config import parse_config
    from cdc_delta.decode.batch import decode_batch
    from cdc_delta.decode.canonical import canonical_frame
    from cdc_delta.decode.images import schema_ref
    from cdc_delta.decode.jvm import Landable
    from cdc_delta.decode.plan import decode_plan
    from cdc_delta.decode.reference import python_decoded
    from cdc_delta.stream.stats import collect_stats

    tables = source_tables(1, "dec")
    produce(bootstrap, "dec", tables, events, 2, seed=1)
    config = parse_config(bench_config(folder, bootstrap, "dec", tables))
    records = kafka_batch(spark, bootstrap, "dec").persist(StorageLevel.MEMORY_AND_DISK)
    count = records.count()
    plan = decode_plan(config)

    def python_udf() -> None:
        decoded = python_decoded(records, plan).persist(StorageLevel.MEMORY_AND_DISK)
        collect_stats(decoded)
        decoded.unpersist()

    # Kept from run to run, as the stream keeps them from batch to batch.
    schemas: dict[int, Any] = {}
    landable: Landable = {}

    def jvm() -> None:
        # Both halves of the JVM path: decoded at ingest, made canonical where the changes are read.
        batch = decode_batch(records, plan, schemas, landable=landable)
        texts = {schema_ref(i): s.text for i, s in schemas.items() if s is not None}
        made = canonical_frame(batch.frame, plan, texts)
        collect_stats(made.frame)
        made.release()
        batch.release()

    def ingest_half() -> None:
        batch = decode_batch(records, plan, schemas, landable=landable)
        collect_stats(batch.frame)
        batch.release()

    out: dict[str, Any] = {"events": count}
    python_s = min(timed(python_udf) for _ in range(3))
    out.update(python_udf_s=round(python_s, 2), python_udf_events_per_s=round(count / python_s))
    jvm_s = min(timed(jvm) for _ in range(3))
    out.update(jvm_s=round(jvm_s, 2), jvm_events_per_s=round(count / jvm_s), decode_speedup=round(python_s / jvm_s, 2))
    out.update(jvm_ingest_half_s=round(min(timed(ingest_half) for _ in range(3)), 2))  # the rest: made canonical
    records.unpersist()
    return out


# --- one batch ----------------------------------------------------------------------------------


def end_offsets(bootstrap: str, server: str) -> dict[str, dict[str, int]]:
    from cdc_delta.kafka.offsets import partition_lag

    out: dict[str, dict[str, int]] = {}
    for p in partition_lag(bootstrap, "bench", [], f"^{server}\\."):
        out.setdefault(p.topic, {})[str(p.partition)] = p.end
    return out


def records_from(spark: Any, bootstrap: str, server: str, starting: dict[str, dict[str, int]]) -> Any:
    """The records of ``server``'s topics from ``starting`` offsets to the end, one task per partition."""
    from cdc_delta.stream.query import SOURCE_DEFAULTS

    return (
        spark.read.format("kafka")
        .options(**SOURCE_DEFAULTS)  # as the stream reads
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribePattern", f"^{server}\\..*")
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", "latest")
        .load()
    )


def one_batch(
    spark: Any,
    bootstrap: str,
    folder: Path,
    server: str,
    tables: tuple[Any, ...],
    partitions: int,
    events: int,
    repeats: int,
) -> tuple[float, list[float], dict[str, float]]:
    """Seconds the batch function takes for ``events`` new records: the median of ``repeats``
    successive batches (and each), after a warm-up batch created the tables; and the median seconds of
    each step of the landing (decode, count, claim, land: where its time goes), beside ``kafka_read``:
    Spark reading and counting the same records, timed just before (the floor of any ingest)."""
    from cdc_delta.config import parse_config
    from cdc_delta.stream.batch import BatchProcessor

    # The landing alone: merges, due after 60 s by default, are told of the landings and left out.
    processor = BatchProcessor(parse_config(bench_config(folder, bootstrap, server, tables)), listener=None)
    produce(bootstrap, server, tables, max(len(tables) * 20, events // 10), partitions, seed=2)
    processor.process(kafka_batch(spark, bootstrap, server), 0)
    seconds, steps = [], []
    for batch_id in range(1, repeats + 1):
        start = end_offsets(bootstrap, server)
        produce(bootstrap, server, tables, events, partitions, seed=2 + batch_id)
        read = timed(lambda: records_from(spark, bootstrap, server, start).count())  # noqa: B023 (called here)
        records = records_from(spark, bootstrap, server, start)
        t0 = time.monotonic()
        steps.append({**processor.process(records, batch_id).steps, "kafka_read": read})
        seconds.append(round(time.monotonic() - t0, 2))
    median_steps = {step: round(statistics.median(s.get(step, 0.0) for s in steps), 2) for step in steps[0]}
    return statistics.median(seconds), seconds, median_steps


def part_batch_1000(spark: Any, bootstrap: str, folder: Path, events: int, repeats: int) -> dict[str, Any]:
    one, one_s, one_steps = one_batch(spark, bootstrap, folder, "k1", source_tables(1, "k1"), 1, events, repeats)
    many, many_s, many_steps = one_batch(
        spark, bootstrap, folder, "k1000", source_tables(1000, "k1000"), 1, events, repeats
    )
    return {
        "batch_events": events,
        "batch_1_table_s": round(one, 2),
        "batch_1000_tables_s": round(many, 2),
        "batch_seconds": {"1_table": one_s, "1000_tables": many_s},
        "step_seconds": {"1_table": one_steps, "1000_tables": many_steps},
        "tables_1000_batch_ratio": round(many / one, 2),
    }


def part_new_tables(spark: Any, bootstrap: str, folder: Path, events: int) -> dict[str, Any]:
    """The first batch of ``events`` records into tables the lake has never seen: 1 table, then 100 (the
    same events, spread): seconds to land it (the stream's batch; its cost is the key), then seconds
    until every table is created and merged (one merger, ``merge_all``). A small first batch into one
    table of another lake warms the JVM first, so neither case pays the compilation alone."""
    from cdc_delta.config import parse_config
    from cdc_delta.merger.run import Merger
    from cdc_delta.stream.batch import BatchProcessor

    def first_batch(server: str, n: int, count: int) -> dict[str, Any]:
        tables = source_tables(n, server)
        config = parse_config(bench_config(folder, bootstrap, server, tables))
        processor = BatchProcessor(config)  # merged below, not beside
        produce(bootstrap, server, tables, count, 1, seed=7)
        land = timed(lambda: processor.process(kafka_batch(spark, bootstrap, server), 0))
        merger = Merger(spark, config)
        try:
            rounds: list[Any] = []
            merge = timed(lambda: rounds.extend(merger.merge_all()))
        finally:
            merger.close()
        merged = {t.table for r in rounds for t in r.tables if not t.error}
        assert len(merged) == n, f"{server}: {len(merged)} of {n} tables merged"
        return {"tables": n, "events": count, "land_s": round(land, 2), "merge_all_s": round(merge, 2)}

    first_batch("nw", 1, 1_000)
    one, many = first_batch("n1", 1, events), first_batch("n100", 100, events)
    return {
        "1_table": one,
        "100_tables": many,
        "new_tables_batch_ratio": round(many["land_s"] / one["land_s"], 2),
        "new_tables_until_merged_ratio": round(
            (many["land_s"] + many["merge_all_s"]) / (one["land_s"] + one["merge_all_s"]), 2
        ),
    }


def part_read(spark: Any, bootstrap: str, folder: Path, events: int, repeats: int) -> dict[str, Any]:
    # Medians of several batches: one batch of 200k swung by 40% run to run on 2 cores (8-13 s).
    seconds, each, steps = one_batch(spark, bootstrap, folder, "r1", source_tables(1, "r1"), 3, events, repeats)
    return {
        "read_events": events,
        "batch_s": round(seconds, 2),
        "batch_seconds": each,
        "step_seconds": steps,
        "ingest_to_kafka_read_ratio": round(steps["kafka_read"] / seconds, 3),
    }


def part_batch(spark: Any, bootstrap: str, folder: Path, events: int, repeats: int) -> dict[str, Any]:
    one, one_s, one_steps = one_batch(spark, bootstrap, folder, "b1p", source_tables(1, "b1p"), 1, events, repeats)
    partitions, partitions_s, partitions_steps = one_batch(
        spark, bootstrap, folder, "b48p", source_tables(1, "b48p"), 48, events, repeats
    )
    tables, tables_s, tables_steps = one_batch(
        spark, bootstrap, folder, "b100t", source_tables(100, "b100t"), 1, events, repeats
    )
    shards, shards_s, shards_steps = one_batch(
        spark, bootstrap, folder, "b100s", source_tables(100, "b100s", one_shape=True), 1, events, repeats
    )
    return {
        "batch_events": events,
        "batch_repeats": repeats,
        "batch_1_table_1_partition_s": round(one, 2),
        "batch_1_table_48_partitions_s": round(partitions, 2),
        "batch_100_tables_s": round(tables, 2),
        "batch_100_tables_one_shape_s": round(shards, 2),
        "batch_seconds": {
            "1_table_1_partition": one_s,
            "1_table_48_partitions": partitions_s,
            "100_tables": tables_s,
            "100_tables_one_shape": shards_s,
        },
        "step_seconds": {
            "1_table_1_partition": one_steps,
            "1_table_48_partitions": partitions_steps,
            "100_tables": tables_steps,
            "100_tables_one_shape": shards_steps,
        },
        "partitions_batch_ratio": round(partitions / one, 2),
        "tables_batch_ratio": round(tables / one, 2),
        "tables_one_shape_batch_ratio": round(shards / one, 2),
    }


# --- the stream as a process ---------------------------------------------------------------------


def stream(
    config: Path, log: Path, *extra: str, background: bool = False, verbose: bool = False
) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cdc_delta.cli",
            *(["-v"] if verbose else []),
            "stream",
            "--config",
            str(config),
            *extra,
        ],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    if not background and proc.wait() != 0:
        raise SystemExit(f"the stream failed; see {log}")
    return proc


def write_yaml(folder: Path, name: str, data: dict[str, Any]) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def log_time(line: str) -> float | None:
    """The epoch seconds of a log line's timestamp (the stream logs in UTC)."""
    m = LOG_TIME.match(line)
    if not m:
        return None
    stamp = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.timezone.utc)
    return stamp.timestamp() + int(m.group(2)) / 1000


def sustained(
    bootstrap: str,
    folder: Path,
    server: str,
    tables: int,
    events: int,
    batch: int,
    merge: dict[str, Any] | None = None,
    partitions: int = 3,
) -> dict[str, Any]:
    """The stream as a process over a backlog (`--until-caught-up`, which ends with every table merged).
    Ingest events/s: events / the batches' own seconds (with ``max_delay_seconds: 0``, landing and the
    merges after it; else landing, the merges running beside); end to end: events / the wall time from
    the end of the first batch to the last log line (every table merged); the first batch is left out
    of both (JIT warm-up, and before the two phases, table creation), and so is a last batch of less
    than half a batch (the backlog's remainder: a batch's fixed cost over a few events is no rate).
    The stream logs verbosely: the median seconds of each step of the steady batches are kept."""
    sources = source_tables(tables, server)
    produce(bootstrap, server, sources, events, partitions, seed=4)
    config = bench_config(folder, bootstrap, server, sources, max_offsets_per_trigger=batch)
    if merge is not None:
        config["merge"] = merge
    log = folder / f"{server}.log"
    stream(
        write_yaml(folder, server, {**config, "trigger_interval": "10 seconds"}), log, "--until-caught-up", verbose=True
    )
    lines = [line for line in log.read_text().splitlines() if " DEBUG " not in line or STEPS_LINE.search(line)]
    rows, merges, steps = [], [], {}
    for line in lines:
        if m := STEPS_LINE.search(line):
            steps[int(m.group(1))] = {k: float(v) for k, v in STEP.findall(m.group(2))}
        elif m := BATCH_LINE.search(line):
            inline = ROUND_LINE.search(line)
            seconds = float(m.group(3)) + (float(inline.group(2)) if inline else 0.0)
            rows.append((int(m.group(1)), int(m.group(2)), seconds, log_time(line)))
        elif m := ROUND_LINE.search(line):
            merges.append((int(m.group(1)), float(m.group(2))))
    steady = rows[1:] or rows
    if len(steady) > 1 and steady[-1][1] < batch / 2:
        steady = steady[:-1]
    times = [t for t in map(log_time, lines) if t is not None]
    first_end = rows[0][3] if rows and rows[0][3] is not None else None
    wall = (times[-1] - first_end) if times and first_end is not None else None
    steady_events = sum(n for _, n, _, _ in steady)
    steady_steps = [steps[b] for b, _, _, _ in steady if b in steps]
    return {
        "tables": tables,
        "merge": merge or "defaults",
        "events": sum(n for _, n, _, _ in rows),
        "batches": len(rows),
        "batch_events": [n for _, n, _, _ in rows],
        "batch_seconds": [round(s, 1) for _, _, s, _ in rows],
        "steady_batches": len(steady),
        "step_seconds": {
            step: round(statistics.median(s.get(step, 0.0) for s in steady_steps), 2) for step in steady_steps[0]
        }
        if steady_steps
        else {},
        "rounds_beside": len(merges),
        "round_seconds_total": round(sum(s for _, s in merges), 1),
        "events_per_s": round(steady_events / sum(s for _, _, s, _ in steady)),
        "end_to_end_events_per_s": round(steady_events / wall) if wall else None,
    }


def part_latency(bootstrap: str, folder: Path, rate: float, seconds: int) -> dict[str, Any]:
    """100 tables, 10 s trigger, merges on their defaults beside the ingest, produced at ``rate`` for
    ``seconds``; the stream runs until it has read everything (its consumer group at the end offsets,
    at most 20 minutes) and merged it. Per change: *landed*, the commit time of its landing minus its
    source time (when a reader of the changelog, a live view, can see it); *merged*, the commit time of
    its table's first merge that holds its landing minus its source time (when the Delta table shows
    it). After the catch-up the stream runs until a merge round leaves nothing pending (every table
    holds the last landing), so that every change is counted (``every_table_merged``)."""
    from delta.tables import DeltaTable

    from cdc_delta.changelog.table import changelog_path, landings
    from cdc_delta.config import parse_config
    from cdc_delta.delta.commits import app_commits
    from cdc_delta.demo.generator import ChangeGenerator, topic_of
    from cdc_delta.demo.producer import ensure_topics
    from cdc_delta.demo.producer import produce as send
    from cdc_delta.spark_session import build_session

    server = "lat"
    sources = source_tables(100, server)
    ensure_topics(bootstrap, [topic_of(t, server) for t in sources], 3)
    config = bench_config(folder, bootstrap, server, sources)
    log = folder / f"{server}.log"
    proc = stream(write_yaml(folder, server, {**config, "trigger_interval": "10 seconds"}), log, background=True)
    time.sleep(25)  # Spark starts before the clock runs
    events = int(rate * seconds)
    send(bootstrap, ChangeGenerator(sources, seed=6, live=True, server=server).changes(events), rate=rate)
    caught_up = wait_caught_up(bootstrap, config["app_id"], config["kafka"]["topic_pattern"], 1200)
    merged_all = all_merged(log, timeout_s=parse_config(config).merge.max_delay_seconds + 600)
    proc.terminate()
    proc.wait(timeout=600)
    parsed = parse_config(config)
    spark = build_session(parsed.spark)
    landed_at = {c.record.land_seq: c.timestamp.timestamp() for c in landings(spark, parsed)}
    changes = spark.read.format("delta").load(changelog_path(parsed)).select("table", "land_seq", "source_ts_ms")
    landed: list[float] = []
    by_landing: dict[int, list[float]] = {}
    merged: list[float] = []
    merged_by_landing: dict[int, list[float]] = {}
    merges_by_table: dict[str, list[tuple[int, float]]] = {}
    for table in parsed.tables:
        path = parsed.storage.table_path(table)
        if DeltaTable.isDeltaTable(spark, path):
            history = app_commits(DeltaTable.forPath(spark, path), parsed.app_id)
            merges_by_table[table.name] = sorted(
                (c.record.land_seq, c.timestamp.timestamp()) for c in history if c.record.land_seq is not None
            )
    for row in changes.collect():
        source_s = row["source_ts_ms"] / 1000
        if row["land_seq"] in landed_at:
            landed.append(landed_at[row["land_seq"]] - source_s)
            by_landing.setdefault(row["land_seq"], []).append(landed[-1])
        done = next((t for seq, t in merges_by_table.get(row["table"], []) if seq >= row["land_seq"]), None)
        if done is not None:
            merged.append(done - source_s)
            merged_by_landing.setdefault(row["land_seq"], []).append(merged[-1])
    spark.stop()
    lines = log.read_text().splitlines()
    rows = [(int(m.group(2)), float(m.group(3))) for m in map(BATCH_LINE.search, lines) if m]
    rounds = [(int(m.group(1)), float(m.group(2))) for m in map(ROUND_LINE.search, lines) if m]
    return {
        "rate_events_per_s": round(rate),
        "seconds": seconds,
        "events": events,
        "caught_up_s_after_last_event": round(caught_up, 1) if caught_up is not None else None,
        "every_table_merged": merged_all,
        "batches": len(rows),
        "batch_seconds": [round(s, 1) for _, s in rows],
        "changes_sampled": len(landed),
        "changes_merged": len(merged),
        "landed_p50_s": percentile(landed, 0.5),
        "landed_p99_s": percentile(landed, 0.99),
        # The first landings of a process are its slowest (a cold JVM, new tables) and leave a backlog to
        # the next: by landing, the start and the steady state apart.
        "landed_by_landing": [
            {"landing": seq, "changes": len(s), "p50_s": percentile(s, 0.5), "p99_s": percentile(s, 0.99)}
            for seq, s in sorted(by_landing.items())
        ],
        "merged_lag_p50_s": percentile(merged, 0.5),
        "merged_lag_p99_s": percentile(merged, 0.99),
        # Where the merged lag goes: each merge round (tables, seconds), and the lag by landing.
        "merge_rounds": [{"tables": n, "seconds": round(s, 1)} for n, s in rounds],
        "merged_by_landing": [
            {"landing": seq, "changes": len(s), "p50_s": percentile(s, 0.5), "p99_s": percentile(s, 0.99)}
            for seq, s in sorted(merged_by_landing.items())
        ],
    }


def wait_caught_up(bootstrap: str, group: str, topic_pattern: str, timeout_s: float) -> float | None:
    """Seconds until consumer ``group`` has read every partition of ``topic_pattern`` to its end (an
    empty partition counts as read), checked every 10 s; None if it had not within ``timeout_s``."""
    from cdc_delta.kafka.offsets import partition_lag

    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        time.sleep(10)
        lags = partition_lag(bootstrap, group, [], topic_pattern)
        if lags and all(p.lag == 0 or p.end == 0 for p in lags):
            return time.monotonic() - t0
    return None


def all_merged(log: Path, timeout_s: float) -> bool:
    """Wait until the stream's log shows a merge round that ended after its last batch (called once every
    landing is made: the consumer group at the end offsets) with no change left pending in any table;
    False if none did within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        lines = log.read_text().splitlines()
        batches = [t for line in lines if BATCH_LINE.search(line) and (t := log_time(line)) is not None]
        since = max(batches, default=0.0)
        for line in lines:
            at = log_time(line)
            if ROUND_LINE.search(line) and "; pending:" not in line and at is not None and at > since:
                return True
        time.sleep(5)
    return False


def percentile(samples: list[float], q: float) -> float | None:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q))], 2) if ordered else None


# --- one table's MERGE: where a batch's per-table cost goes ---------------------------------------


def part_merge(spark: Any, folder: Path, rows: int, merges: int = 10, batch: int = 100) -> dict[str, Any]:
    """The stream's MERGE (merge_rows, Delta on Spark) of ``batch`` rows (half updates, half inserts)
    into a table of ``rows`` rows, median of ``merges``, with the JVM's CPU seconds per MERGE; then
    the same MERGE (guard, transaction id) by delta-rs on the same table, the rows handed over as
    Arrow from the driver, for comparison: what a MERGE costs that is not Delta-on-Spark's."""
    from deltalake import CommitProperties, DeltaTable, Transaction
    from pyspark.sql import functions as F

    from cdc_delta import columns as C
    from cdc_delta.delta.commits import Commit, StreamCommit
    from cdc_delta.delta.tables import create_table, table_schema
    from cdc_delta.events.ordering import SEQ_FIELDS
    from cdc_delta.merger.merge import merge_rows

    business = (("id", "bigint"), ("customer", "string"), ("amount", "decimal(10,2)"))
    schema = table_schema(business)
    path = str(folder / "merge" / "t")
    create_table(spark, path, business)

    def frame(lo: int, hi: int, seq: int) -> Any:
        values = {
            "id": F.col("id"),
            "customer": F.concat(F.lit("customer-"), F.col("id").cast("string")),
            "amount": (F.col("id") % 1000 / 100).cast("decimal(10,2)"),
            C.OP: F.lit("u"),
            C.DELETED: F.lit(False),
            C.SEQ: F.struct(*[F.lit(seq).cast(t).alias(n) for n, t in SEQ_FIELDS]),
            C.SOURCE_TS: F.current_timestamp(),
            C.INGESTED_AT: F.current_timestamp(),
        }
        return spark.range(lo, hi).select(
            *[values.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name) for f in schema.fields]
        )

    frame(0, rows, 0).write.format("delta").mode("append").save(path)
    jvm = spark.sparkContext._jvm
    pid = int(jvm.java.lang.ProcessHandle.current().pid())
    spark_s, spark_cpu = [], []
    for i in range(merges):
        lo = rows - batch // 2 + i * batch
        source = frame(lo, lo + batch, i + 1).persist()
        source.count()
        cpu0, t0 = process_cpu_s(pid), time.monotonic()
        commit = Commit("bench:merge", i + 1, StreamCommit("bench", land_seq=i + 1, table="t"))
        merge_rows(spark, path, source, ["id"], dict(business), commit, "t")
        spark_s.append(time.monotonic() - t0)
        spark_cpu.append(process_cpu_s(pid) - cpu0)
        source.unpersist()
    newer = " OR ".join(
        " AND ".join(
            [f"s._cdc_seq.{m} = t._cdc_seq.{m}" for m, _ in SEQ_FIELDS[:k]] + [f"s._cdc_seq.{n} > t._cdc_seq.{n}"]
        )
        for k, (n, _) in enumerate(SEQ_FIELDS)
    )
    rust_s = []
    for i in range(merges, 2 * merges):
        lo = rows - batch // 2 + i * batch
        source = frame(lo, lo + batch, i + 1).persist()
        source.count()
        t0 = time.monotonic()
        arrow = source.toArrow()
        table = DeltaTable(path)
        if (table.transaction_version("bench:rs") or 0) < i + 1:
            table.merge(
                arrow,
                "t.id = s.id",
                source_alias="s",
                target_alias="t",
                commit_properties=CommitProperties(app_transactions=[Transaction("bench:rs", i + 1)]),
            ).when_matched_update_all(predicate=newer).when_not_matched_insert_all().execute()
        rust_s.append(time.monotonic() - t0)
        source.unpersist()
    final = spark.read.format("delta").load(path)
    expected = rows - batch // 2 + 2 * merges * batch
    assert final.count() == expected, (final.count(), expected)
    return {
        "table_rows": rows,
        "batch_rows": batch,
        "merges": merges,
        "spark_merge_s_median": round(statistics.median(spark_s), 3),
        "spark_merge_jvm_cpu_s_median": round(statistics.median(spark_cpu), 2),
        "delta_rs_merge_s_median": round(statistics.median(rust_s), 3),
        "spark_vs_delta_rs": round(statistics.median(spark_s) / statistics.median(rust_s), 1),
    }


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- the nightly snapshot over many tables ---------------------------------------------------------


def part_snapshot(spark: Any, folder: Path, rows: int) -> dict[str, Any]:
    one = snapshot_seconds(spark, folder / "snap1", 1, rows)
    many = snapshot_seconds(spark, folder / "snap100", 100, rows)
    return {
        "rows_per_table": rows,
        "snapshot_1_table_s": round(one, 2),
        "snapshot_100_tables_s": round(many, 2),
        "snapshot_tables_ratio": round(many / one, 2),
    }


def snapshot_seconds(spark: Any, root: Path, tables: int, rows: int) -> float:
    """Wall time of the nightly snapshot of ``tables`` Delta tables of ``rows`` rows each (no stock export)."""
    from pyspark.sql import functions as F

    from cdc_delta import columns as C
    from cdc_delta.config import parse_config
    from cdc_delta.delta.tables import create_table, table_schema
    from cdc_delta.snapshot.run import run_snapshot
    from tests.delta_rows import write_as_merged

    business = (("id", "bigint"), ("customer", "string"), ("amount", "decimal(10,2)"))
    past_cutoff_ms = int(dt.datetime(2026, 3, 2, 1, tzinfo=dt.timezone.utc).timestamp() * 1000)
    names = [f"snap.t{i:03d}" for i in range(tables)]
    config = parse_config(
        {
            "app_id": "bench",
            "storage": {"root": str(root)},
            "snapshot": {"database": f"bench_{root.name}", "idle_grace_minutes": 0},
            "tables": [{"name": n, "topics": [f"bench.{n}"], "key": ["id"]} for n in names],
        }
    )
    schema = table_schema(business)
    values = {
        "id": F.col("id"),
        "customer": F.concat(F.lit("customer-"), (F.col("id") % 1000).cast("string")),
        "amount": (F.col("id") % 100_000 / 100).cast("decimal(10,2)"),
        C.DELETED: F.lit(False),
        C.SOURCE_TS: F.timestamp_millis(F.lit(past_cutoff_ms)),
    }
    out = spark.range(rows).select(
        *[values.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name) for f in schema.fields]
    )
    for name in names:
        create_table(spark, config.storage.table_path(config.table(name)), business)
    positions = {f"bench.{n}": {"0": past_cutoff_ms} for n in names}
    write_as_merged(spark, config, {n: out for n in names}, positions)
    return timed(lambda: run_snapshot(spark, config, dt.date(2026, 3, 1), lambda: None))


# --- main ----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--label", default="current", help="'baseline' keeps the run under baseline")
    parser.add_argument("--decode-events", type=int, default=200_000)
    parser.add_argument("--batch-events", type=int, default=10_000)
    parser.add_argument("--batch-repeats", type=int, default=3)
    parser.add_argument("--read-events", type=int, default=200_000)
    parser.add_argument("--sustained-events", type=int, default=150_000)
    parser.add_argument("--sustained-batch", type=int, default=50_000)
    parser.add_argument("--latency-seconds", type=int, default=120)
    parser.add_argument(
        "--latency-rate",
        type=float,
        help="events/s for the latency part (default: half the 100-table sustained rate of this run, "
        "else of bench/results/throughput.json)",
    )
    parser.add_argument("--snapshot-rows", type=int, default=10_000)
    parser.add_argument("--port", type=int, default=19292)
    args = parser.parse_args()
    parts = [p for p in args.parts.split(",") if p]
    figures: dict[str, Any] = {}
    with native_broker(args.port, "cdc-throughput-") as (folder, bootstrap):
        from cdc_delta.config import SparkConfig, parse_config
        from cdc_delta.metastore import metastore_conf
        from cdc_delta.spark_session import build_session

        hive = metastore_conf(
            parse_config(
                {
                    "app_id": "bench",
                    "storage": {"root": str(folder)},
                    "tables": [{"name": "t", "topics": ["t"], "key": ["id"]}],
                }
            )
        )
        spark = build_session(SparkConfig(master="local[2]", shuffle_partitions=2, conf=SPARK_CONF), hive)
        if "decode" in parts:
            figures["decode"] = part_decode(spark, bootstrap, folder, args.decode_events)
            print(json.dumps(figures["decode"]), flush=True)
        if "batch" in parts:
            figures["batch"] = part_batch(spark, bootstrap, folder, args.batch_events, args.batch_repeats)
            print(json.dumps(figures["batch"]), flush=True)
        if "batch1000" in parts:
            # Another batch size is kept beside the headline's (10k events), not in its place.
            key = "batch1000" if args.batch_events == 10_000 else f"batch1000_{args.batch_events}_events"
            figures[key] = part_batch_1000(spark, bootstrap, folder, args.batch_events, args.batch_repeats)
            print(json.dumps(figures[key]), flush=True)
        if "newtables" in parts:
            figures["newtables"] = part_new_tables(spark, bootstrap, folder, args.batch_events)
            print(json.dumps(figures["newtables"]), flush=True)
        if "read" in parts:
            figures["read"] = part_read(spark, bootstrap, folder, args.read_events, args.batch_repeats)
            print(json.dumps(figures["read"]), flush=True)
        if "merge" in parts:
            figures["merge"] = part_merge(spark, folder, args.snapshot_rows)
            print(json.dumps(figures["merge"]), flush=True)
        if "snapshot" in parts:
            figures["snapshot"] = part_snapshot(spark, folder, args.snapshot_rows)
            print(json.dumps(figures["snapshot"]), flush=True)
        spark.stop()
        if "sustained" in parts:
            runs = {}
            every_batch = {"max_delay_seconds": 0}  # before the two phases: every table merged every batch
            for key, server, tables, events, batch, merge in (
                ("1_table", "s1", 1, args.sustained_events, args.sustained_batch, None),
                ("100_tables", "s100", 100, args.sustained_events // 2, args.sustained_batch // 2, None),
                (
                    "100_tables_every_batch",
                    "s100e",
                    100,
                    args.sustained_events // 2,
                    args.sustained_batch // 2,
                    every_batch,
                ),
            ):
                runs[key] = sustained(bootstrap, folder, server, tables, events, batch, merge)
                print(json.dumps(runs[key]), flush=True)
            figures["sustained"] = runs
        if "sustained1000" in parts:
            ingest_only = {"in_stream": False}
            figures["sustained1000"] = {
                key: sustained(
                    bootstrap, folder, server, tables, 2 * args.sustained_events, args.sustained_batch, ingest_only, 1
                )
                for key, server, tables in (("1_table", "i1", 1), ("1000_tables", "i1000", 1000))
            }
            print(json.dumps(figures["sustained1000"]), flush=True)
        if "latency" in parts:
            rate = args.latency_rate or sustained_100_tables(figures) / 2
            figures["latency"] = part_latency(bootstrap, folder, rate, args.latency_seconds)
            print(json.dumps(figures["latency"]), flush=True)
    save(figures, args.label)


def sustained_100_tables(figures: dict[str, Any]) -> float:
    """The 100-table sustained events/s of this run, else of the results file."""
    if "sustained" in figures:
        return float(figures["sustained"]["100_tables"]["events_per_s"])
    previous = json.loads(RESULTS.read_text())["results"]
    return float(previous["ingest_events_per_s_100_tables"])


def headline(figures: dict[str, Any]) -> dict[str, Any]:
    """The figures under the keys issue 26 names (None where the part did not run)."""
    s, b, lat = figures.get("sustained", {}), figures.get("batch", {}), figures.get("latency", {})
    alone = figures.get("sustained1000", {})
    alone_one = alone.get("1_table", {}).get("events_per_s")
    thousand = alone.get("1000_tables", {}).get("events_per_s")
    one = s.get("1_table", {}).get("events_per_s")
    many = s.get("100_tables", {}).get("events_per_s")
    every = s.get("100_tables_every_batch", {}).get("events_per_s")
    return {
        "decode_speedup": figures.get("decode", {}).get("decode_speedup"),
        "ingest_events_per_s_1_table": one,
        "ingest_events_per_s_100_tables": many,
        "ingest_events_per_s_100_tables_every_batch": every,
        "two_phase_speedup_100_tables": round(many / every, 1) if many and every else None,
        "tables_ingest_ratio": round(many / one, 2) if many and one else None,
        "partitions_batch_ratio": b.get("partitions_batch_ratio"),
        "tables_batch_ratio": b.get("tables_batch_ratio"),
        "tables_1000_batch_ratio": figures.get("batch1000", {}).get("tables_1000_batch_ratio"),
        "new_tables_batch_ratio": figures.get("newtables", {}).get("new_tables_batch_ratio"),
        "ingest_to_kafka_read_ratio": figures.get("read", {}).get("ingest_to_kafka_read_ratio"),
        "ingest_events_per_s_1000_tables": thousand,
        "tables_1000_ingest_ratio": round(thousand / alone_one, 2) if thousand and alone_one else None,
        "landed_p50_s": lat.get("landed_p50_s"),
        "landed_p99_s": lat.get("landed_p99_s"),
        "merged_lag_p50_s": lat.get("merged_lag_p50_s"),
        "merged_lag_p99_s": lat.get("merged_lag_p99_s"),
        "snapshot_tables_ratio": figures.get("snapshot", {}).get("snapshot_tables_ratio"),
    }


def save(figures: dict[str, Any], label: str) -> None:
    previous = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    runs = {"baseline": previous.get("baseline"), "current": previous.get("results")}
    key = label if label == "baseline" else "current"
    details = {**(runs[key] or {}).get("details", {}), **figures}  # parts run separately add up
    runs[key] = {**headline(details), "details": details, "measured_at": dt.datetime.now(dt.timezone.utc).isoformat()}
    current = runs["current"] or {}
    write_results(
        RESULTS,
        "throughput",
        current,
        baseline=runs["baseline"],
        **{k: v for k, v in current.items() if k not in ("details", "measured_at")},
    )
    print(json.dumps({k: v for k, v in current.items() if k != "details"}, indent=2))


if __name__ == "__main__":
    main()
