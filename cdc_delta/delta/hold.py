"""A short pause of the stream's writes to one table, asked for by maintenance when it keeps losing.

OPTIMIZE and the tombstone purge read files that a busy stream rewrites every batch: a command that
runs longer than the stream's trigger interval loses the optimistic-concurrency race every time, and
retrying alone never gets it through. After a few lost races maintenance writes a hold file for the
table with a deadline; the stream's next batch waits before writing that table until the file is
gone or its deadline has passed. A holder that dies leaves a file whose deadline soon passes, so the
stream never waits longer than the deadline and never fails because of a hold.
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

from cdc_delta.config import AppConfig
from cdc_delta.exceptions import ConfigError
from cdc_delta.lock import lock_path

logger = logging.getLogger(__name__)

POLL_S = 0.5
CHANGELOG = "_cdc_changelog"
"""The name a hold of the changelog goes by (its retention's DELETE, when it keeps losing to landings)."""


def hold_path(lock_file: str | os.PathLike[str], table: str) -> Path:
    """The hold file of ``table``, beside the maintenance lock (a filesystem both jobs share)."""
    return Path(lock_file).with_name(f"_cdc_hold.{table}.json")


def stream_hold(config: AppConfig, name: str) -> Path | None:
    """The hold file of ``name`` (a table, or :data:`CHANGELOG`) that the stream honours; None where
    maintenance cannot run either (a remote storage root without maintenance.lock_path)."""
    try:
        return hold_path(lock_path(config, "maintenance"), name)
    except ConfigError:
        return None


@contextmanager
def holding_writes(path: Path, max_s: float, why: str) -> Iterator[None]:
    """Ask the stream to leave the table alone for the block, for at most ``max_s`` seconds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    me = {"until": time.time() + max_s, "why": why, "host": socket.gethostname(), "pid": os.getpid()}
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(json.dumps(me))
    os.replace(temporary, path)  # the stream never reads half a file
    logger.warning("%s: the stream pauses its writes to the table for at most %.0fs (%s)", why, max_s, path)
    try:
        yield
    finally:
        if _until(path) == me["until"]:
            path.unlink(missing_ok=True)


def _until(path: Path) -> float | None:
    """The hold's deadline (epoch seconds), or None when there is no readable hold."""
    try:
        return float(json.loads(path.read_text())["until"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def wait_while_held(path: Path, table: str) -> float:
    """Wait while a live hold on ``table`` exists; returns the seconds waited (0.0 without a hold)."""
    started = time.monotonic()
    announced = False
    while (until := _until(path)) is not None and until > time.time():
        if not announced:
            logger.info("maintenance holds writes to %s; waiting at most %.0fs", table, until - time.time())
            announced = True
        time.sleep(min(POLL_S, max(0.0, until - time.time())))
    if not announced:
        return 0.0
    waited = time.monotonic() - started
    logger.info("writes to %s resume after %.1fs", table, waited)
    return waited
