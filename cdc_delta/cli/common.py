"""What the command modules share: a Spark session from the config, the tables as SQL names."""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING

from cdc_delta.config import AppConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger("cdc_delta.cli")


def spark_for(config: AppConfig) -> SparkSession:
    from cdc_delta.spark_session import build_session

    return build_session(config.spark)


def register_tables(spark: SparkSession, config: AppConfig) -> list[str]:
    """Make every existing table queryable as ``db.table`` in this session; returns their names."""
    from delta.tables import DeltaTable

    from cdc_delta.columns import quote

    names = []
    for table in config.tables:
        path = config.storage.table_path(table)
        if not DeltaTable.isDeltaTable(spark, path):
            continue
        db, _, _ = table.name.rpartition(".")
        if db:
            spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote(db)}")
        if not spark.catalog.tableExists(table.name):
            spark.catalog.createTable(table.name, path=path, source="delta")
        names.append(table.name)
    return names


def dash(value: object) -> str:
    return "-" if value is None else str(value)


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="path to the YAML config")
