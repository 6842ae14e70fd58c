"""Issue 25's fault matrix, against the real broker and the command line's stream: a poison record (JSON
and Avro), a lost, older or corrupt checkpoint, a table that fails, a table deleted under the stream,
and column names of every kind. Each case ends with the tables equal to the oracle (the source's last
state per key), the exact message and exit code, and a restart that changes nothing.

The stream runs share one lake per scenario: a module fixture drives each scenario through its runs,
the tests assert what each run left. Each run is the command line's ``cdc-delta stream
--until-caught-up`` in the tests' process and JVM (``cdc_delta_here``): a JVM of its own per run cost
the suite about 20 s a run, and nothing here depends on the process (test_stream_process kills and
signals real ones)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer

from cdc_delta.config import AppConfig, load_config
from cdc_delta.demo.generator import Column, SourceTable, envelope
from cdc_delta.demo.producer import ensure_topics
from tests.services import assert_caught_up_but_for, cdc_delta_here

pytestmark = [pytest.mark.integration, pytest.mark.spark]

POISON = b"[" * 100_000 + b"]" * 100_000
"""A value nested deeper than Python's JSON parser recurses: it failed every batch, for ever."""


def source(db: str, table: str, *names: str) -> SourceTable:
    return SourceTable(db, table, (Column("id", "int64"), *(Column(n, "string") for n in names)))


@dataclass
class Source:
    """A simulated source: tables, their rows (the oracle) and the binlog position of the next change."""

    server: str
    rows: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    deleted: dict[str, set[int]] = field(default_factory=dict)
    pos: int = 4

    def topic(self, table: SourceTable) -> str:
        return f"{self.server}.{table.db}.{table.table}"

    def change(self, table: SourceTable, op: str, row: dict[str, Any]) -> tuple[str, bytes, bytes]:
        """The Kafka record of one change, applied to the oracle."""
        self.pos += 100
        live = self.rows.setdefault(table.table, {})
        gone = self.deleted.setdefault(table.table, set())
        before = live.get(row["id"]) if op in ("u", "d") else None
        if op == "d":
            live.pop(row["id"], None)
            gone.add(row["id"])
        else:
            live[row["id"]] = row
            gone.discard(row["id"])
        image = envelope(table, op, before if op != "d" else row, None if op == "d" else row, pos=self.pos)
        return self.topic(table), json.dumps({"id": row["id"]}).encode(), json.dumps(image).encode()


def send(bootstrap: str, records: list[tuple[str, bytes | None, bytes | None]]) -> None:
    ensure_topics(bootstrap, sorted({t for t, _, _ in records}), 1)
    producer = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 10_000_000})
    for topic, key, value in records:
        producer.produce(topic, key=key, value=value)
    producer.flush(30)


