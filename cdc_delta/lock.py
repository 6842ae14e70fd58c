"""A lock file that keeps two runs of a job (maintenance, the nightly snapshot) apart and survives a
crash of its holder.

Taken with an exclusive create; it holds the holder's host, pid and start time. A lock older than
the stale timeout, or held by a process that no longer exists on this host, is taken over.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from cdc_delta.config import AppConfig, is_uri
from cdc_delta.exceptions import CdcDeltaError, ConfigError

logger = logging.getLogger(__name__)


def lock_path(config: AppConfig, job: Literal["maintenance", "snapshot"]) -> str:
    """The lock file of ``job``'s runs: ``<job>.lock_path``, else ``<storage.root>/_cdc_<job>.lock`` (it
    must be on a filesystem every runner shares; a remote storage root needs the setting)."""
    configured = config.maintenance.lock_path if job == "maintenance" else config.snapshot.lock_path
    if configured:
        return configured
    root = config.storage.root
    if is_uri(root):
        raise ConfigError(f"storage.root {root!r} is not local: set {job}.lock_path to a shared local path")
    return f"{root.rstrip('/')}/_cdc_{job}.lock"


class LockHeld(CdcDeltaError):
    """Another run holds the lock and is not stale."""


def _holder_alive(holder: dict[str, object]) -> bool:
    if holder.get("host") != socket.gethostname():
        return True  # cannot tell: trust the stale timeout
    try:
        os.kill(int(holder.get("pid", -1)), 0)  # type: ignore[call-overload]
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, TypeError):
        return True
    return True


def _read(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, json.JSONDecodeError):
        return {}


@contextmanager
def exclusive_lock(
    path: str | os.PathLike[str], stale_after_s: float, wait_s: float = 0.0, what: str = "maintenance"
) -> Iterator[None]:
    """Hold the lock at ``path`` for the block; wait up to ``wait_s`` for it, else raise LockHeld.
    ``what`` names the job in messages."""
    lock = Path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    me = {"host": socket.gethostname(), "pid": os.getpid(), "since": time.time()}
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            with os.fdopen(fd, "w") as out:
                json.dump(me, out)
            break
        except FileExistsError:
            holder = _read(lock)
            age = time.time() - float(holder.get("since", 0) or 0)  # type: ignore[arg-type]
            if age > stale_after_s or not _holder_alive(holder):
                logger.warning("taking over a stale %s lock %s (held by %s, %.0fs old)", what, lock, holder, age)
                lock.unlink(missing_ok=True)
                continue
            if time.monotonic() >= deadline:
                raise LockHeld(
                    f"{what} is already running (lock {lock} held by pid {holder.get('pid')} on "
                    f"{holder.get('host')} for {age:.0f}s); this run exits without doing anything"
                ) from None
            time.sleep(1)
    try:
        yield
    finally:
        if _read(lock).get("pid") == me["pid"]:
            lock.unlink(missing_ok=True)
