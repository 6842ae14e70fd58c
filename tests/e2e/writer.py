"""A writer to the source that runs beside a test, in a thread, until the test leaves its ``with``."""

from __future__ import annotations

import abc
import random
import threading
import time
from typing import Any

from tests.e2e.pipeline import Pipeline


class BackgroundWriter(abc.ABC):
    """Calls :meth:`write` over one connection the whole time, ``pause`` seconds apart; counts the writes."""

    def __init__(self, pipe: Pipeline, seed: int, pause: float) -> None:
        self.pipe = pipe
        self.pause = pause
        self.stop = threading.Event()
        self.rng = random.Random(seed)
        self.writes = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    @abc.abstractmethod
    def write(self, conn: Any, cur: Any) -> None:
        """One write (a statement, or a transaction over ``conn``)."""

    def _run(self) -> None:
        conn = self.pipe.mariadb.connect()
        try:
            with conn.cursor() as cur:
                while not self.stop.is_set():
                    self.write(conn, cur)
                    self.writes += 1
                    time.sleep(self.pause)
        finally:
            conn.close()

    def __enter__(self) -> BackgroundWriter:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join(timeout=30)
