"""Watch the Kafka brokers while the stream runs: Spark's Kafka client retries an unreachable broker
for minutes, with a warning a second and stack traces, and never says what is wrong. The watch asks
the brokers itself every ``interval_s`` (at most a quarter of ``give_up_s``, so that it gives up
close to that setting), says once that they cannot be reached (and again once per
minute while that lasts), says when they answer again, and gives up after ``give_up_s`` (0: never)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from cdc_delta.exceptions import KafkaUnavailable
from cdc_delta.kafka.client import Brokers
from cdc_delta.kafka.offsets import check_reachable

logger = logging.getLogger(__name__)

REMIND_S = 60


class BrokerWatch:
    def __init__(
        self,
        bootstrap: Brokers | str,
        group: str,
        give_up_s: float,
        interval_s: float = 15,
        stop: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.bootstrap, self.group = bootstrap, group
        self.give_up_s = give_up_s
        self.interval_s = min(interval_s, max(1.0, give_up_s / 4)) if give_up_s else interval_s
        self.stop = stop
        self._clock = clock
        self._next = 0.0
        self.down_since: float | None = None
        self._reminded = 0.0

    def poll(self) -> None:
        """Ask the brokers when due. Raises :class:`KafkaUnavailable` once they have not answered for
        ``give_up_s``."""
        now = self._clock()
        if now < self._next:
            return
        self._next = now + self.interval_s
        try:
            check_reachable(self.bootstrap, self.group, 2, self.stop)
        except KafkaUnavailable:
            self._down(self._clock())
            return
        if self.down_since is not None:
            logger.warning("Kafka at %s answers again after %.0fs", self.bootstrap, self._clock() - self.down_since)
            self.down_since = None

    def _down(self, now: float) -> None:
        if self.down_since is None:
            self.down_since = self._reminded = now
            limit = f"the stream stops after {self.give_up_s:g}s" if self.give_up_s else "the stream keeps waiting"
            logger.warning(
                "cannot reach Kafka at %s: is the broker running? %s (kafka.unreachable_timeout_seconds)",
                self.bootstrap,
                limit,
            )
            return
        down = now - self.down_since
        if self.give_up_s and down >= self.give_up_s:
            raise KafkaUnavailable(
                f"cannot reach Kafka at {self.bootstrap} for {down:.0f}s (kafka.unreachable_timeout_seconds "
                f"{self.give_up_s:g}): is the broker running? Check kafka.bootstrap_servers; the stream resumes "
                "from its checkpoint when started again"
            )
        if now - self._reminded >= REMIND_S:
            self._reminded = now
            logger.warning("still cannot reach Kafka at %s (%.0fs)", self.bootstrap, down)
