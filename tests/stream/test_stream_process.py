"""The streaming application against a real Kafka broker, run as a separate process."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
import yaml
from confluent_kafka import Producer

from cdc_delta.config import load_config
from cdc_delta.demo.batches import DEMO_TABLES
from cdc_delta.demo.generator import ChangeGenerator, topic_of
from cdc_delta.demo.producer import ensure_topics, produce
from cdc_delta.kafka.offsets import partition_lag
from tests.delta_rows import assert_demo_tables_equal_source, landings_per_commit
from tests.services import ROOT, StreamProcess, caught_up_here, free_port, wait_for, write_config

pytestmark = [pytest.mark.integration, pytest.mark.spark]

# A line of the JVM's log (log4j's format: level WARN), or of Spark's default log profile.
JVM_LINE = re.compile(r"^(\S+ \S+ (WARN|ERROR|FATAL) |\d\d/\d\d/\d\d \S+ )")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cdc_delta.cli", *args], capture_output=True, text=True, timeout=180, cwd=ROOT
    )


def generate(bootstrap: str, server: str, events: int, seed: int, partitions: int = 3) -> ChangeGenerator:
    generator = ChangeGenerator(DEMO_TABLES, seed=seed, tombstones=True, server=server)
    ensure_topics(bootstrap, [topic_of(t, server) for t in DEMO_TABLES], partitions)
    produce(bootstrap, generator.changes(events))
    return generator


def assert_tables_equal_source(spark, config_path: Path, generator: ChangeGenerator) -> None:
    """Live rows equal the source's rows; every deleted key is a soft-deleted row; nothing else (read by Spark)."""
    config = load_config(config_path, env={})

    def rows_of(name: str) -> list[dict]:
        path = config.storage.table_path(config.table(name))
        return [r.asDict() for r in spark.read.format("delta").load(path).collect()]

    assert_demo_tables_equal_source(rows_of, generator)


def test_stream_catches_up_and_equals_the_source(spark, kafka_bootstrap: str, tmp_path: Path) -> None:
    server = "e2e"
    generator = generate(kafka_bootstrap, server, events=1500, seed=1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topic_of(DEMO_TABLES[0], server), key=b'{"id": -1}', value=b"{this is not json")
    producer.flush(30)
    config = write_config(tmp_path, kafka_bootstrap, server)
    stream = StreamProcess(config, tmp_path / "stream.log")
    assert stream.run_until_caught_up() == 0, stream.log.read_text()[-3000:]
    assert stream.batch_lines(), "no per-batch log line"
    # Quiet in normal operation, from the JVM's start on: no warning of Spark, Kafka, Delta or Hadoop
    # (the JVM's own line on the incubator module it is started with aside).
    log = stream.log.read_text(errors="replace")
    jvm_lines = [line for line in log.splitlines() if JVM_LINE.match(line) or "log4j" in line]
    assert jvm_lines == [], jvm_lines
    assert_tables_equal_source(spark, config, generator)
    cfg = load_config(config, env={})
    dead = spark.read.format("delta").load(cfg.storage.dead_letters).collect()
    assert [bytes(r["value"]) for r in dead] == [b"{this is not json"]
    assert "not valid UTF-8 JSON" in dead[0]["reason"]
    lags = partition_lag(kafka_bootstrap, cfg.app_id, [], cfg.kafka.topic_pattern)
    assert lags and all(lag.lag == 0 for lag in lags), lags


