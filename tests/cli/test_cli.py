"""The command line: help, config checks and exit codes (no Spark)."""

from __future__ import annotations

import json
import logging
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cdc_delta.cli.common import utc_time
from cdc_delta.cli.main import main
from cdc_delta.cli.stream import exit_code_of_cause, root_cause
from tests.services import free_port

EXAMPLE = str(Path(__file__).parents[2] / "streaming" / "example-config.yaml")


def test_help_explains_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for word in ("demo", "check-config", "sql", "CDC_DELTA__SECTION__FIELD"):
        assert word in out


def test_check_config_prints_resolved_paths(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_PASSWORD", "pw")  # the example's source.password_env: check-config wants it set
    assert main(["check-config", "--config", EXAMPLE]) == 0
    out = capsys.readouterr().out
    assert f"shop.orders: key ['id'] -> {Path.cwd()}/var/lake/shop/orders" in out and "is valid" in out


def test_a_stream_failed_by_a_service_out_of_reach_exits_69() -> None:
    text = (
        "[STREAM_FAILED] Query terminated with exception: An exception was raised by the Python Proxy.\n"
        "Traceback (most recent call last):\n"
        "cdc_delta.exceptions.RegistryUnavailable: cannot reach the schema registry at http://r:8081\n"
    )
    cause = root_cause(text)
    assert cause == "cdc_delta.exceptions.RegistryUnavailable: cannot reach the schema registry at http://r:8081"
    assert exit_code_of_cause(cause) == 69
    assert exit_code_of_cause("cdc_delta.exceptions.SchemaChangeError: x") == 1
    assert exit_code_of_cause("java.lang.OutOfMemoryError: heap") == 1


def test_root_cause_of_a_spark_stream_failure() -> None:
    text = (
        "[STREAM_FAILED] Query terminated with exception: Traceback (most recent call last):\n"
        '  File "x.py", line 1\n'
        "pyspark.errors.exceptions.captured.AnalysisException: [DELTA_X] the table is gone\n"
        "=== Streaming Query ===\nIdentifier: q\nSomeException: from the plan dump\n"
    )
    assert root_cause(text) == "pyspark.errors.exceptions.captured.AnalysisException: [DELTA_X] the table is gone"


def test_bad_config_exits_2_with_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "cdc.yaml"
    bad.write_text("app_id: x\nstorage: {root: /tmp/x}\ntables: [{name: a, topics: [t], key: []}]\n")
    assert main(["check-config", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "cdc-delta: error: invalid configuration in" in err
    assert "tables[a].key: key must name at least one primary-key column" in err


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("admin:s3cret@host:8083", "connect.url 'admin:s3cret@host:8083' must start with http"),
        ("https://admin:s3cret@host:8083", "connect.url must not hold credentials: set connect.username and"),
        ("ftp://admin:s3cret@host/x", "connect.url 'ftp://***@host/x' must start with http:// or https://"),
    ],
)
def test_a_bad_connect_url_is_one_line_without_its_password(
    url: str, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["connectors", "list", "--connect-url", url]) == 2
    out, err = capsys.readouterr()
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"cdc-delta: error: --connect-url: {reason.replace('admin:s3cret@', '***@')}"), err
    assert "s3cret" not in out + err


def test_since_is_a_time_in_utc_or_one_line_saying_what_to_write(capsys: pytest.CaptureFixture[str]) -> None:
    assert utc_time("2026-03-01T10:00+08:00").isoformat() == "2026-03-01T02:00:00+00:00"
    assert utc_time("2026-03-01T10:00Z").isoformat() == "2026-03-01T10:00:00+00:00"
    assert utc_time("2026-03-01 10:00").isoformat() == "2026-03-01T10:00:00+00:00"
    assert utc_time("2026-03-01").isoformat() == "2026-03-01T00:00:00+00:00"
    for bad in ("garbage", "10:00+08:00"):
        with pytest.raises(SystemExit) as exit_info:
            main(["replay-dead-letters", "--config", EXAMPLE, "--since", bad])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert f"argument --since: {bad!r} is not a time: write YYYY-MM-DD, YYYY-MM-DDTHH:MM (UTC)" in err
        assert "Traceback" not in err


