"""Kafka-side offsets: commit the stream's position to its consumer group, read end offsets and lag."""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from cdc_delta.exceptions import KafkaRefused, KafkaUnavailable
from cdc_delta.kafka.client import Brokers, as_brokers, quiet_logging
from cdc_delta.retry import retry

logger = logging.getLogger(__name__)


class _Client:
    """A librdkafka consumer used for metadata and offsets, and the errors it reported to its callback
    (served by ``poll`` only: read after a failure, see :meth:`refusal`)."""

    def __init__(self, where: Brokers | str, group: str) -> None:
        self.target = as_brokers(where)
        self.errors: list[KafkaError] = []
        self.consumer = Consumer(
            {
                **self.target.settings,
                "bootstrap.servers": self.target.bootstrap,
                "group.id": group,
                "error_cb": self.errors.append,
                "enable.auto.commit": False,
                "socket.timeout.ms": 10_000,
                "session.timeout.ms": 10_000,
                **quiet_logging(logger),
            }
        )

    def refusal(self) -> KafkaRefused | None:
        """After a failure: whether the brokers refused this client's credentials, or its TLS handshake
        failed (librdkafka says so only to the error callback, and reports the call itself as a transport
        failure)."""
        user = self.target.settings.get("sasl.username")
        self.consumer.poll(0.5)
        for error in self.errors:
            if error.code() == KafkaError._AUTHENTICATION and user is not None:
                reason = error.str().split("SASL authentication error: ", 1)[-1].split(" (after ")[0]
                return KafkaRefused(
                    f"Kafka at {self.target.bootstrap} refused user {user} ({reason}): check "
                    "kafka.security.username and kafka.security.password_env (or password_file)"
                )
            text = error.str()
            mismatch = _protocol_mismatch(text, self.target.settings.get("security.protocol", "PLAINTEXT"))
            if mismatch is not None:
                return KafkaRefused(f"Kafka at {self.target.bootstrap}: {mismatch}")
            refused_by_broker = error.code() == KafkaError._TRANSPORT and "SSL routines::" in text and " alert " in text
            if error.code() == KafkaError._SSL or refused_by_broker:
                # This side's check of the brokers failed (_SSL), or the brokers sent a TLS alert: a client
                # certificate they require, missing or not signed by a CA they trust.
                reason = text.split("SSL handshake failed: ", 1)[-1].split("SSL routines::", 1)[-1].split(" (after ")[0]
                reason = reason.split(", verify that ssl.ca.location")[0]  # librdkafka's setting, not ours
                return KafkaRefused(
                    f"Kafka at {self.target.bootstrap}: the TLS handshake failed ({reason}): check "
                    "kafka.security.ca_file (the CA that signed the brokers' certificates), check_hostname, "
                    "and certificate_file/key_file where the brokers ask for a client certificate"
                )
        return None

    def close(self) -> None:
        self.consumer.close()


def _plaintext_hint(bootstrap: Brokers | str) -> str:
    """For a plaintext client: that a listener expecting TLS or SASL looks the same to it (librdkafka 2.x
    reports only a connection closed while it asks for the API versions)."""
    if isinstance(bootstrap, str):  # not from a config (generate --bootstrap): no setting to name
        return ""
    if bootstrap.settings.get("security.protocol", "PLAINTEXT").upper() != "PLAINTEXT":
        return ""
    return " (or, where it answers on that port, its listener expects TLS or SASL: kafka.security.protocol)"


def _protocol_mismatch(text: str, protocol: str) -> str | None:
    """Where librdkafka's error says the listener speaks another protocol than this client: which, and the
    setting to fix (not "is the broker running?", nor a CA that is not at fault)."""
    tls = protocol.upper() in ("SSL", "SASL_SSL")
    if not tls and "incorrect security.protocol configuration" in text:  # librdkafka before 2.x says so
        return (
            f"the listener does not speak {protocol} (librdkafka: connecting to an SSL listener?): set "
            "kafka.security.protocol to the listener's, SSL or SASL_SSL, with kafka.security.ca_file"
        )
    signs = ("connecting to a PLAINTEXT broker listener?", "wrong version number", "packet length too long")
    if tls and any(sign in text for sign in signs):
        return (
            f"the listener does not speak TLS, which kafka.security.protocol {protocol} expects (the TLS handshake "
            "got a plaintext answer): set kafka.security.protocol to the listener's, PLAINTEXT or SASL_PLAINTEXT, "
            "or point kafka.bootstrap_servers at its TLS port"
        )
    return None


# A partition whose leader is still being elected or has just moved (a topic created a moment ago, a broker
# restarting) answers again shortly; librdkafka does not flag these retriable on an offsets query.
_LEADERSHIP_MOVING = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.REPLICA_NOT_AVAILABLE,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError._UNKNOWN_PARTITION,
    }
)


def _retriable_error(exc: Exception) -> bool:
    """A coordinator still loading or moving (as on a new broker), or a partition leader being elected,
    answers again shortly."""
    if not isinstance(exc, KafkaException):
        return False
    if _code(exc) in _LEADERSHIP_MOVING:
        return True
    error = exc.args[0] if exc.args else None
    return bool(getattr(error, "retriable", lambda: False)()) or "COORDINATOR" in str(exc)