def test_kill_9_three_times_loses_and_duplicates_nothing(spark, kafka_bootstrap: str, tmp_path: Path) -> None:
    server = "crash"
    generator = generate(kafka_bootstrap, server, events=3000, seed=2)
    config = write_config(tmp_path, kafka_bootstrap, server, max_per_batch=300)
    base = config.read_text()
    stream = StreamProcess(config, tmp_path / "stream.log")
    rng = random.Random(7)
    # The runs merge differently, so that the kills can land between a landing and its merge (the
    # defaults: nothing merged before the last run), inside a batch's merges (every table merged in every
    # batch: most of a batch's time) and inside the merger's thread beside the ingest (a table due as soon
    # as one change is pending). Where a kill lands is random; that merges ran in the killed runs is checked.
    merges = [None, "{max_delay_seconds: 0}", "{max_delay_seconds: 1, min_events: 1}"]
    for attempt, merge in enumerate(merges):
        config.write_text(base + (f"merge: {merge}\n" if merge else ""))
        done = len(stream.batch_lines())
        stream.start()
        # Let each run make progress, then kill it at a random moment: mid-batch or between batches.
        wait_for(lambda done=done: len(stream.batch_lines()) > done, 240, f"a batch of run {attempt + 1}")
        time.sleep(rng.uniform(0, 6))
        stream.kill9()
    killed = stream.log.read_text()
    assert "merge through landing" in killed, "no merge ran in the runs killed"
    config.write_text(base)
    caught_up_here(config)  # the restart after the last kill, in the tests' JVM: no start to pay
    assert_tables_equal_source(spark, config, generator)
    cfg = load_config(config, env={})
    for table in cfg.tables:
        ids = landings_per_commit(spark, cfg.storage.table_path(table))
        assert ids == sorted(set(ids)), f"a batch was committed twice to {table.name}: {ids}"


def test_broker_restart_loses_nothing(spark, native_kafka, tmp_path: Path) -> None:
    server = "restart"
    bootstrap = native_kafka.bootstrap
    first = generate(bootstrap, server, events=800, seed=3)
    config = write_config(tmp_path, bootstrap, server)
    stream = StreamProcess(config, tmp_path / "stream.log")
    proc = stream.start()
    wait_for(lambda: stream.batch_lines(), 180, "the first batch")
    native_kafka.stop()
    time.sleep(5)
    native_kafka.start()
    # The same generator goes on: its state is the expected state of both rounds together.
    produce(bootstrap, first.changes(800))
    if proc.poll() is None:  # still running: it recovered on its own, or stops at our request
        stream.proc.terminate()
        proc.wait(timeout=120)
    caught_up_here(config)
    assert_tables_equal_source(spark, config, first)


def test_sigterm_stops_after_the_current_batch(spark, kafka_bootstrap: str, tmp_path: Path) -> None:
    server = "sigterm"
    generator = generate(kafka_bootstrap, server, events=1500, seed=4)
    config = write_config(tmp_path, kafka_bootstrap, server, max_per_batch=500)
    port = free_port()
    config.write_text(config.read_text() + f"metrics: {{port: {port}, host: 127.0.0.1}}\n")
    stream = StreamProcess(config, tmp_path / "stream.log")
    proc = stream.start()
    wait_for(lambda: stream.batch_lines(), 240, "the first batch")
    # the process serves its metrics and health while it runs
    health = requests.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
    assert health.status_code == 200 and health.text.startswith("ok: last batch"), health.text
    scraped = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    assert re.search(r'^cdc_delta_batches_total\{result="ok"\} [1-9]', scraped, re.M), scraped[:2000]
    # one stream per app and lake: a second stream, and a merge job (this stream merges too), are refused
    # before they start Spark, in one line naming the holder; status names it
    for command in ("stream", "merge"):
        second = cli(command, "--config", str(config))
        assert second.returncode == 2 and second.stderr.count("\n") == 1, second.stderr[-2000:]
        assert f"already runs on this lake: stream pid {proc.pid} on " in second.stderr, second.stderr
    running = cli("status", "--config", str(config))
    assert f"stream: running: stream pid {proc.pid} on " in running.stdout, running.stdout[-2000:]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=180) == 0
    log = stream.log.read_text()
    assert "stopping after the current batch" in log and "stream stopped on request" in log
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]  # a stop on request is no error
    # SIGTERM to the whole process group (systemd's default KillMode): the JVM, in a group of its own, is
    # not hit; the batch finishes and the stream stops as cleanly
    produce(kafka_bootstrap, generator.changes(1000))
    done = len(stream.batch_lines())
    grouped = stream.start(own_group=True)
    wait_for(lambda: len(stream.batch_lines()) > done, 240, "a batch of the run stopped as a group")
    os.killpg(grouped.pid, signal.SIGTERM)
    assert grouped.wait(timeout=180) == 0, stream.log.read_text()[len(log) :][-3000:]
    group_log = stream.log.read_text()[len(log) :]
    assert "stopping after the current batch" in group_log and "stream stopped on request" in group_log
    assert "Traceback" not in group_log and "Py4J" not in group_log, group_log[-3000:]
    before = len(stream.batch_lines())
    caught_up = caught_up_here(config)  # the start after the stop, in the tests' JVM: no start to pay
    resumed = [line for line in caught_up.splitlines() if "cdc_delta.stream.query: batch" in line]
    assert resumed and f"batch {before}:" in resumed[0], "the first batch after a graceful stop is a new one"
    assert "replayed" not in "\n".join(resumed)
    assert_tables_equal_source(spark, config, generator)
    status = cli("status", "--config", str(config))
    assert status.returncode == 0, status.stderr[-2000:]
    assert "stream: not running (no lease held)" in status.stdout, status.stdout[-2000:]
    assert "total lag: 0 events over 9 partitions" in status.stdout
    lines = [line.split() for line in status.stdout.splitlines() if line.startswith(f"{server}.")]
    # end == group offset, lag 0; the Delta position is the last table commit's (a batch of only
    # tombstones commits to no table, so it may trail the end by those).
    assert len(lines) == 9, status.stdout
    assert all(cols[2] == cols[4] and cols[5] == "0" and 0 < int(cols[3]) <= int(cols[2]) for cols in lines), lines
    assert "inventory.orders" in status.stdout and "dead letters: none" in status.stdout
    # the table lines (read by delta-rs, no Spark) count what Spark reads
    cfg = load_config(config, env={})
    for table in cfg.tables:
        df = spark.read.format("delta").load(cfg.storage.table_path(table))
        row = next(line.split() for line in status.stdout.splitlines() if line.startswith(table.name + " "))
        assert (int(row[-2]), int(row[-1])) == (df.count(), df.where("_cdc_deleted").count()), row


