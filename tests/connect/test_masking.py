"""Masked columns: the config's ``mask:`` refused where Debezium cannot honour it, turned into Debezium's
column masking settings by ``connectors apply`` (against a scripted worker), and the salt, which Debezium
takes in a setting's name, never printed."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdc_delta.cli.main import main
from cdc_delta.config import parse_config
from cdc_delta.connect.client import ConnectClient
from cdc_delta.connect.files import REDACTED, ConnectorFile, config_diff, redacted
from cdc_delta.connect.masking_settings import masking_settings, with_masking
from cdc_delta.exceptions import ConfigError
from tests.connect.test_http import http

SALT = "s4lt-for-tests.with.dots"
USERS = {"name": "shop.users", "topics": ["srv.shop.users"], "key": ["id"]}
SHARDS = {
    "name": "{db}.customers",
    "topic_pattern": r"srv\.shard_\d+\.customers",
    "source_database": r"shard_\d+",
    "source_table": "customers",
}


def config(tables: list[dict[str, Any]], **masking: str) -> Any:
    return parse_config(
        {"app_id": "m", "storage": {"root": "/lake"}, "tables": tables, "masking": masking},
        env={"MASK_SALT": SALT},
    )


def test_mask_rules_become_debezium_settings_per_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASK_SALT", SALT)
    cfg = config(
        [
            {**USERS, "mask": {"email": "hash", "phone": "stars 8", "note": "truncate 20"}},
            {**SHARDS, "mask": {"email": "hash"}},
        ],
        password_env="MASK_SALT",
    )
    assert masking_settings(cfg) == {
        f"column.mask.hash.v2.SHA-256.with.salt.{SALT}": r"shop\.users\.email,(?:shard_\d+)\.(?:customers)\.email",
        "column.mask.with.8.chars": r"shop\.users\.phone",
        "column.truncate.to.20.chars": r"shop\.users\.note",
    }
    # What the lake then holds for a hashed column: Debezium's v2 hash, which anyone with the salt recomputes.
    assert len(hashlib.sha256((SALT + "jane@example.com").encode()).hexdigest()) == 64


def test_a_connector_file_keeps_its_own_columns_and_gets_the_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASK_SALT", SALT)
    cfg = config([{**USERS, "mask": {"phone": "stars 8"}}], password_env="MASK_SALT")
    file = ConnectorFile("c", {"connector.class": "X", "column.mask.with.8.chars": r"crm\.leads\.phone"}, "c.yaml")
    masked, touched = with_masking(file, cfg)
    assert masked.config["column.mask.with.8.chars"] == r"crm\.leads\.phone,shop\.users\.phone"
    assert touched == ["column.mask.with.8.chars"]
    assert with_masking(masked, cfg) == (masked, [])  # applied again: nothing more


@pytest.mark.parametrize(
    ("table", "masking", "message"),
    [
        (
            {**USERS, "mask": {"id": "hash"}},
            {"password_env": "MASK_SALT"},
            "mask: id is in the key: Debezium never masks the Kafka key",
        ),
        ({**USERS, "mask": {"email": "sha1"}}, {"password_env": "MASK_SALT"}, "'sha1' is not a mask rule: write hash"),
        ({**USERS, "mask": {"email": "stars"}}, {}, "'stars' is not a mask rule"),
        (
            {**USERS, "mask": {"email": "hash"}},
            {},
            "mask: hash (tables shop.users) needs a salt: set masking.password_env",
        ),
        (
            {**USERS, "mask": {"email": "hash"}},
            {"password_env": "NOT_SET_SALT"},
            "masking.password_env names NOT_SET_SALT, which is not set in the environment",
        ),
    ],
)
def test_a_mask_debezium_cannot_honour_is_refused_in_one_line(
    table: dict[str, Any], masking: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        config([table], **masking)
    assert message in str(refused.value), str(refused.value)


def test_the_salt_is_never_printed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: Any) -> None:
    monkeypatch.setenv("MASK_SALT", SALT)
    key = f"column.mask.hash.v2.SHA-256.with.salt.{SALT}"
    assert redacted({key: "a"}) == {f"column.mask.hash.v2.SHA-256.with.salt.{REDACTED}": "a"}
    assert SALT not in "\n".join(config_diff({key: "a"}, {key: "a,b"}).lines())

    path = tmp_path / "cdc.yaml"
    data = {"app_id": "m", "storage": {"root": str(tmp_path)}, "tables": [{**USERS, "mask": {"email": "hash"}}]}
    path.write_text(yaml.safe_dump({**data, "masking": {"password_env": "MASK_SALT"}}))
    connector = tmp_path / "c.yaml"
    connector.write_text("name: c\nconfig:\n  connector.class: X\n  topic.prefix: srv\n")
    conn, worker, _ = http([(404, {"error_code": 404, "message": "not found"}), (201, {})])
    monkeypatch.setattr("cdc_delta.cli.connectors.client_for", lambda args: ConnectClient(conn))
    assert main(["connectors", "apply", str(connector), "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert SALT not in out and f"  + column.mask.hash.v2.SHA-256.with.salt.{REDACTED} = shop\\.users\\.email" in out
    assert "(added by cdc-delta for the tables' mask:, so that Kafka never holds them: column.mask.hash" in out
    sent = worker.requests[-1]
    assert sent.method == "PUT" and key.encode() in sent.body  # the worker gets the real setting


def test_an_empty_salt_and_an_apply_that_would_drop_the_masking_are_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: Any
) -> None:
    monkeypatch.setenv("MASK_SALT", "  \n")
    cfg = config([{**USERS, "mask": {"email": "hash"}}], password_env="MASK_SALT")
    with pytest.raises(ConfigError, match="masking: the salt in MASK_SALT is empty"):
        masking_settings(cfg)
    # Debezium takes a comma as the end of a pattern: a source regex with one is refused
    with pytest.raises(ConfigError, match=r"without a comma"):
        config([{**SHARDS, "source_database": r"shard_\d{1,3}", "mask": {"email": "stars 4"}}])

    connector = tmp_path / "c.yaml"
    connector.write_text("name: c\nconfig:\n  connector.class: X\n")
    masked = {"name": "c", "connector.class": "X", f"column.mask.hash.v2.SHA-256.with.salt.{SALT}": "a\\.b\\.c"}
    conn, worker, _ = http([(200, masked)])
    monkeypatch.setattr("cdc_delta.cli.connectors.client_for", lambda args: ConnectClient(conn))
    assert main(["connectors", "apply", str(connector)]) == 2
    err = capsys.readouterr().err
    assert "without --config would remove its column masking" in err and SALT not in err, err
    assert [r.method for r in worker.requests] == ["GET"]  # nothing sent
