"""What the command modules share: a Spark session from the config, the tables as SQL names."""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

from cdc_delta.config import AppConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc_delta.lease import Holder, Role

logger = logging.getLogger("cdc_delta.cli")


def spark_for(config: AppConfig, extra: dict[str, str] | None = None) -> SparkSession:
    from cdc_delta.spark_session import build_session

    return build_session(config.spark, extra)


@contextmanager
def session_meanwhile(config: AppConfig) -> Iterator[Callable[[], SparkSession]]:
    """Start the Spark session in a thread while the block does what needs none (a signal, a wait): the
    block gets a function that returns the session, waiting for it where it is not up yet."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1, thread_name_prefix="spark-start") as pool:
        started = pool.submit(spark_for, config)
        yield started.result


@contextmanager
def leases(
    config: AppConfig, roles: list[Role], command: str, on_lost: Callable[[Holder], Any] | None = None
) -> Iterator[None]:
    """Hold the leases of ``roles`` in the lake for the block (:mod:`cdc_delta.lease`): a second process
    of the same app on the same lake is refused, naming the holder."""
    from cdc_delta.lease import Lease

    with ExitStack() as held:
        for role in roles:
            held.enter_context(Lease(config, role, command, on_lost))
        yield


def run_leased(
    config: AppConfig, roles: list[Role], command: str, stop: threading.Event, body: Callable[[], int]
) -> int:
    """Run ``body`` holding the leases of ``roles`` (:func:`leases`); where another process takes one
    over meanwhile, ``stop`` is set (the body stops as on SIGTERM) and the command ends with one line,
    :data:`~cdc_delta.exceptions.EXIT_CONFIG`."""
    from cdc_delta.exceptions import EXIT_CONFIG

    lost: list[str] = []

    def taken_over(holder: Holder) -> None:
        lost.append(holder.describe())
        stop.set()

    with leases(config, roles, command, taken_over):
        code = body()
    if lost:
        print(
            f"cdc-delta: error: {command} stopped: another process took its lease over ({lost[0]}); run one "
            f"{command} per app and lake",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    return code


def dash(value: object) -> str:
    return "-" if value is None else str(value)


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="path to the YAML config")


def utc_time(text: str) -> dt.datetime:
    """A time given on the command line, in UTC: naive means UTC, an offset is honoured."""
    try:
        when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace(" ", "T", 1))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time: write YYYY-MM-DD, YYYY-MM-DDTHH:MM (UTC) or YYYY-MM-DDTHH:MM+08:00"
        ) from None
    if when.tzinfo is None:
        return when.replace(tzinfo=dt.timezone.utc)
    return when.astimezone(dt.timezone.utc)
