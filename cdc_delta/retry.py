"""Retry with backoff: a Delta command that lost an optimistic-concurrency race (the stream and maintenance
both write), a Kafka call a coordinator answered \"not yet\".

What is ours here is which errors are retried (:data:`CONFLICT_MARKERS`: Delta's conflicts reach Python
as JVM errors known only by their text); the loop is a few lines with jitter, which a dependency
(tenacity) would not shorten."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

logger = logging.getLogger(__name__)
T = TypeVar("T")

# Delta's conflict exceptions reach Python as captured JVM errors; their class names and error
# classes are in the message.
CONFLICT_MARKERS = (
    "ConcurrentAppendException",
    "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException",
    "ConcurrentTransactionException",
    "MetadataChangedException",
    "ProtocolChangedException",
    "DELTA_CONCURRENT_",
    "DELTA_METADATA_CHANGED",
    "DELTA_PROTOCOL_CHANGED",
)


def is_conflict(exc: BaseException) -> bool:
    text = str(exc)
    return any(marker in text for marker in CONFLICT_MARKERS)


def retry(
    action: Callable[[], T],
    retriable: Callable[[Exception], bool],
    what: str,
    attempts: int = 6,
    base_delay_s: float = 0.5,
    log_level: int = logging.WARNING,
) -> T:
    """Run ``action``; on an error ``retriable`` accepts, back off (exponential, jittered) and run it
    again, ``attempts`` times in all; the last error, or one not retriable, is raised. Each retry is
    logged at ``log_level``."""
    for attempt in range(1, attempts + 1):
        try:
            return action()
        except Exception as exc:  # the caller's predicate decides (the JVM's errors carry no Python type)
            if not retriable(exc) or attempt == attempts:
                raise
            delay = base_delay_s * 2 ** (attempt - 1) * (0.5 + random.random())
            logger.log(
                log_level,
                "%s failed (attempt %d/%d); retrying in %.1fs: %s",
                what,
                attempt,
                attempts,
                delay,
                str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__,
            )
            time.sleep(delay)
    raise AssertionError("unreachable")


def retry_on_conflict(action: Callable[[], T], what: str, attempts: int = 6, base_delay_s: float = 0.5) -> T:
    """Run ``action``; on a Delta write conflict (a race lost to another writer), back off and run it again."""
    return retry(action, is_conflict, f"{what} (a concurrent-write race)", attempts, base_delay_s)
