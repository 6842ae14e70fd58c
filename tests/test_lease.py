"""The lease in the lake: a second holder refused naming the first, a holder gone (killed here, or silent
elsewhere) taken over, a lease taken over under its holder noticed, and processes racing for it never
both holding it."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cdc_delta.config import AppConfig
from cdc_delta.lease import Holder, Lease, LeaseHeld, holder_of

ROOT = Path(__file__).parents[1]


def config_at(root: Path, timeout_s: int = 60) -> AppConfig:
    return AppConfig.model_validate(
        {
            "app_id": "leased",
            "storage": {"root": str(root / "lake"), "lease_timeout_seconds": timeout_s},
            "tables": [{"name": "db.t", "topics": ["t"], "key": ["id"]}],
        }
    )


def lease_file(root: Path, role: str = "stream") -> Path:
    return root / "lake" / "_cdc_leases" / f"leased.{role}.json"


def plant(root: Path, **fields: object) -> None:
    """A lease file as another process would have written it."""
    now = time.time()
    holder = {"host": "elsewhere", "pid": 4242, "started": now - 600, "heartbeat": now, "token": "theirs"}
    path = lease_file(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**holder, "command": "stream", "process_start": None, **fields}))


def test_a_second_holder_is_refused_naming_the_first_and_a_released_lease_is_free(tmp_path: Path) -> None:
    config = config_at(tmp_path)
    with Lease(config, "stream", "stream"):
        held = holder_of(config, "stream")
        assert held is not None and held.pid == os.getpid() and held.host == socket.gethostname()
        refused = f"a stream of app leased already runs on this lake: stream pid {os.getpid()} on "
        with pytest.raises(LeaseHeld, match=refused), Lease(config, "stream", "stream"):
            pass
        with Lease(config, "merge", "merge"):  # another role: its own lease
            assert holder_of(config, "merge") is not None
    assert holder_of(config, "stream") is None and not lease_file(tmp_path).exists()
    with Lease(config, "stream", "stream"):  # released: taken again
        pass


def test_a_killed_holder_on_this_host_is_taken_over_at_once(tmp_path: Path, caplog) -> None:
    config = config_at(tmp_path)
    code = f"""
        import time
        from cdc_delta.config import AppConfig
        from cdc_delta.lease import Lease
        config = AppConfig.model_validate({config.model_dump(mode="json")!r})
        with Lease(config, "stream", "stream"):
            print("held", flush=True)
            time.sleep(600)
    """
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    with pytest.raises(LeaseHeld, match=f"stream pid {proc.pid} on "), Lease(config, "stream", "stream"):
        pass
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with caplog.at_level(logging.WARNING, "cdc_delta.lease"), Lease(config, "stream", "stream"):
        held = holder_of(config, "stream")
        assert held is not None and held.pid == os.getpid()
    assert f"took over the stream lease {tmp_path}/lake/_cdc_leases/leased.stream.json of stream pid {proc.pid}" in (
        caplog.text
    )


def test_a_holder_elsewhere_holds_until_its_heartbeat_is_silent_for_the_timeout(tmp_path: Path) -> None:
    config = config_at(tmp_path, timeout_s=60)
    plant(tmp_path, heartbeat=time.time() - 20)
    with pytest.raises(LeaseHeld, match="stream pid 4242 on elsewhere, since .* heartbeat 20s ago"):
        Lease(config, "stream", "stream").take()
    plant(tmp_path, heartbeat=time.time() - 61)
    with Lease(config, "stream", "stream"):
        held = holder_of(config, "stream")
        assert held is not None and held.host == socket.gethostname()


def test_a_lease_taken_over_under_its_holder_is_noticed_and_not_freed(tmp_path: Path) -> None:
    config = config_at(tmp_path, timeout_s=6)  # renewed every second
    lost: list[Holder] = []
    lease = Lease(config, "stream", "stream", on_lost=lost.append).take()
    try:
        first = holder_of(config, "stream")
        time.sleep(2.5)
        renewed = holder_of(config, "stream")
        assert first is not None and renewed is not None and renewed.heartbeat > first.heartbeat
        plant(tmp_path)  # another host's process took it (its clock said ours was silent)
        deadline = time.monotonic() + 10
        while not lost and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [h.host for h in lost] == ["elsewhere"] and lease.lost is not None
    finally:
        lease.release()
    held = holder_of(config, "stream")
    assert held is not None and held.token == "theirs"  # not ours to free


def test_processes_racing_for_the_lease_never_both_hold_it(tmp_path: Path) -> None:
    config = config_at(tmp_path)
    log = tmp_path / "held.log"
    code = f"""
        import os, time
        from cdc_delta.config import AppConfig
        from cdc_delta.lease import Lease, LeaseHeld
        config = AppConfig.model_validate({config.model_dump(mode="json")!r})
        time.sleep({time.time() + 3} - time.time())  # all start together
        try:
            with Lease(config, "stream", "stream"):
                with open({str(log)!r}, "a") as out:
                    out.write(f"held {{os.getpid()}}\\n")
                time.sleep(4)
        except LeaseHeld:
            with open({str(log)!r}, "a") as out:
                out.write(f"refused {{os.getpid()}}\\n")
    """
    runs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT) for _ in range(4)]
    assert [run.wait(timeout=120) for run in runs] == [0, 0, 0, 0]
    lines = log.read_text().splitlines()
    assert len(lines) == 4 and sum(line.startswith("held ") for line in lines) == 1, lines


def test_a_replay_of_dead_letters_is_refused_while_a_stream_runs(tmp_path: Path, capsys) -> None:
    """The replay lands into the changelog, whose one lander is the stream: refused in one line naming it,
    before Spark starts."""
    from cdc_delta.cli.main import main

    config = config_at(tmp_path)
    path = tmp_path / "cdc.yaml"
    path.write_text(json.dumps(config.model_dump(mode="json", exclude_defaults=True)))
    with Lease(config, "stream", "stream"):
        code = main(["replay-dead-letters", "--config", str(path)])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("cdc-delta: error:")]
    assert code == 2 and len(errors) == 1, errors
    assert f"a stream of app leased already runs on this lake: stream pid {os.getpid()} on " in errors[0]
