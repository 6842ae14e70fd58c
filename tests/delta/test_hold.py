"""The write hold: maintenance that keeps losing write races pauses the stream's writes to one table,
and the stream waits for it, never longer than its deadline."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from cdc_delta.config import parse_config
from cdc_delta.delta.hold import hold_path, holding_writes, wait_while_held
from cdc_delta.lock import lock_path
from cdc_delta.maintenance import commands

CONFLICT = "io.delta.exceptions.ConcurrentDeleteReadException: [DELTA_CONCURRENT_DELETE_READ] a file was deleted"


def test_no_hold_means_no_wait(tmp_path: Path) -> None:
    assert wait_while_held(hold_path(tmp_path / "m.lock", "shop.orders"), "shop.orders") == 0.0


def test_the_stream_waits_until_the_hold_is_released(tmp_path: Path) -> None:
    hold = hold_path(tmp_path / "m.lock", "shop.orders")
    released = threading.Event()

    def maintenance_run() -> None:
        with holding_writes(hold, max_s=60, why="OPTIMIZE shop.orders lost 3 races"):
            time.sleep(1.0)
        released.set()

    worker = threading.Thread(target=maintenance_run)
    worker.start()
    while not hold.exists():
        time.sleep(0.01)
    assert json.loads(hold.read_text())["why"] == "OPTIMIZE shop.orders lost 3 races"
    wait_while_held(hold, "shop.orders")
    assert released.is_set() and not hold.exists()  # it returned only once the hold was gone
    worker.join()


def test_a_dead_holders_hold_is_waited_for_only_until_its_deadline(tmp_path: Path) -> None:
    hold = hold_path(tmp_path / "m.lock", "shop.orders")
    hold.write_text(json.dumps({"until": time.time() + 1.0, "pid": 1}))
    wait_while_held(hold, "shop.orders")
    assert time.time() >= json.loads(hold.read_text())["until"]  # left in place, past its deadline
    assert wait_while_held(hold, "shop.orders") == 0.0  # expired: the next batch does not wait at all
    hold.write_text("{not json")
    assert wait_while_held(hold, "shop.orders") == 0.0  # unreadable: not a hold


def test_holds_are_per_table_beside_the_lock(tmp_path: Path) -> None:
    assert hold_path(tmp_path / "m.lock", "shop.orders") == tmp_path / "_cdc_hold.shop.orders.json"
    assert hold_path(tmp_path / "m.lock", "shop.orders") != hold_path(tmp_path / "m.lock", "shop.items")


def _config(tmp_path: Path):  # type: ignore[no-untyped-def]
    return parse_config(
        {
            "app_id": "cdc",
            "storage": {"root": str(tmp_path)},
            "merge": {"max_delay_seconds": 0},
            "maintenance": {"stream_hold_max_seconds": 45},
            "tables": [{"name": "shop.orders", "topics": ["t"], "key": ["id"]}],
        }
    )


def test_maintenance_holds_the_stream_only_after_losing_races(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("cdc_delta.retry.time.sleep", lambda _s: None)  # no backoff in a unit test
    config = _config(tmp_path)
    hold = hold_path(lock_path(config, "maintenance"), "shop.orders")
    attempts: list[bool] = []  # per attempt: was the hold in place?

    def optimize() -> str:
        attempts.append(hold.exists())
        if len(attempts) <= commands.RACES_BEFORE_HOLD + 1:  # loses every race, and once more under hold
            raise RuntimeError(CONFLICT)
        return "committed"

    assert commands.beside_stream(optimize, "OPTIMIZE shop.orders", config, config.tables[0].name) == "committed"
    races = commands.RACES_BEFORE_HOLD
    assert attempts == [False] * races + [True, True]
    assert not hold.exists()  # released after the commit


def test_the_hold_deadline_comes_from_config_and_other_errors_take_no_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("cdc_delta.retry.time.sleep", lambda _s: None)
    config = _config(tmp_path)
    hold = hold_path(lock_path(config, "maintenance"), "shop.orders")
    deadlines: list[float] = []

    def optimize() -> None:
        if hold.exists():
            deadlines.append(json.loads(hold.read_text())["until"] - time.time())
            return
        raise RuntimeError(CONFLICT)

    commands.beside_stream(optimize, "OPTIMIZE shop.orders", config, config.tables[0].name)
    assert len(deadlines) == 1 and 40 < deadlines[0] <= 45

    def broken() -> None:
        raise RuntimeError("[PATH_NOT_FOUND] no such table")

    with pytest.raises(RuntimeError, match="PATH_NOT_FOUND"):
        commands.beside_stream(broken, "OPTIMIZE shop.orders", config, config.tables[0].name)
    assert not hold.exists()
