"""What the command modules share: a Spark session from the config, the tables as SQL names."""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING

from cdc_delta.config import AppConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger("cdc_delta.cli")


def spark_for(config: AppConfig, extra: dict[str, str] | None = None) -> SparkSession:
    from cdc_delta.spark_session import build_session

    return build_session(config.spark, extra)


def dash(value: object) -> str:
    return "-" if value is None else str(value)


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="path to the YAML config")
