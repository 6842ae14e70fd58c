"""The JVM jars fetched from Maven Central match the pinned Python packages."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

from cdc_delta.spark_session import DELTA_VERSION, SPARK_VERSION

JVM = Path(__file__).parents[1] / "jvm"
POM = (JVM / "spark" / "pom.xml").read_text()
DECODER_POM = (JVM / "decoder" / "pom.xml").read_text()


def test_pom_versions_match_installed_packages() -> None:
    assert re.search(r"<spark.version>(.*)</spark.version>", POM).group(1) == SPARK_VERSION == version("pyspark")
    assert re.search(r"<delta.version>(.*)</delta.version>", POM).group(1) == DELTA_VERSION == version("delta-spark")


def test_the_decoder_is_built_against_the_installed_spark_jackson_and_scala() -> None:
    """cdc-delta's own JVM code (jvm/decoder) compiles against what the pyspark wheel runs it with."""
    import pyspark

    assert re.search(r"<spark.version>(.*)</spark.version>", DECODER_POM).group(1) == version("pyspark")
    jackson = re.search(r"<jackson.version>(.*)</jackson.version>", DECODER_POM).group(1)
    assert (Path(pyspark.__file__).parent / "jars" / f"jackson-core-{jackson}.jar").is_file()
    scala = re.search(r"<scala.version>(.*)</scala.version>", DECODER_POM).group(1)
    assert (Path(pyspark.__file__).parent / "jars" / f"scala-library-{scala}.jar").is_file()
