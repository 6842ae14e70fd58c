"""Which broker answers the offsets query waits out, and which it raises at once (the broker is faked here:
the real one is behind every stream test; a leader election cannot be timed there)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from cdc_delta.exceptions import KafkaUnavailable
from cdc_delta.kafka import offsets
from cdc_delta.kafka.offsets import PartitionLag, partition_lag


def _answers(monkeypatch: pytest.MonkeyPatch, *answers: KafkaError | list[PartitionLag]) -> list[int]:
    calls: list[int] = []
    pending = list(answers)

    def fake(*_: object) -> list[PartitionLag]:
        calls.append(1)
        answer = pending.pop(0)
        if isinstance(answer, KafkaError):
            raise KafkaException(answer)
        return answer

    monkeypatch.setattr(offsets, "_partition_lag", fake)
    monkeypatch.setattr("cdc_delta.retry.time.sleep", lambda _s: None)  # the backoff
    return calls


@pytest.mark.parametrize(
    "code", [KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError._UNKNOWN_PARTITION]
)
def test_a_leader_being_elected_is_waited_out(monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    # librdkafka does not flag these retriable on a watermark query: a topic created a moment ago answers so
    lag = [PartitionLag("t", 0, 5, 3)]
    calls = _answers(monkeypatch, KafkaError(code), KafkaError(code), lag)
    assert partition_lag("127.0.0.1:9", "g", ["t"], None) == lag
    assert len(calls) == 3


def test_a_leader_that_never_comes_is_one_error_naming_the_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _answers(monkeypatch, *[KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)] * 3)
    with pytest.raises(KafkaUnavailable, match=r"Kafka at 127.0.0.1:9 refused to list offsets: .*Not leader"):
        partition_lag("127.0.0.1:9", "g", ["t"], None, attempts=3)
    assert len(calls) == 3


def test_a_refusal_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _answers(monkeypatch, KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    with pytest.raises(KafkaUnavailable):
        partition_lag("127.0.0.1:9", "g", ["t"], None)
    assert len(calls) == 1
