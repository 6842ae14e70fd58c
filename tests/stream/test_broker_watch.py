"""The stream's watch on the brokers (no Spark): said once, gives up close to its setting, against a
port where no broker listens (the watch's own client asks it, as in the stream)."""

from __future__ import annotations

import logging

import pytest

from cdc_delta.exceptions import KafkaUnavailable
from cdc_delta.stream.broker_watch import BrokerWatch
from tests.services import free_port


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_broker_gone_is_said_once_and_given_up_on_within_a_quarter_of_the_setting(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    bootstrap = f"127.0.0.1:{free_port()}"
    watch = BrokerWatch(bootstrap, "watch-test", give_up_s=20, clock=clock)
    assert watch.interval_s == 5  # a quarter of the 20 s: the default 15 s would give up after 30 s
    with caplog.at_level(logging.WARNING, logger="cdc_delta.stream.broker_watch"):
        watch.poll()
        assert watch.down_since == 1000.0
        clock.now += 4  # not due: no question asked, nothing said
        watch.poll()
        clock.now += 1
        watch.poll()
        clock.now += 15
        with pytest.raises(KafkaUnavailable, match=r"for 20s \(kafka.unreachable_timeout_seconds 20\)"):
            watch.poll()
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith(f"cannot reach Kafka at {bootstrap}: is the broker running?"), said


def test_waiting_for_ever_asks_every_15_seconds() -> None:
    assert BrokerWatch("127.0.0.1:1", "g", give_up_s=0).interval_s == 15
    assert BrokerWatch("127.0.0.1:1", "g", give_up_s=2).interval_s == 1  # never more often than every second
