"""Merges give way to landings (``cdc_delta.merger.gate``): a merge waits for the landing running when it
asks, and only for that one."""

from __future__ import annotations

import threading
import time

from cdc_delta.merger.gate import LandingGate


def test_no_landing_no_wait() -> None:
    t0 = time.monotonic()
    LandingGate().give_way(timeout_s=5)
    assert time.monotonic() - t0 < 1


def test_a_merge_waits_for_the_running_landing_only() -> None:
    gate = LandingGate()
    first_ends, second_started, second_ends = threading.Event(), threading.Event(), threading.Event()
    order: list[str] = []

    def landings() -> None:
        with gate.landing():
            first_ends.wait(5)
            order.append("first landed")
        with gate.landing():  # the next landing starts at once: the merge goes on regardless
            second_started.set()
            second_ends.wait(5)
            order.append("second landed")

    stream = threading.Thread(target=landings)
    stream.start()
    while not gate._running:  # the first landing runs
        time.sleep(0.01)
    merge = threading.Thread(target=lambda: (gate.give_way(timeout_s=5), order.append("merge started")))
    merge.start()
    time.sleep(0.2)
    assert order == []  # waiting for the first landing
    first_ends.set()
    merge.join(5)
    assert second_started.wait(5)
    assert order == ["first landed", "merge started"]
    second_ends.set()
    stream.join(5)


def test_a_landing_that_never_ends_is_waited_for_at_most_the_timeout() -> None:
    gate = LandingGate()
    with gate.landing():
        t0 = time.monotonic()
        gate.give_way(timeout_s=0.3)
        assert 0.25 < time.monotonic() - t0 < 3
