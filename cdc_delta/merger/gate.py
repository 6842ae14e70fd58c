"""Merges give way to landings: in the stream's process the two share the cores, and a landing is what
a live view waits for. A table's merge (and a round's read of its changes) does not start while a
landing runs: it waits for that landing to end, not for the next one, so merges go on between landings
whatever the ingest rate."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class LandingGate:
    """The stream's thread marks its landings (:meth:`landing`); the merger's threads call
    :meth:`give_way` before each piece of work."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._running = 0
        """The number of the landing running now (0: none)."""
        self._count = 0

    @contextmanager
    def landing(self) -> Iterator[None]:
        """Around one landing (the stream's thread)."""
        with self._cond:
            self._count += 1
            self._running = self._count
        try:
            yield
        finally:
            with self._cond:
                self._running = 0
                self._cond.notify_all()

    def give_way(self, timeout_s: float = 300.0) -> None:
        """Wait while the landing running now (if any) runs, at most ``timeout_s``."""
        with self._cond:
            running = self._running
            if running:
                self._cond.wait_for(lambda: self._running != running, timeout=timeout_s)