def test_a_lost_broker_is_said_in_one_line_then_a_stop_is_clean_or_the_stream_gives_up(
    native_kafka, tmp_path: Path
) -> None:
    bootstrap = native_kafka.bootstrap
    generate(bootstrap, "lost", events=300, seed=5)
    config = write_config(tmp_path, bootstrap, "lost")
    data = yaml.safe_load(config.read_text())

    def run(timeout_s: float, log: str, batches: int) -> tuple[subprocess.Popen[bytes], StreamProcess]:
        data["kafka"]["unreachable_timeout_seconds"] = timeout_s
        config.write_text(yaml.safe_dump(data))
        stream = StreamProcess(config, tmp_path / log)
        proc = stream.start()
        wait_for(lambda: "stream it-lost started" in stream.log.read_text(), 180, "the stream's start")
        # The broker goes once the batches are done (the second run has nothing new): what is tested is
        # the wait for a broker, not a batch cut off in the middle.
        wait_for(lambda: len(stream.batch_lines()) >= batches, 180, "the first batch")
        time.sleep(2)
        native_kafka.stop()
        return proc, stream

    # Waiting for the broker (timeout 0: for ever): said once, and SIGTERM ends it at once and cleanly.
    proc, stream = run(0, "wait.log", batches=1)
    wait_for(lambda: f"cannot reach Kafka at {bootstrap}" in stream.log.read_text(), 90, "the one line")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    log = stream.log.read_text()
    assert "stream stopped on request" in log, log[-3000:]
    assert log.count(f"cannot reach Kafka at {bootstrap}") == 1
    assert "Traceback" not in log and "\tat org.apache" not in log and "NetworkClient" not in log, log[-3000:]

    # Giving up after kafka.unreachable_timeout_seconds: exit 69 (unavailable), the last line names the brokers.
    native_kafka.start()
    proc, stream = run(8, "give-up.log", batches=0)
    assert proc.wait(timeout=150) == 69
    log = stream.log.read_text()
    last = log.strip().splitlines()[-1]
    assert last.startswith(f"cdc-delta: error: cannot reach Kafka at {bootstrap} for "), log[-3000:]
    assert "(kafka.unreachable_timeout_seconds 8)" in last and "resumes from its checkpoint" in last
    assert "Traceback" not in log and "\tat org.apache" not in log and "NetworkClient" not in log, log[-3000:]
