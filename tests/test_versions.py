"""The JVM jars fetched from Maven Central match the pinned Python packages."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

from cdc_delta.spark_session import DELTA_VERSION, SPARK_VERSION

POM = (Path(__file__).parents[1] / "jvm" / "spark" / "pom.xml").read_text()


def test_pom_versions_match_installed_packages() -> None:
    assert re.search(r"<spark.version>(.*)</spark.version>", POM).group(1) == SPARK_VERSION == version("pyspark")
    assert re.search(r"<delta.version>(.*)</delta.version>", POM).group(1) == DELTA_VERSION == version("delta-spark")
