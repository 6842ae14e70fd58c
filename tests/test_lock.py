"""The maintenance lock: exclusive, waits or refuses, and takes over a crashed holder's lock."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from cdc_delta.lock import LockHeld, exclusive_lock


def test_second_holder_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    lock = tmp_path / "m.lock"
    with exclusive_lock(lock, stale_after_s=60):
        assert json.loads(lock.read_text())["pid"] == os.getpid()
        refused = pytest.raises(LockHeld, match="maintenance is already running .* exits without doing anything")
        with refused, exclusive_lock(lock, stale_after_s=60, wait_s=1.5):
            pass
    assert not lock.exists()


def test_lock_of_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    lock = tmp_path / "m.lock"
    lock.write_text(json.dumps({"host": socket.gethostname(), "pid": dead.pid, "since": time.time()}))
    with exclusive_lock(lock, stale_after_s=3600):
        assert json.loads(lock.read_text())["pid"] == os.getpid()


def test_stale_lock_of_another_host_is_taken_over_after_the_timeout(tmp_path: Path) -> None:
    lock = tmp_path / "m.lock"
    lock.write_text(json.dumps({"host": "elsewhere", "pid": 1, "since": time.time() - 7200}))
    with exclusive_lock(lock, stale_after_s=3600):
        assert json.loads(lock.read_text())["host"] == socket.gethostname()
    fresh = {"host": "elsewhere", "pid": 1, "since": time.time()}
    lock.write_text(json.dumps(fresh))
    with pytest.raises(LockHeld), exclusive_lock(lock, stale_after_s=3600):
        pass
