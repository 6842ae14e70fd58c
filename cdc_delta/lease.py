"""One stream and one merger per lake and app: a lease in the lake, held while the process runs.

``stream`` takes the lease ``stream`` (and ``merge`` where it merges too), ``cdc-delta merge`` takes
``merge`` and ``accept-gap`` takes ``stream`` while it moves the checkpoint aside. The lease is a small
JSON file, ``<storage.root>/_cdc_leases/<app_id>.<role>.json``, holding its holder's host, pid, start
time and a heartbeat the holder rewrites every few seconds. It is written through delta-rs' object
store, so that it works where the lake does (a local folder, S3, ADLS, GCS) and ``status`` reads it
without Spark.

A second process is refused (:class:`LeaseHeld`, one line naming the holder) while the holder lives:
its heartbeat is younger than ``storage.lease_timeout_seconds`` and, when the holder ran on this host,
its process still runs. A lease whose holder is gone (a kill -9, a lost host) is taken over, and the
log says whose it was. Object stores have no create-if-absent for every provider, so taking a lease is
written, then read back after a pause: of two processes that start within the same second, the one
whose write landed last holds it and the other is refused; the holder's heartbeat reads the file
before each beat and gives up (``on_lost``) where another holds it. The stream's checkpoint is the last
line of defence: two queries on one checkpoint fail rather than write twice.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from cdc_delta.config import AppConfig
from cdc_delta.delta.lake_files import LakeFiles
from cdc_delta.exceptions import CdcDeltaError

logger = logging.getLogger(__name__)

Role = Literal["stream", "merge"]

SETTLE_S = 1.0
"""How long a new holder waits before reading its lease back (see the module's docstring)."""


class LeaseHeld(CdcDeltaError):
    """Another live process holds the lease."""


@dataclass(frozen=True)
class Holder:
    """What a lease file says of the process that holds it."""

    host: str
    pid: int
    started: float
    heartbeat: float
    token: str
    command: str
    process_start: str | None = None
    """The kernel's start time of the process (``/proc/<pid>/stat``), which tells a live holder from a
    later process that reuses its pid; None off Linux."""

    def describe(self, now: float | None = None) -> str:
        now = time.time() if now is None else now
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.started))
        return f"{self.command} pid {self.pid} on {self.host}, since {since}, heartbeat {now - self.heartbeat:.0f}s ago"

    def alive(self, timeout_s: float, now: float | None = None) -> bool:
        """Whether the holder still runs: on this host, its process (pid and start time) does and its
        heartbeat is recent; elsewhere, its heartbeat is younger than ``timeout_s``."""
        now = time.time() if now is None else now
        if self.host == socket.gethostname() and not _running(self.pid, self.process_start):
            return False
        return now - self.heartbeat < timeout_s

    def as_json(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)


def _process_start(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[19]  # field 22, starttime (proc(5))
    except (OSError, IndexError):
        return None


def _running(pid: int, process_start: str | None) -> bool:
    if pid == os.getpid():
        return process_start is None or process_start == _process_start(pid)  # a restarted container's pid 1
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it runs
    return process_start is None or process_start == _process_start(pid)


def lease_path(config: AppConfig, role: Role) -> str:
    """The lease file of ``role`` under the storage root, relative to it."""
    return f"_cdc_leases/{config.app_id}.{role}.json"


def holder_of(config: AppConfig, role: Role) -> Holder | None:
    """Who holds the lease of ``role`` (alive or not: see :meth:`Holder.alive`); None where none is held."""
    return _read(LakeFiles(config), lease_path(config, role))


def _read(files: LakeFiles, path: str) -> Holder | None:
    text = files.read(path)
    if not text:
        return None
    try:
        return Holder(**json.loads(text))
    except (TypeError, ValueError):
        logger.warning("lease %s/%s is not a lease (%r): taken as free", files.root, path, text[:80])
        return None


class Lease:
    """The lease of ``role`` held by this process, its heartbeat beating in a daemon thread until
    :meth:`release`. ``on_lost`` is called (from that thread) if another process took it over."""

    def __init__(
        self, config: AppConfig, role: Role, command: str, on_lost: Callable[[Holder], Any] | None = None
    ) -> None:
        self.config = config
        self.role = role
        self.files = LakeFiles(config)
        self.path = lease_path(config, role)
        self.timeout_s = float(config.storage.lease_timeout_seconds)
        self.on_lost = on_lost
        self.lost: Holder | None = None
        now = time.time()
        pid = os.getpid()
        self.me = Holder(socket.gethostname(), pid, now, now, uuid.uuid4().hex, command, _process_start(pid))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def location(self) -> str:
        return f"{self.files.root}/{self.path}"

    def take(self) -> Lease:
        """Take the lease (taking over one whose holder is gone) and start the heartbeat; raise
        :class:`LeaseHeld` naming the holder where a live one holds it."""
        held = _read(self.files, self.path)
        if held is not None and held.token != self.me.token:
            if held.alive(self.timeout_s):
                raise self._refusal(held)
            logger.warning(
                "%s: took over the %s lease %s of %s: that process is gone",
                self.me.command,
                self.role,
                self.location,
                held.describe(),
            )
        self._beat()
        time.sleep(SETTLE_S)
        held = _read(self.files, self.path)
        if held is None or held.token != self.me.token:
            raise self._refusal(held)
        self._thread = threading.Thread(target=self._heartbeat, name=f"cdc-delta-lease-{self.role}", daemon=True)
        self._thread.start()
        return self

    def _refusal(self, held: Holder | None) -> LeaseHeld:
        by = held.describe() if held is not None else "another process starting at the same time"
        what = "a merger" if self.role == "merge" else "a stream"
        return LeaseHeld(
            f"{what} of app {self.config.app_id} already runs on this lake: {by} (lease {self.location}); stop it "
            f"first, or wait: a lease whose heartbeat is silent for {self.timeout_s:.0f}s "
            "(storage.lease_timeout_seconds) is taken over"
        )

    def _beat(self) -> None:
        beat = dataclasses.replace(self.me, heartbeat=time.time())
        self.files.write(self.path, beat.as_json())

    def _heartbeat(self) -> None:
        every = max(1.0, self.timeout_s / 6)
        while not self._stop.wait(every):
            try:
                held = _read(self.files, self.path)
                if held is not None and held.token != self.me.token:
                    self.lost = held
                    logger.error(
                        "%s: the %s lease %s was taken over by %s: stopping",
                        self.me.command,
                        self.role,
                        self.location,
                        held.describe(),
                    )
                    if self.on_lost is not None:
                        self.on_lost(held)
                    return
                self._beat()
            except Exception as exc:  # the store out of reach: beat again next time; the timeout allows it
                logger.warning(
                    "%s: could not renew the %s lease %s: %s", self.me.command, self.role, self.location, exc
                )

    def release(self) -> None:
        """Stop the heartbeat and free the lease (unless another process holds it now)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        try:
            held = _read(self.files, self.path)
            if held is not None and held.token == self.me.token:
                self.files.delete(self.path)
        except Exception as exc:  # freed by its timeout instead
            logger.warning("%s: could not free the %s lease %s: %s", self.me.command, self.role, self.location, exc)

    def __enter__(self) -> Lease:
        return self.take()

    def __exit__(self, *exc: object) -> None:
        self.release()