def test_missing_command_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2


def test_snapshot_help_and_a_bad_date(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["snapshot", "--help"])
    assert exit_info.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Exits 75 without touching anything" in out and "--from-stock" in out
    assert main(["snapshot", "--config", EXAMPLE, "--date", "2026-02-30"]) == 2
    assert "--date '2026-02-30' is not a date: use YYYY-MM-DD" in capsys.readouterr().err


# --- faults: what cannot be reached is one line (exit 2); a stop signal while waiting is one line --------


def _config(tmp_path: Path, **sections: object) -> Path:
    """A config whose services are wherever ``sections`` say (by default: nowhere that answers)."""
    import yaml

    config = tmp_path / "cdc.yaml"
    data = {
        "app_id": "nowhere",
        "storage": {"root": str(tmp_path / "lake")},
        "tables": [{"name": "a.b", "topics": ["x"], "key": ["id"]}],
        **sections,
    }
    data["kafka"] = {"topics": ["x"], **data.get("kafka", {})}  # type: ignore[dict-item]
    config.write_text(yaml.safe_dump(data))
    return config


def _cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cdc_delta.cli", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _handles_sigterm(pid: int) -> bool:
    """Whether process ``pid`` has a handler for SIGTERM (Linux: the caught-signals mask in /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    return False


def _stopped_while_waiting(config: Path, *args: str) -> tuple[int, str, str]:
    """The command, sent SIGTERM while it waits (2 s after it handles SIGTERM: a fixed 3 s from its start
    reached one still importing on a loaded machine, which SIGTERM killed): exit code, stdout, stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "cdc_delta.cli", *args, "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not _handles_sigterm(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    return proc.returncode, out, err


def test_an_unreachable_broker_is_one_line_naming_it(tmp_path: Path) -> None:
    nowhere = f"127.0.0.1:{free_port()}"
    config = _config(tmp_path, kafka={"bootstrap_servers": nowhere, "startup_timeout_seconds": 3})
    run = _cli(config, "stream")
    assert run.returncode == 69  # unavailable: restart later
    assert run.stdout == ""
    (line,) = run.stderr.splitlines()  # one line, no librdkafka chatter, no traceback
    assert line.startswith(f"cdc-delta: error: cannot reach Kafka at {nowhere} ")
    assert "is the broker running? Check kafka.bootstrap_servers (or, where it answers on that port, its " in line
    # status shows the lake's side all the same, Kafka's marked unreachable, and exits 69
    for args in (["status"], ["status", "--json"]):
        status = _cli(config, *args)
        assert status.returncode == 69 and status.stderr == "", status.stderr
        assert f"kafka: cannot reach Kafka at {nowhere} " in status.stdout, status.stdout
        assert "a.b" in status.stdout and "stream: not running (no lease held)" in status.stdout or "--json" in args
    reported = json.loads(status.stdout)
    assert reported["kafka"]["reachable"] is False and [t["table"] for t in reported["tables"]] == ["a.b"]
    assert reported["leases"] == {"stream": None, "merge": None}


