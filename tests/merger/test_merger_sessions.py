"""The merger's sessions evaluate expressions without generating code (:data:`cdc_delta.merger.run.INTERPRETED`),
the stream's own session keeps its settings, and a setting in the config's ``spark.conf`` is left to it."""

from __future__ import annotations

import pytest

from cdc_delta.config import parse_config
from cdc_delta.merger.run import INTERPRETED, Merger
from tests.streams import CONFIG

pytestmark = pytest.mark.spark

FACTORY = "spark.sql.codegen.factoryMode"
WHOLE_STAGE = "spark.sql.codegen.wholeStage"


def settings_seen(spark, tmp_path, spark_conf: dict[str, str]) -> list[tuple[str, str]]:
    """Both settings in the merger's own session, then in each of its table workers' sessions."""
    config = parse_config(
        {**CONFIG, "storage": {"root": str(tmp_path)}, "merge": {"concurrency": 2}, "spark": {"conf": spark_conf}}
    )
    merger = Merger(spark, config)

    def seen(session, _item=None) -> tuple[str, str]:
        return session.conf.get(FACTORY), session.conf.get(WHOLE_STAGE)

    try:
        return [seen(merger.spark), *merger._workers.map(seen, [1, 2, 3, 4])]
    finally:
        merger.close()


def test_the_merger_interprets_expressions_and_the_stream_generates_code(spark, tmp_path) -> None:
    assert INTERPRETED == {FACTORY: "NO_CODEGEN", WHOLE_STAGE: "false"}
    assert settings_seen(spark, tmp_path, {}) == [("NO_CODEGEN", "false")] * 5
    # The stream's session: Spark's defaults, code generated (with a fallback), whole stages.
    assert (spark.conf.get(FACTORY), spark.conf.get(WHOLE_STAGE)) == ("FALLBACK", "true")


def test_a_setting_in_spark_conf_is_left_to_it(spark, tmp_path) -> None:
    """The config's ``spark.conf`` built the process's Spark context (the CLI's way), which every session
    made from it takes: the merger does not set what it names."""
    assert settings_seen(spark, tmp_path, {FACTORY: "FALLBACK"}) == [("FALLBACK", "false")] * 5
