"""The merger's sessions evaluate expressions without generating code (:data:`cdc_delta.merger.run.INTERPRETED`),
the stream's own session keeps its settings, and a setting in the config's ``spark.conf`` wins."""

from __future__ import annotations

import pytest

from cdc_delta.config import parse_config
from cdc_delta.merger.run import INTERPRETED, Merger
from tests.streams import CONFIG

pytestmark = pytest.mark.spark

FACTORY = "spark.sql.codegen.factoryMode"


def settings_seen(spark, tmp_path, spark_conf: dict[str, str]) -> tuple[str, list[str]]:
    """The factory mode in the merger's own session, and in each of its table workers' sessions."""
    config = parse_config(
        {**CONFIG, "storage": {"root": str(tmp_path)}, "merge": {"concurrency": 2}, "spark": {"conf": spark_conf}}
    )
    merger = Merger(spark, config)
    try:
        workers = merger._workers.map(lambda session, _: session.conf.get(FACTORY), [1, 2, 3, 4])
        return merger.spark.conf.get(FACTORY), workers
    finally:
        merger.close()


def test_the_merger_interprets_expressions_and_the_stream_generates_code(spark, tmp_path) -> None:
    own, workers = settings_seen(spark, tmp_path, {})
    assert own == INTERPRETED[FACTORY] == "NO_CODEGEN"
    assert workers == ["NO_CODEGEN"] * 4
    assert spark.conf.get(FACTORY) == "FALLBACK"  # the stream's session: code generated, with a fallback
    assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"


def test_a_setting_in_spark_conf_wins(spark, tmp_path) -> None:
    own, workers = settings_seen(spark, tmp_path, {FACTORY: "FALLBACK"})
    assert own == "FALLBACK"
    assert workers == ["FALLBACK"] * 4