def write_config(folder: Path, bootstrap: str, server: str, tables: list[dict[str, Any]], **extra: Any) -> Path:
    data = {
        "app_id": f"it-{server}",
        "kafka": {
            "bootstrap_servers": bootstrap,
            "topic_pattern": "^" + server + r"\..*",
            "starting_offsets": "earliest",
            **extra.pop("kafka", {}),
        },
        "spark": {"master": "local[2]", "shuffle_partitions": 2, "conf": {"spark.ui.enabled": "false"}},
        "storage": {"root": str(folder / "lake"), **extra.pop("storage", {})},
        "trigger_interval": "1 second",
        "tables": tables,
        **extra,
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "cdc.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@dataclass
class Run:
    """One command of the CLI: its exit code, stderr's last line and what it wrote."""

    code: int
    last_line: str
    log: str


def cli(config: Path, *args: str) -> Run:
    done = cdc_delta_here(config, *args)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return Run(done.returncode, lines[-1] if lines else "", done.stdout + done.stderr)


def stream(config: Path) -> Run:
    return cli(config, "stream", "--until-caught-up")


def caught_up_but_for(run: Run, *stopped: str) -> None:
    assert_caught_up_but_for(run.code, run.log, *stopped)


def table_rows(spark: Any, cfg: AppConfig, name: str) -> tuple[dict[int, dict[str, Any]], set[int]]:
    """(live rows by id without the metadata columns, soft-deleted ids)."""
    df = spark.read.format("delta").load(cfg.storage.table_path(cfg.table(name)))
    rows = [r.asDict() for r in df.collect()]
    live = {r["id"]: {k: v for k, v in r.items() if not k.startswith("_cdc_")} for r in rows if not r["_cdc_deleted"]}
    return live, {r["id"] for r in rows if r["_cdc_deleted"]}


def dead_letters(spark: Any, cfg: AppConfig) -> list[dict[str, Any]]:
    return [r.asDict() for r in spark.read.format("delta").load(cfg.storage.dead_letters).collect()]


def expected(src: Source, table: SourceTable) -> tuple[dict[int, dict[str, Any]], set[int]]:
    return src.rows.get(table.table, {}), src.deleted.get(table.table, set())


# --- one lake: a poison record, a failing table, a table deleted under the stream, column names ---------

GOOD = source("db", "good", "name")
BROKEN = source("db", "broken", "name")
BRACES = source("db", "braces", "{text}", "name")
ODD = ("a.b", "it's", 'say"hi"', "ü名🙂", "$c", "x\\y")
NAMES = source("db", "names", *ODD)
GONE = source("db", "gone", "name")
TORN = source("db", "torn", "name")


@dataclass
class Lake:
    src: Source
    config: Path
    cfg: AppConfig
    runs: dict[str, Run] = field(default_factory=dict)
    seen: dict[str, Any] = field(default_factory=dict)


@pytest.fixture(scope="module")
def lake(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Iterator[Lake]:
    folder = tmp_path_factory.mktemp("faults")
    src = Source("fault1")
    every = (GOOD, BROKEN, BRACES, NAMES, GONE, TORN)
    tables = [{"name": f"db.{t.table}", "topics": [src.topic(t)], "key": ["id"]} for t in every]
    config = write_config(folder, kafka_bootstrap, src.server, tables)
    lk = Lake(src, config, load_config(config, env={}))

    # 1. Five good changes around a poison record; odd column names.
    first = [src.change(GOOD, "c", {"id": i, "name": f"g{i}"}) for i in range(1, 4)]
    first.append((src.topic(GOOD), b'{"id": 99}', POISON))
    first += [src.change(GOOD, "u", {"id": 1, "name": "g1b"}), src.change(GOOD, "d", {"id": 2, "name": "g2"})]
    first += [src.change(BROKEN, "c", {"id": i, "name": f"b{i}"}) for i in (1, 2)]
    first += [src.change(BRACES, "c", {"id": 1, "{text}": "t", "name": "n"})]
    first += [src.change(NAMES, "c", {"id": i, **{n: f"{n}={i}" for n in ODD}}) for i in (1, 2)]
    first += [src.change(GONE, "c", {"id": i, "name": f"v{i}"}) for i in (1, 2, 3)]
    first += [src.change(TORN, "c", {"id": i, "name": f"t{i}"}) for i in (1, 2)]
    send(kafka_bootstrap, first)
    lk.runs["first"] = stream(config)
    lk.seen["first_dead"] = len(dead_letters(spark, lk.cfg))
    lk.seen["first_good"] = table_rows(spark, lk.cfg, "db.good")

    # 2. A table whose data files were lost (its MERGE fails), a table deleted under the stream (backups
    # kept of both), then more changes.
    broken_path = Path(lk.cfg.storage.table_path(lk.cfg.table("db.broken")))
    lost_files = folder / "broken-files"
    lost_files.mkdir()
    for data in broken_path.glob("*.parquet"):
        shutil.move(data, lost_files / data.name)
    gone_path = Path(lk.cfg.storage.table_path(lk.cfg.table("db.gone")))
    shutil.copytree(gone_path, folder / "gone-backup")
    shutil.rmtree(gone_path)
    # A table whose Delta log ends in a half-written commit file (a writer killed mid-put on a store that
    # shows partial files).
    torn_log = Path(lk.cfg.storage.table_path(lk.cfg.table("db.torn"))) / "_delta_log"
    torn = torn_log / f"{len(list(torn_log.glob('*.json'))):020d}.json"
    torn.write_text('{"commitInfo":{"timestamp":17')
    later = [src.change(BROKEN, "u", {"id": i, "name": f"b{i}b"}) for i in (1, 2)]
    later += [src.change(GONE, "u", {"id": 1, "name": "v1b"}), src.change(GONE, "c", {"id": 4, "name": "v4"})]
    later += [src.change(GOOD, "c", {"id": 4, "name": "g4"}), src.change(TORN, "u", {"id": 1, "name": "t1b"})]
    send(kafka_bootstrap, later)
    lk.runs["faults"] = stream(config)
    lk.seen["gone_exists"] = gone_path.exists()
    lk.seen["faults_good"] = table_rows(spark, lk.cfg, "db.good")
    lk.runs["status"] = cli(config, "status")
    lk.runs["status_json"] = cli(config, "status", "--json", "--max-merge-lag", "100000")

    # 3. Recovery as the messages say: the lost files restored and the table resumed; the deleted
    # table restored from its backup; a restart merges what stayed pending.
    for data in lost_files.iterdir():
        shutil.move(data, broken_path / data.name)
    lk.runs["resume"] = cli(config, "resume-table", "--table", "db.broken")
    torn.unlink()
    lk.runs["resume_torn"] = cli(config, "resume-table", "--table", "db.torn")
    shutil.copytree(folder / "gone-backup", gone_path)
    lk.runs["restored"] = stream(config)
    # 4. A restart with nothing new reads nothing again (not the poison record either) and writes nothing.
    lk.seen["restored_dead"] = len(dead_letters(spark, lk.cfg))
    lk.runs["last"] = stream(config)
    yield lk


def test_a_poison_record_is_a_dead_letter_and_the_batch_goes_on(spark: Any, lake: Lake) -> None:
    first = lake.runs["first"]
    caught_up_but_for(first, "db.braces")
    assert first.last_line.endswith(
        "cdc-delta: caught up but for 1 stopped table(s), whose changes stay pending in the changelog: fix each "
        "cause, then `cdc-delta resume-table --table <name>` and run again"
    ), first.last_line
    assert lake.seen["first_good"] == ({1: {"id": 1, "name": "g1b"}, 3: {"id": 3, "name": "g3"}}, {2})
    poison = [r for r in dead_letters(spark, lake.cfg) if r["offset"] == 3 and r["topic"] == "fault1.db.good"]
    assert len(poison) == 1 and bytes(poison[0]["value"]) == POISON
    assert poison[0]["reason"].startswith("cannot decode the record: RecursionError: maximum recursion depth")
    # A restart reads nothing again and writes nothing (test_after_the_faults_...: no batch at all).
    caught_up_but_for(lake.runs["last"], "db.braces")
    assert lake.seen["restored_dead"] == lake.seen["first_dead"]
    assert len(dead_letters(spark, lake.cfg)) == lake.seen["first_dead"]


def test_a_failing_table_stops_alone_and_resumes_after_its_fix(spark: Any, lake: Lake) -> None:
    run = lake.runs["faults"]
    caught_up_but_for(run, "db.braces", "db.broken", "db.gone", "db.torn")
    stopped = [line for line in run.log.splitlines() if "table db.broken failed: " in line]
    assert stopped, run.log[-3000:]
    assert "does not exist" in stopped[0] or "FileNotFound" in stopped[0], stopped[0]
    assert stopped[0].endswith(
        "The table is stopped and its changes stay pending in the changelog; fix the cause, then `cdc-delta "
        "resume-table --table db.broken` and restart the stream: it merges them (2 changes pending)"
    )
    status = lake.runs["status"]
    assert status.code == 1 and "stopped: db.broken: table db.broken failed: " in status.log, status.log
    assert "unreadable: db.broken: " in status.log and "not found" in status.log, status.log
    # Its changes stay pending, and those of db.braces and of the deleted table (all 5 of its changes: no
    # table holds any); status counts them.
    assert "merges: 8 changes pending in 3 tables" in status.log, status.log
    # The same as JSON, for a probe or a supervisor: exit 1 while a table is stopped.
    as_json = lake.runs["status_json"]
    assert as_json.code == 1, as_json.log
    reported, _ = json.JSONDecoder().raw_decode(as_json.log)  # stdout's document, then stderr
    tables = {t["table"]: t for t in reported["tables"]}
    assert tables["db.broken"]["stopped_reason"].startswith("table db.broken failed: ")
    assert tables["db.broken"]["pending"] == 2 and tables["db.good"]["stopped_reason"] is None
    assert sum(t["pending"] for t in tables.values()) == 8 and reported["dead_letters"] == 1
    problems = [p.split(":")[0] for p in reported["problems"]]
    assert problems == ["stopped", "unreadable", "stopped", "stopped", "stopped", "unreadable"], problems
    gone = lake.cfg.storage.table_path(lake.cfg.table("db.gone"))
    assert tables["db.gone"]["stopped_reason"].endswith(
        f"but there is no Delta table at {gone} now: the stream stops it; restore the table from a backup, or "
        "accept the loss with `cdc-delta resume-table --table db.gone`"
    ), tables["db.gone"]
    # The failing table did not fail the merge of the others.
    assert lake.seen["faults_good"][0][4] == {"id": 4, "name": "g4"}
    resume = lake.runs["resume"]
    assert resume.code == 0, resume.log
    assert "table db.broken: stopped flag cleared (it was: table db.broken failed: " in resume.log
    caught_up_but_for(lake.runs["restored"], "db.braces")
    assert table_rows(spark, lake.cfg, "db.broken") == expected(lake.src, BROKEN)
    # Nothing went to the dead letters but the poison record.
    assert lake.seen["first_dead"] == 1 and len(dead_letters(spark, lake.cfg)) == 1


def test_a_table_with_a_torn_log_stops_alone_is_shown_by_status_and_resumes_as_its_stop_said(
    spark: Any, lake: Lake
) -> None:
    """Its stop cannot be written to the table (its log cannot be read): it is recorded in the lake, so that
    status shows why and resume-table finds it; status shows the other tables all the same."""
    stopped = [line for line in lake.runs["faults"].log.splitlines() if "table db.torn failed: " in line]
    assert stopped and "resume-table --table db.torn" in stopped[0], lake.runs["faults"].log[-3000:]
    path = lake.cfg.storage.table_path(lake.cfg.table("db.torn"))
    status = lake.runs["status"].log
    assert f"unreadable: db.torn: its Delta log at {path} cannot be read: " in status, status
    assert "stopped: db.torn: table db.torn failed: " in status, status
    good = next(line.split() for line in status.splitlines() if line.startswith("db.good "))
    assert good[-2:] == ["4", "1"], good  # the others shown: 4 rows, 1 soft-deleted
    resumed = lake.runs["resume_torn"]
    assert resumed.code == 0 and "table db.torn: stop record cleared (it was: table db.torn failed: " in resumed.log
    caught_up_but_for(lake.runs["restored"], "db.braces")
    assert table_rows(spark, lake.cfg, "db.torn") == expected(lake.src, TORN)


def test_a_table_deleted_under_the_stream_is_not_recreated(spark: Any, lake: Lake) -> None:
    run = lake.runs["faults"]
    assert not lake.seen["gone_exists"], "the deleted table was re-created holding only later changes"
    line = next(line for line in run.log.splitlines() if "table db.gone was deleted under the stream" in line)
    assert f"no Delta table at {lake.cfg.storage.table_path(lake.cfg.table('db.gone'))} now): it is stopped" in line
    assert line.endswith(
        "the stream then goes on by itself after a restart, merging what stayed pending), or accept the loss with "
        "`cdc-delta resume-table --table db.gone` (the table is then made anew from the changes the changelog still "
        "holds) and re-read the table from the source once the stream runs (`cdc-delta resnapshot --table db.gone "
        "--delete-missing`) (2 changes pending)"
    ), line
    # Restored from its backup, the table goes on by itself: its pending changes are merged.
    caught_up_but_for(lake.runs["restored"], "db.braces")
    assert table_rows(spark, lake.cfg, "db.gone") == expected(lake.src, GONE)


def test_any_column_name_decodes_or_stops_only_its_table(spark: Any, lake: Lake) -> None:
    assert table_rows(spark, lake.cfg, "db.names") == expected(lake.src, NAMES)
    columns = spark.read.format("delta").load(lake.cfg.storage.table_path(lake.cfg.table("db.names"))).columns
    assert columns[: len(ODD) + 1] == ["id", *ODD]
    first = lake.runs["first"].log
    assert "table db.braces: source column '{text}' has characters a Delta column name cannot hold ('{' '}')" in first
    assert "stopped: db.braces: table db.braces: source column '{text}'" in lake.runs["status"].log


def test_after_the_faults_the_lake_equals_the_source_and_a_restart_changes_nothing(spark: Any, lake: Lake) -> None:
    last = lake.runs["last"]
    caught_up_but_for(last, "db.braces")
    for table in (GOOD, BROKEN, NAMES, GONE, TORN):
        assert table_rows(spark, lake.cfg, f"db.{table.table}") == expected(lake.src, table), table.table
    assert "cdc_delta.stream.query: batch" not in last.log


# --- checkpoints: lost, lost with starting_offsets latest, an older copy, corrupt, a deleted lake ---------

ITEMS = source("db", "items", "name")


@dataclass
class Checkpoints:
    src: Source
    config: Path
    cfg: AppConfig
    runs: dict[str, Run] = field(default_factory=dict)
    rows: dict[str, Any] = field(default_factory=dict)


@pytest.fixture(scope="module")
def checkpoints(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Iterator[Checkpoints]:
    folder = tmp_path_factory.mktemp("checkpoints")
    src = Source("fault2")
    tables = [{"name": "db.items", "topics": [src.topic(ITEMS)], "key": ["id"]}]
    config = write_config(folder, kafka_bootstrap, src.server, tables)
    cfg = load_config(config, env={})
    ck = Checkpoints(src, config, cfg)
    checkpoint = Path(cfg.storage.root) / "_cdc_checkpoints" / cfg.app_id
    ids = iter(range(1, 1000))

    def ten() -> None:
        send(
            kafka_bootstrap,
            [src.change(ITEMS, "c", {"id": i, "name": f"i{i}"}) for i in [next(ids) for _ in range(10)]],
        )

    def snapshot(name: str) -> None:
        ck.rows[name] = table_rows(spark, cfg, "db.items")

    ten()
    ck.runs["first"] = stream(config)
    # Lost: the checkpoint folder deleted, ten new changes, a restart with starting_offsets latest (a new
    # checkpoint would start there, after the ten): the stream resumes from the consumer group instead.
    shutil.rmtree(checkpoint)
    ten()
    data = yaml.safe_load(config.read_text())
    data["kafka"]["starting_offsets"] = "latest"
    config.write_text(yaml.safe_dump(data))
    ck.runs["lost"] = stream(config)
    snapshot("lost")
    # An older copy restored.
    shutil.copytree(checkpoint, folder / "copy")
    ten()
    ck.runs["before_copy"] = stream(config)
    shutil.rmtree(checkpoint)
    shutil.copytree(folder / "copy", checkpoint)
    ten()
    ck.runs["older"] = stream(config)
    snapshot("older")
    # Corrupt: the latest offsets file overwritten.
    latest = max((p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    latest.write_text("garbage\n")
    ck.runs["corrupt"] = stream(config)
    ck.rows["corrupt_file"] = latest.name
    shutil.move(checkpoint, folder / "corrupt-aside")
    ten()
    ck.runs["after_corrupt"] = stream(config)
    snapshot("after_corrupt")
    yield ck


def test_a_lost_checkpoint_loses_nothing_and_resumes_from_the_group_not_from_latest(checkpoints: Checkpoints) -> None:
    ck = checkpoints
    assert ck.runs["first"].code == 0, ck.runs["first"].log[-3000:]
    lost = ck.runs["lost"]
    assert lost.code == 0, lost.log[-3000:]
    # The ten changes sent while the checkpoint was gone are there: starting_offsets latest would skip them.
    assert ck.rows["lost"] == ({i: {"id": i, "name": f"i{i}"} for i in range(1, 21)}, set())
    assert (
        f"checkpoint {ck.cfg.storage.root}/_cdc_checkpoints/it-fault2 is new but a stream has written the lake at"
        in lost.log
    )
    assert "resuming from consumer group it-fault2's committed offsets (1 partitions" in lost.log
    assert " replayed" not in lost.log


def test_an_older_copy_of_the_checkpoint_is_applied_again_not_skipped(checkpoints: Checkpoints) -> None:
    run = checkpoints.runs["older"]
    assert run.code == 0, run.log[-3000:]
    assert "is older than what the stream applied (consumer group it-fault2 is ahead of it on 1 partitions" in run.log
    assert checkpoints.rows["older"] == ({i: {"id": i, "name": f"i{i}"} for i in range(1, 41)}, set())


def test_a_corrupt_checkpoint_is_named_with_its_recovery(checkpoints: Checkpoints) -> None:
    ck = checkpoints
    run = ck.runs["corrupt"]
    location = f"{ck.cfg.storage.root}/_cdc_checkpoints/it-fault2"
    assert run.code == 2, run.log[-3000:]
    assert run.last_line.startswith(
        f"cdc-delta: error: checkpoint {location} is corrupt (offsets/{ck.rows['corrupt_file']} cannot be read: "
        "org.apache.hadoop.fs.ChecksumException: Checksum error: "
    ), run.last_line
    assert run.last_line.endswith(
        f"Move it aside (mv {location} {location}.corrupt) and start the stream again: it resumes from the "
        "consumer group's committed offsets, and what it re-applies is harmless (the ordering guard)"
    )
    after = ck.runs["after_corrupt"]
    assert after.code == 0, after.log[-3000:]
    assert ck.rows["after_corrupt"] == ({i: {"id": i, "name": f"i{i}"} for i in range(1, 51)}, set())


def test_a_checkpoint_whose_lake_was_deleted_is_refused(
    kafka_bootstrap: str, tmp_path: Path, checkpoints: Checkpoints
) -> None:
    src = Source("fault3")
    tables = [{"name": "db.items", "topics": [src.topic(ITEMS)], "key": ["id"]}]
    config = write_config(
        tmp_path, kafka_bootstrap, src.server, tables, storage={"checkpoint_root": str(tmp_path / "checkpoints")}
    )
    send(kafka_bootstrap, [src.change(ITEMS, "c", {"id": 1, "name": "x"})])
    assert stream(config).code == 0
    shutil.rmtree(tmp_path / "lake")
    run = stream(config)
    assert run.code == 2
    assert run.last_line == (
        f"cdc-delta: error: checkpoint {tmp_path}/checkpoints/it-fault3 has read up to batch 0, but the lake at "
        f"{tmp_path}/lake holds none of this stream's tables: they were deleted, or storage.root changed. Started "
        "now, the stream would re-create them holding only later changes. If storage.root is wrong, correct it; "
        f"to rebuild the tables from Kafka, move the checkpoint aside (mv {tmp_path}/checkpoints/it-fault3 "
        f"{tmp_path}/checkpoints/it-fault3.old) and start again (from kafka.starting_offsets)"
    )
    assert not (tmp_path / "lake" / "db").exists()
