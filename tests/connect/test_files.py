"""Connector files, overrides, secret redaction, diffs and idempotent apply (against a scripted worker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_delta.connect.apply import apply, plan
from cdc_delta.connect.client import ConnectClient
from cdc_delta.connect.files import REDACTED, config_diff, load_connector_file, parse_overrides, shown
from cdc_delta.exceptions import ConnectorError
from tests.connect.test_http import http

ROOT = Path(__file__).parents[2]


def test_the_projects_connector_files_load(tmp_path: Path) -> None:
    for path in sorted((ROOT / "connectors").glob("*.yaml")):
        file = load_connector_file(path)
        assert file.config["connector.class"].startswith("io.debezium.connector.")
        assert file.config["bigint.unsigned.handling.mode"] == "precise"
        assert file.config["skipped.operations"] == "none"
        assert file.config["database.password"].startswith("${file:")
        assert "name" not in file.config


def test_overrides_and_the_name(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text('{"name": "a", "config": {"connector.class": "X", "tasks.max": 1, "snapshot.locking": false}}')
    file = load_connector_file(path, parse_overrides(["tasks.max=2", "name=b", "database.hostname=db=1"]))
    assert file.name == "b"
    assert file.config == {
        "connector.class": "X",
        "tasks.max": "2",
        "snapshot.locking": "false",
        "database.hostname": "db=1",
    }


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[1, 2]", "must hold a mapping"),
        ('{"config": {"connector.class": "X"}}', "has no connector name"),
        ('{"name": "a", "config": {"tasks.max": 1}}', "has no connector.class"),
        ('{"name": "a", "config": {"connector.class": "X", "nested": {"a": 1}}}', "nested values"),
        ("{not yaml: [", "is not valid JSON or YAML"),
    ],
)
def test_bad_files_are_named_with_the_problem(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ConnectorError, match=rf"connector file {path}.*{message}"):
        load_connector_file(path)


def test_bad_override() -> None:
    with pytest.raises(ConnectorError, match="--set 'oops' is not KEY=VALUE"):
        parse_overrides(["oops"])


def test_secrets_are_masked_but_config_provider_references_shown() -> None:
    assert shown("database.password", "hunter2") == REDACTED
    assert shown("schema.history.internal.producer.sasl.jaas.config", "x required password=y;") == REDACTED
    assert shown("value.converter.basic.auth.user.info", "u:p") == REDACTED
    assert shown("database.password", "${file:/run/secrets/db.properties:password}") == (
        "${file:/run/secrets/db.properties:password}"
    )
    assert shown("database.hostname", "db") == "db"
    lines = config_diff({"database.password": "old"}, {"database.password": "new", "a": "1"}).lines()
    assert lines == ["  + a = 1", f"  ~ database.password: {REDACTED} -> {REDACTED}"]
    assert not any("old" in line or "new" in line for line in lines)


def test_apply_creates_then_the_same_file_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("name: c\nconfig:\n  connector.class: X\n  tasks.max: 1\n")
    file = load_connector_file(path)
    stored = {"name": "c", "connector.class": "X", "tasks.max": "1"}
    conn, worker, _ = http([(404, {"error_code": 404, "message": "not found"}), (201, {}), (200, stored)])
    client = ConnectClient(conn)
    exists, diff = plan(client, file)
    assert (exists, diff.added) == (False, {"connector.class": "X", "tasks.max": "1"})
    assert apply(client, file, diff, exists, dry_run=False).action == "created"
    exists, diff = plan(client, file)
    assert apply(client, file, diff, exists, dry_run=False).action == "unchanged"
    assert [r.method for r in worker.requests] == ["GET", "PUT", "GET"]  # nothing sent the second time


def test_dry_run_sends_nothing(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("name: c\nconfig:\n  connector.class: X\n  tasks.max: 2\n")
    file = load_connector_file(path)
    conn, worker, _ = http([(200, {"name": "c", "connector.class": "X", "tasks.max": "1", "gone": "y"})])
    client = ConnectClient(conn)
    exists, diff = plan(client, file)
    result = apply(client, file, diff, exists, dry_run=True)
    assert result.action == "would update"
    assert (diff.changed, diff.removed) == ({"tasks.max": ("1", "2")}, {"gone": "y"})
    assert len(worker.requests) == 1
