"""A lock that keeps two runs of a job (maintenance, the nightly snapshot) apart and dies with its holder.

An advisory lock (``flock``) on a lock file: the operating system releases it when the holding process
ends, however it ends, so a crashed run never leaves a lock behind and there is nothing to take over
(taking over a lock judged stale raced: two takers could both win). The file holds the holder's host,
pid and start time, for the message a refused run prints; it is never deleted (a run that deleted it
could leave two runs locking two different files). On a filesystem shared by several hosts the lock
holds where that filesystem supports locks across hosts (NFS does, through its lock manager).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from cdc_delta.config import AppConfig
from cdc_delta.exceptions import CdcDeltaError

logger = logging.getLogger(__name__)


def lock_path(config: AppConfig, job: Literal["maintenance", "snapshot"]) -> str:
    """The lock file of ``job``'s runs: ``<job>.lock_path``, else ``<storage.root>/_cdc_<job>.lock`` (it
    must be on a filesystem every runner shares; a remote storage root needs the setting)."""
    configured = config.maintenance.lock_path if job == "maintenance" else config.snapshot.lock_path
    if configured:
        return configured
    root = config.storage.root.removeprefix("file:")  # an object-store root needs the setting (config validation)
    return f"{root.rstrip('/')}/_cdc_{job}.lock"


class LockHeld(CdcDeltaError):
    """Another run holds the lock."""


@contextmanager
def exclusive_lock(path: str | os.PathLike[str], wait_s: float = 0.0, what: str = "maintenance") -> Iterator[None]:
    """Hold the lock at ``path`` for the block; wait up to ``wait_s`` for it, else raise LockHeld.
    ``what`` names the job in messages."""
    lock = Path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockHeld(_held_message(lock, what)) from None
                time.sleep(1)
        me = {"host": socket.gethostname(), "pid": os.getpid(), "since": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)  # no holder now; the file stays (see the module's docstring)
    finally:
        os.close(fd)  # releases the lock


def _held_message(lock: Path, what: str) -> str:
    try:
        holder = json.loads(lock.read_text() or "{}")
    except (OSError, json.JSONDecodeError):
        holder = {}
    if not isinstance(holder, dict) or not holder:
        by = "another run (starting now)"
    else:
        age = time.time() - float(holder.get("since", time.time()))
        by = f"pid {holder.get('pid')} on {holder.get('host')} for {age:.0f}s"
    return f"{what} is already running (lock {lock} held by {by}); this run did nothing"