def test_generate_against_no_broker_is_one_line_naming_it() -> None:
    nowhere = f"127.0.0.1:{free_port()}"
    run = subprocess.run(
        [sys.executable, "-m", "cdc_delta.cli", "generate", "--bootstrap", nowhere, "--events", "5"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 69 and run.stdout == "", run.stderr[-2000:]
    (line,) = run.stderr.splitlines()  # not librdkafka's line every 50 ms, then a Python exception
    assert line.startswith(f"cdc-delta: error: cannot reach Kafka at {nowhere} within 10s ")
    assert line.endswith("is the broker running? Check --bootstrap")


def test_verbose_is_taken_before_and_after_the_command(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.yaml")
    command = ["connectors", "status", "--config", missing]
    for args in (["-v", *command], [*command, "-v"]):
        run = subprocess.run([sys.executable, "-m", "cdc_delta.cli", *args], capture_output=True, text=True, timeout=60)
        assert run.returncode == 2 and "Traceback" in run.stderr, (args, run.stderr)
        assert run.stderr.rstrip().splitlines()[-1].startswith("cdc-delta: error: config file ")
    quiet = subprocess.run(
        [sys.executable, "-m", "cdc_delta.cli", "connectors", "status", "--config", missing],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert quiet.returncode == 2 and len(quiet.stderr.splitlines()) == 1, quiet.stderr


def test_a_stream_without_topics_is_one_line_before_spark_starts(tmp_path: Path) -> None:
    run = _cli(_config(tmp_path, kafka={"topics": []}), "stream")
    assert run.returncode == 2
    (line,) = run.stderr.splitlines()  # one line: no JVM started (it would print its own warning first)
    assert line == "cdc-delta: error: the stream needs kafka.topics or kafka.topic_pattern in the config"
    assert not (tmp_path / "lake").exists()
    check = _cli(_config(tmp_path, kafka={"topics": []}), "check-config")
    assert check.returncode == 0, check.stderr  # maintenance, snapshot and sql need no topics
    assert (
        "note: the stream needs kafka.topics or kafka.topic_pattern in the config: `cdc-delta stream` refuses it, "
        "the other jobs run" in check.stdout
    )


def test_a_metrics_port_in_use_is_one_line_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = _cli(_config(tmp_path, metrics={"port": port, "host": "127.0.0.1"}), "stream")
    assert run.returncode == 2
    (line,) = run.stderr.splitlines()
    assert line.startswith(f"cdc-delta: error: cannot serve metrics on 127.0.0.1:{port} (Address already in use)")
    assert [p for p in (tmp_path / "lake").rglob("*") if not p.is_dir()] == []  # its lease freed, nothing else


def test_unreachable_connect_worker_metastore_and_source_are_one_line_naming_them(tmp_path: Path) -> None:
    port = free_port()
    config = _config(
        tmp_path,
        connect={"url": f"http://127.0.0.1:{port}", "retry_seconds": 2},
        snapshot={"metastore_uri": f"thrift://127.0.0.1:{port}", "metastore_timeout_seconds": 2},
        source={"host": "127.0.0.1", "port": port, "user": "cdc", "connect_timeout_seconds": 3},
    )
    for command, starts in (
        (["connectors", "status"], f"cannot reach Kafka Connect at http://127.0.0.1:{port} ("),
        (
            ["snapshot", "--skip-kafka-check", "--date", "2026-01-01"],
            f"cannot reach the Hive metastore at thrift://127.0.0.1:{port} within 2s",
        ),
        (["check"], f"cannot connect to the source database cdc@127.0.0.1:{port} ("),
    ):
        run = _cli(config, *command)
        assert run.returncode == 69, (command, run.stderr)
        (line,) = run.stderr.splitlines()
        assert line.startswith(f"cdc-delta: error: {starts}"), line


def test_sigterm_while_the_stream_waits_for_a_broker_ends_cleanly(tmp_path: Path) -> None:
    config = _config(tmp_path, kafka={"bootstrap_servers": f"127.0.0.1:{free_port()}", "startup_timeout_seconds": 120})
    code, out, err = _stopped_while_waiting(config, "stream")
    assert code == 0, err
    assert out.strip() == "cdc-delta: stopped on request before the stream started"
    assert "Traceback" not in err and "stopping after the current batch" in err


def test_sigterm_while_a_command_waits_ends_with_one_line(tmp_path: Path) -> None:
    config = _config(tmp_path, connect={"url": f"http://127.0.0.1:{free_port()}", "retry_seconds": 120})
    code, _, err = _stopped_while_waiting(config, "connectors", "status")  # retrying the worker that is not there
    assert code == 128 + signal.SIGTERM
    assert err.splitlines() == ["cdc-delta: stopped by SIGTERM"]


def test_status_names_what_needs_attention() -> None:
    import dataclasses

    from cdc_delta.activity.judge import Verdict
    from cdc_delta.cli.status import Status
    from cdc_delta.delta.status import TableStatus
    from cdc_delta.kafka.offsets import PartitionLag

    lags = [PartitionLag("t", 0, end=500, committed=100), PartitionLag("t", 1, end=50, committed=None)]
    tables = [
        TableStatus("db.a", pending=3, oldest_pending_s=700.0),
        TableStatus("db.b", stopped_reason="table db.b failed: boom"),
        TableStatus("db.c", pending=1, oldest_pending_s=20.0),
    ]
    status = Status(lags, {}, 7, tables, 0)
    assert status.total_lag == 400
    assert status.problems(None, None) == ["stopped: db.b: table db.b failed: boom"]
    judged = {"db.a": Verdict("learning", "1.0 days of history"), "db.c": Verdict("silent", "no change for 2 h")}
    assert dataclasses.replace(status, activity=judged).problems(None, None) == [
        "silent: db.c: no change for 2 h",
        "stopped: db.b: table db.b failed: boom",
    ]
    assert status.problems(400, 700) == ["stopped: db.b: table db.b failed: boom"]  # at a threshold is not over it
    assert status.problems(399, 600) == [
        "lag 400 events is over --max-lag 399",
        "merge lag: db.a: 700s is over --max-merge-lag 600",
        "stopped: db.b: table db.b failed: boom",
    ]


def test_an_unexpected_failure_is_one_line_exit_1_and_its_trace_is_for_verbose(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="cdc_delta")

    class JavaError(Exception):  # py4j's: its text names only the call, the JVM's exception holds the rest
        java_exception = "java.io.FileNotFoundException: s3a://b/t/part-0.parquet\n\tat org.apache.hadoop.X"

    def broken(path: object, **_: object) -> None:
        raise JavaError("An error occurred while calling o42.load")

    monkeypatch.setattr("cdc_delta.cli.check_config.load_config", broken)
    assert main(["check-config", "--config", EXAMPLE]) == 1
    err = capsys.readouterr().err
    assert err == (
        "cdc-delta: error: java.io.FileNotFoundException: s3a://b/t/part-0.parquet (unexpected: run again with -v "
        "for the trace)\n"
    )
    (logged,) = [r for r in caplog.records if r.exc_info]  # what -v prints: the trace, at debug level
    assert logged.levelno == logging.DEBUG and logged.exc_info[0] is JavaError  # type: ignore[index]


def test_a_consistent_read_without_transaction_metadata_is_one_line_before_spark_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No changelog yet, then a changelog with no transaction END (metadata off): refused, saying how to turn
    it on, exit 2, no Spark."""
    import pyarrow as pa
    from deltalake import CommitProperties, write_deltalake

    config = _config(tmp_path)
    assert main(["sql", "--config", str(config), "--consistent", "SELECT 1"]) == 2
    assert "cannot read at a consistent point: no changelog yet" in capsys.readouterr().err
    changelog = tmp_path / "lake" / "_cdc_changelog"
    landing = '{"app_id": "nowhere", "batch_id": 0, "land_seq": 0, "operation": "land"}'
    txn = pa.array([None], pa.struct([("id", pa.string()), ("total_order", pa.int64())]))
    text, number = pa.array(["x"]), pa.array([0], pa.int64())
    columns = {"land_seq": number, "op": pa.array(["c"]), "table": text, "source_db": text, "source_table": text}
    columns |= {"topic": text, "partition": pa.array([0], pa.int32()), "offset": number, "source_ts_ms": number}
    rows = pa.table({**columns, "row_json": text, "txn": txn})
    write_deltalake(str(changelog), rows, commit_properties=CommitProperties(custom_metadata={"userMetadata": landing}))
    assert main(["sql", "--config", str(config), "--consistent", "SELECT 1"]) == 2
    err = capsys.readouterr().err
    assert "cannot read at a consistent point: no source transaction's END has landed: turn on" in err, err
    assert "provide.transaction.metadata" in err and "<topic.prefix>.transaction" in err
    assert "SparkSession" not in err
