"""Retry a Delta command that lost an optimistic-concurrency race (the stream and maintenance both write)."""

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


def retry_on_conflict(action: Callable[[], T], what: str, attempts: int = 6, base_delay_s: float = 0.5) -> T:
    """Run ``action``; on a Delta write conflict, back off (exponential, jittered) and run it again."""
    for attempt in range(1, attempts + 1):
        try:
            return action()
        except Exception as exc:  # the JVM's conflict errors carry no Python type of their own
            if not is_conflict(exc) or attempt == attempts:
                raise
            delay = base_delay_s * 2 ** (attempt - 1) * (0.5 + random.random())
            logger.warning(
                "%s lost a concurrent-write race (attempt %d/%d); retrying in %.1fs: %s",
                what,
                attempt,
                attempts,
                delay,
                str(exc).splitlines()[0][:200],
            )
            time.sleep(delay)
    raise AssertionError("unreachable")
