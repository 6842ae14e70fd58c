"""What the command modules share: a Spark session from the config, the tables as SQL names."""

from __future__ import annotations

import argparse
import datetime as dt
import logging
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
