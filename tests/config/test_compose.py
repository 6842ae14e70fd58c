"""The compose files for Docker users, checked without Docker: every file a service names exists, the
stream's config (with the Avro override's environment) loads, and the connector files with each
service's ``--set`` overrides load (the Avro converters in place of JSON)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from cdc_delta.config import load_config
from cdc_delta.connect.files import load_connector_file, parse_overrides

ROOT = Path(__file__).parents[2]


def compose(*names: str) -> dict[str, Any]:
    """The services of ``names`` merged as ``docker compose -f a -f b`` merges them (maps merge, lists and
    scalars are replaced)."""

    def merge(base: Any, top: Any) -> Any:
        if isinstance(base, dict) and isinstance(top, dict):
            return {**base, **{k: merge(base.get(k), v) for k, v in top.items()}}
        return top

    out: dict[str, Any] = {}
    for name in names:
        out = merge(out, yaml.safe_load((ROOT / name).read_text()))
    return out["services"]


def app_path(path: str) -> Path:
    """A path inside the cdc-delta image (/app is the repository) as a path in the checkout."""
    assert path.startswith("/app/"), path
    return ROOT / path.removeprefix("/app/")


def test_the_json_and_avro_stacks_name_files_that_exist_and_load() -> None:
    for files, value_format in ((["compose.yaml"], "json"), (["compose.yaml", "compose.avro.yaml"], "avro")):
        services = compose(*files)
        for service in services.values():
            build = service.get("build")
            if build:
                assert (ROOT / build["context"] / build["dockerfile"]).exists(), build
        stream = services["cdc-delta"]
        config_path = app_path(stream["command"][stream["command"].index("--config") + 1])
        config = load_config(config_path, env=stream.get("environment", {}))
        assert config.kafka.value_format == value_format
        port = config.metrics.port  # published, and probed by the healthcheck
        assert f"{port}:{port}" in stream["ports"] and f":{port}/healthz" in " ".join(stream["healthcheck"]["test"])
        register = services["register-connector"]["command"]
        sets = [register[i + 1] for i, arg in enumerate(register) if arg == "--set"]
        connector = load_connector_file(app_path(register[2]), parse_overrides(sets))
        converter = connector.config["value.converter"]
        if value_format == "avro":
            assert converter == "io.confluent.connect.avro.AvroConverter"
            assert connector.config["value.converter.schema.registry.url"] == config.schema_registry.url
            assert config.kafka.unescape_field_names == (
                connector.config.get("field.name.adjustment.mode") == "avro_unicode"
            )
        else:
            assert converter == "org.apache.kafka.connect.json.JsonConverter"
