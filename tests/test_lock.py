"""The job lock: exclusive, waits or refuses with who holds it, dies with its holder, and two runs
racing for a lock never both hold it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cdc_delta.lock import LockHeld, exclusive_lock

ROOT = Path(__file__).parents[1]


def test_second_holder_is_refused_naming_the_first(tmp_path: Path) -> None:
    lock = tmp_path / "m.lock"
    with exclusive_lock(lock):
        assert json.loads(lock.read_text())["pid"] == os.getpid()
        refused = pytest.raises(
            LockHeld, match=f"maintenance is already running \\(lock {lock} held by pid {os.getpid()} on "
        )
        with refused, exclusive_lock(lock, wait_s=1.5):
            pass
    with exclusive_lock(lock):  # released: taken again
        pass


def holder(lock: Path, *, hold_s: float) -> subprocess.Popen[str]:
    code = f"""
        import sys, time
        from cdc_delta.lock import exclusive_lock
        with exclusive_lock({str(lock)!r}):
            print("held", flush=True)
            time.sleep({hold_s})
    """
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_killed_holder_leaves_no_lock_behind(tmp_path: Path) -> None:
    lock = tmp_path / "m.lock"
    proc = holder(lock, hold_s=600)
    with pytest.raises(LockHeld, match=f"held by pid {proc.pid} "), exclusive_lock(lock):
        pass
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with exclusive_lock(lock):  # nothing to take over: the system released it with its holder
        assert json.loads(lock.read_text())["pid"] == os.getpid()


def test_runs_racing_for_the_lock_never_hold_it_together(tmp_path: Path) -> None:
    lock, log = tmp_path / "m.lock", tmp_path / "held.log"
    code = f"""
        import os, time
        from cdc_delta.lock import LockHeld, exclusive_lock
        for _ in range(20):
            try:
                with exclusive_lock({str(lock)!r}):
                    with open({str(log)!r}, "a") as out:
                        out.write(f"in {{os.getpid()}}\\n")
                        out.flush()
                        time.sleep(0.01)
                        out.write(f"out {{os.getpid()}}\\n")
            except LockHeld:
                time.sleep(0.005)
    """
    runs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT) for _ in range(4)]
    assert [run.wait(timeout=120) for run in runs] == [0, 0, 0, 0]
    lines = log.read_text().splitlines()
    assert len(lines) >= 2
    for enter, leave in zip(lines[::2], lines[1::2], strict=True):  # every hold ends before the next begins
        assert enter.startswith("in ") and leave == "out " + enter[3:], lines
