"""Kafka-side offsets: commit the stream's position to its consumer group, read end offsets and lag."""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from cdc_delta.exceptions import KafkaUnavailable
from cdc_delta.retry import retry

logger = logging.getLogger(__name__)


def _consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "socket.timeout.ms": 10_000,
            "session.timeout.ms": 10_000,
            # librdkafka prints each failed connection attempt (many a second) to stderr; what failed is
            # raised as one clear error instead. With -v (debug logging) they go to the log.
            "logger": logger,
            "log_level": 7 if logger.isEnabledFor(logging.DEBUG) else 0,
        }
    )


def _retriable_error(exc: Exception) -> bool:
    """A coordinator still loading or moving (as on a new broker) answers again shortly."""
    if not isinstance(exc, KafkaException):
        return False
    error = exc.args[0] if exc.args else None
    return bool(getattr(error, "retriable", lambda: False)()) or "COORDINATOR" in str(exc)


def commit_group_offsets(bootstrap: str, group: str, offsets: dict[str, dict[str, int]], attempts: int = 6) -> bool:
    """Commit ``max processed offset + 1`` per partition to ``group``. Best effort: retriable errors
    (a coordinator still loading, as on a new broker) are retried with backoff; a failure is logged,
    never raised, since the Delta commit already made the batch durable."""
    parts = [TopicPartition(t, int(p), o + 1) for t, ps in offsets.items() for p, o in ps.items()]
    consumer = _consumer(bootstrap, group)
    try:
        retry(
            lambda: consumer.commit(offsets=parts, asynchronous=False),
            _retriable_error,
            f"committing offsets to consumer group {group}",
            attempts,
            log_level=logging.DEBUG,  # a coordinator still loading: expected on a new broker
        )
        return True
    except KafkaException as exc:
        logger.warning("could not commit offsets to consumer group %s (lag tools will lag behind): %s", group, exc)
        return False
    finally:
        consumer.close()


@dataclass(frozen=True)
class PartitionLag:
    """End offset, committed offset and lag of one topic partition."""

    topic: str
    partition: int
    end: int
    committed: int | None

    @property
    def lag(self) -> int | None:
        return None if self.committed is None else max(0, self.end - self.committed)


def partition_lag(
    bootstrap: str, group: str, topics: list[str], pattern: str | None, attempts: int = 6
) -> list[PartitionLag]:
    """Per partition of the subscribed topics: end offset, the group's committed offset, lag.
    Retriable errors (a coordinator still loading) are retried with backoff, then raised."""
    try:
        return retry(
            lambda: _partition_lag(bootstrap, group, topics, pattern),
            lambda exc: _retriable_error(exc) and not _unreachable(exc),  # type: ignore[arg-type]
            "listing offsets",
            attempts,
            log_level=logging.DEBUG,
        )
    except KafkaException as exc:
        if _unreachable(exc):
            # librdkafka has already tried every broker for the metadata timeout (10 s)
            raise KafkaUnavailable(
                f"cannot reach Kafka at {bootstrap} ({_reason(exc)}): is the broker running? "
                "Check kafka.bootstrap_servers"
            ) from None
        raise KafkaUnavailable(f"Kafka at {bootstrap} refused to list offsets: {_reason(exc)}") from None


def check_reachable(bootstrap: str, group: str, timeout_s: float, stop: threading.Event | None = None) -> bool:
    """Raise :class:`KafkaUnavailable` naming ``bootstrap`` when no broker answers within ``timeout_s``.

    Asks in one-second tries, so that a stop signal is handled between them: returns False as soon as
    ``stop`` is set (True once a broker answered)."""
    consumer = _consumer(bootstrap, group)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                consumer.list_topics(timeout=min(1.0, max(0.1, deadline - time.monotonic())))
                return True
            except KafkaException as exc:
                if stop is not None and stop.is_set():
                    return False
                if time.monotonic() >= deadline:
                    raise KafkaUnavailable(
                        f"cannot reach Kafka at {bootstrap} within {timeout_s:g}s ({_reason(exc)}): is the broker "
                        "running? Check kafka.bootstrap_servers"
                    ) from None
    finally:
        consumer.close()


def _unreachable(exc: KafkaException) -> bool:
    error = exc.args[0] if exc.args else None
    code = getattr(error, "code", lambda: None)()
    return code in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT)


def _reason(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else None
    return str(getattr(error, "str", lambda: exc)())


def _partition_lag(bootstrap: str, group: str, topics: list[str], pattern: str | None) -> list[PartitionLag]:
    consumer = _consumer(bootstrap, group)
    try:
        metadata = consumer.list_topics(timeout=10)
        names = sorted(t for t in metadata.topics if t in topics or (pattern is not None and re.search(pattern, t)))
        parts = [TopicPartition(t, p) for t in names for p in sorted(metadata.topics[t].partitions)]
        committed = (
            {(tp.topic, tp.partition): tp.offset for tp in consumer.committed(parts, timeout=10)} if parts else {}
        )
        out = []
        for tp in parts:
            _, high = consumer.get_watermark_offsets(tp, timeout=10)
            done = committed.get((tp.topic, tp.partition))
            out.append(PartitionLag(tp.topic, tp.partition, high, done if done is not None and done >= 0 else None))
        return out
    finally:
        consumer.close()