def commit_group_offsets(
    bootstrap: Brokers | str, group: str, offsets: dict[str, dict[str, int]], attempts: int = 6
) -> bool:
    """Commit ``max processed offset + 1`` per partition to ``group``. Best effort: retriable errors
    (a coordinator still loading, as on a new broker) are retried with backoff; a failure is logged,
    never raised, since the Delta commit already made the batch durable."""
    parts = [TopicPartition(t, int(p), o + 1) for t, ps in offsets.items() for p, o in ps.items()]
    client = _Client(bootstrap, group)
    try:
        retry(
            lambda: client.consumer.commit(offsets=parts, asynchronous=False),
            _retriable_error,
            f"committing offsets to consumer group {group}",
            attempts,
            log_level=logging.DEBUG,  # a coordinator still loading: expected on a new broker
        )
        return True
    except KafkaException as exc:
        why = client.refusal() or _reason(exc)
        logger.warning("could not commit offsets to consumer group %s (lag tools will lag behind): %s", group, why)
        return False
    finally:
        client.close()


@dataclass(frozen=True)
class PartitionLag:
    """End offset, committed offset and lag of one topic partition."""

    topic: str
    partition: int
    end: int
    committed: int | None
    earliest: int = 0
    """The earliest offset Kafka still holds (retention deletes below it)."""

    @property
    def lag(self) -> int | None:
        return None if self.committed is None else max(0, self.end - self.committed)

    @property
    def lost(self) -> int:
        """Records Kafka deleted before the group read them (its committed offset below the earliest)."""
        return 0 if self.committed is None else max(0, self.earliest - self.committed)


def partition_lag(
    bootstrap: Brokers | str, group: str, topics: list[str], pattern: str | None, attempts: int = 6
) -> list[PartitionLag]:
    """Per partition of the subscribed topics: end offset, the group's committed offset, lag.
    Retriable errors (a coordinator still loading) are retried with backoff, then raised; credentials the
    brokers refuse, or a topic the user may not describe, raise :class:`KafkaRefused`."""
    try:
        return retry(
            lambda: _partition_lag(bootstrap, group, topics, pattern),
            lambda exc: _retriable_error(exc) and not _unreachable(exc),  # type: ignore[arg-type]
            "listing offsets",
            attempts,
            log_level=logging.DEBUG,
        )
    except KafkaException as exc:
        user = as_brokers(bootstrap).settings.get("sasl.username")
        acl = f" (where the brokers use ACLs, user {user} needs Read on consumer group {group})" if user else ""
        if _unreachable(exc):
            # librdkafka has already tried every broker for the metadata timeout (10 s)
            raise KafkaUnavailable(
                f"cannot reach Kafka at {bootstrap} ({_reason(exc)}): is the broker running? "
                f"Check kafka.bootstrap_servers{_plaintext_hint(bootstrap)}{acl}"
            ) from None
        raise KafkaUnavailable(f"Kafka at {bootstrap} refused to list offsets: {_reason(exc)}{acl}") from None


def check_reachable(
    bootstrap: Brokers | str,
    group: str,
    timeout_s: float,
    stop: threading.Event | None = None,
    setting: str = "kafka.bootstrap_servers",
) -> bool:
    """Raise :class:`KafkaUnavailable` naming ``bootstrap`` (and the ``setting`` that gave it) when no
    broker answers within ``timeout_s``.

    Asks in one-second tries, so that a stop signal is handled between them: returns False as soon as
    ``stop`` is set (True once a broker answered)."""
    client = _Client(bootstrap, group)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                client.consumer.list_topics(timeout=min(1.0, max(0.1, deadline - time.monotonic())))
                return True
            except KafkaException as exc:
                if stop is not None and stop.is_set():
                    return False
                refused = client.refusal()
                if refused is not None:
                    raise refused from None
                if time.monotonic() >= deadline:
                    raise KafkaUnavailable(
                        f"cannot reach Kafka at {bootstrap} within {timeout_s:g}s ({_reason(exc)}): is the broker "
                        f"running? Check {setting}{_plaintext_hint(bootstrap)}"
                    ) from None
    finally:
        client.close()


def _code(exc: KafkaException) -> int | None:
    """The librdkafka error code ``exc`` carries (None where it carries no KafkaError)."""
    error = exc.args[0] if exc.args else None
    return getattr(error, "code", lambda: None)()


def _unreachable(exc: KafkaException) -> bool:
    return _code(exc) in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT)


def _reason(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else None
    return str(getattr(error, "str", lambda: exc)())


def _partition_lag(bootstrap: Brokers | str, group: str, topics: list[str], pattern: str | None) -> list[PartitionLag]:
    client = _Client(bootstrap, group)
    try:
        return _listed_lag(client, topics, pattern)
    except KafkaException:
        refused = client.refusal()  # credentials refused look like a transport failure
        if refused is not None:
            raise refused from None
        raise
    finally:
        client.close()


def _listed_lag(client: _Client, topics: list[str], pattern: str | None) -> list[PartitionLag]:
    consumer = client.consumer
    metadata = consumer.list_topics(timeout=10)
    for topic in sorted(set(topics) - set(metadata.topics)):  # not there, or hidden from this user
        error = consumer.list_topics(topic=topic, timeout=10).topics[topic].error
        if error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            user = client.target.settings.get("sasl.username", "ANONYMOUS")
            raise KafkaRefused(
                f"Kafka at {client.target.bootstrap} does not let user {user} describe topic {topic}: grant it "
                f"Describe and Read on the topic (kafka-acls --add --allow-principal User:{user} --operation "
                f"Describe --operation Read --topic {topic}), or fix kafka.topics"
            )
    names = sorted(t for t in metadata.topics if t in topics or (pattern is not None and re.search(pattern, t)))
    parts = [TopicPartition(t, p) for t in names for p in sorted(metadata.topics[t].partitions)]
    committed = {(tp.topic, tp.partition): tp.offset for tp in consumer.committed(parts, timeout=10)} if parts else {}
    out = []
    for tp in parts:
        low, high = consumer.get_watermark_offsets(tp, timeout=10)
        done = committed.get((tp.topic, tp.partition))
        out.append(PartitionLag(tp.topic, tp.partition, high, done if done is not None and done >= 0 else None, low))
    return out
