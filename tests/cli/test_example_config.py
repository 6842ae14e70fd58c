"""streaming/example-config.yaml passes ``check-config`` as shipped: no environment to set first (no Spark)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cdc_delta.cli.main import main
from cdc_delta.config import load_config

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "streaming" / "example-config.yaml"


def test_the_example_passes_check_config_as_shipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in [n for n in os.environ if n.endswith("PASSWORD")]:  # nothing the example needs from here
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # started from elsewhere: its relative paths are taken from its own folder
    assert main(["check-config", "--config", str(EXAMPLE)]) == 0
    assert f"config {EXAMPLE} is valid" in capsys.readouterr().out


def test_the_example_names_no_variable_and_ships_the_file_it_names(monkeypatch: pytest.MonkeyPatch) -> None:
    config = load_config(EXAMPLE, env={})  # every password_env would have to be set in this (empty) environment
    sources = [config.source, config.kafka.security, config.connect, config.schema_registry]
    sources += [t.source_count_jdbc for t in config.tables if t.source_count_jdbc]
    assert not [s.SECTION for s in sources if s.password_env]
    assert config.source.password_file == str(EXAMPLE.parent / "example-secrets" / "source-password")
    monkeypatch.chdir(ROOT)  # read from where the commands of the README run
    assert config.source.password() == "change-me"
