"""When /healthz says the stream is unhealthy, and why."""

from __future__ import annotations

import pytest

from cdc_delta.metrics.health import judge, judge_merger

RUNNING = dict(active=True, failure=None, trigger_active=False, waiting_records=0, limit_s=60)


@pytest.mark.parametrize(
    ("state", "healthy", "says"),
    [
        ({}, True, "ok: last batch 5s ago, 0 records waiting"),
        ({"since_last_batch_s": 3600}, True, "ok: last batch 3600s ago"),  # idle: nothing to read
        ({"since_last_batch_s": 3600, "waiting_records": None}, True, "unknown records waiting"),
        ({"since_last_batch_s": 61, "waiting_records": 12}, False, "no batch finished for 61s (limit 60s) while 12"),
        ({"since_last_batch_s": 61, "trigger_active": True}, False, "a batch is still running"),
        ({"since_last_batch_s": 59, "trigger_active": True, "waiting_records": 9}, True, "ok"),
        ({"active": False}, False, "the streaming query has ended"),
        ({"active": False, "failure": "KafkaException: boom"}, False, "has ended: KafkaException: boom"),
    ],
)
def test_health(state: dict, healthy: bool, says: str) -> None:
    health = judge(**{**RUNNING, "since_last_batch_s": 5, **state})
    assert health.healthy is healthy
    assert says in health.reason


@pytest.mark.parametrize(
    ("running_for_s", "since", "healthy", "says"),
    [
        (None, 30.0, True, "ok: last round 30s ago, 2 tables with changes pending"),
        (599.0, 30.0, True, "ok: a round running, 2 tables"),
        (601.0, 30.0, False, "a merge round has run for 601s (limit 600s)"),
        (None, None, True, "ok: no round yet"),
        (12.0, None, True, "ok: the first round running"),
        (601.0, None, False, "a merge round has run for 601s"),
    ],
)
def test_merger_health(running_for_s: float | None, since: float | None, healthy: bool, says: str) -> None:
    health = judge_merger(running_for_s=running_for_s, since_last_round_s=since, pending_tables=2, limit_s=600)
    assert health.healthy is healthy
    assert says in health.reason
