"""The registry client against the stand-in registry over real HTTP: basic auth with the password from
the environment, a refused password named without the password, an unknown id as a reason (asked again
later), a registry answering 503 or not listening retried and then named, a schema that is no Debezium
envelope refused once. No Spark."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from cdc_delta.config import SchemaRegistryConfig
from cdc_delta.decode.schema_registry import AvroSchemas
from cdc_delta.exceptions import SchemaRegistryError
from tests.registry import StandInRegistry

ENVELOPE = json.dumps(
    {
        "type": "record",
        "name": "Envelope",
        "namespace": "x.db.t",
        "fields": [
            {
                "name": "after",
                "type": ["null", {"type": "record", "name": "Value", "fields": [{"name": "id", "type": "int"}]}],
            },
            {"name": "op", "type": "string"},
        ],
    }
)


@pytest.fixture
def registry() -> Iterator[StandInRegistry]:
    server = StandInRegistry(user="cdc", password="s3cret-pw")
    try:
        yield server
    finally:
        server.close()


def schemas(registry: StandInRegistry, monkeypatch: pytest.MonkeyPatch, password: str, **extra: object) -> AvroSchemas:
    monkeypatch.setenv("REGISTRY_PW", password)
    config = SchemaRegistryConfig(
        url=registry.url, username="cdc", password_env="REGISTRY_PW", retry_seconds=1, **extra
    )
    return AvroSchemas(config)


def test_ids_are_read_with_basic_auth_once_each(registry: StandInRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    good = registry.register("x.db.t-value", ENVELOPE)
    client = schemas(registry, monkeypatch, "s3cret-pw")
    assert client.read([good, 77]) == {
        77: f"unknown to the schema registry at {registry.url} (Schema 77 not found (HTTP 404))"
    }
    assert client.texts == {good: ENVELOPE}
    assert client.read([good, 77])  # the unknown id is asked again; the known one is not
    assert registry.asked == [good, 77, 77]


def test_a_refused_password_fails_clearly_and_is_not_shown(
    registry: StandInRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(SchemaRegistryError) as failure:
        schemas(registry, monkeypatch, "wrong-pw").read([1])
    message = str(failure.value)
    assert "HTTP 401" in message and "schema_registry.username" in message and registry.url in message
    assert "wrong-pw" not in message and "s3cret" not in message


def test_a_registry_that_is_down_or_not_listening_is_retried_then_named(
    registry: StandInRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry.down = True
    with pytest.raises(SchemaRegistryError, match=f"schema registry at {registry.url}.*HTTP 503"):
        schemas(registry, monkeypatch, "s3cret-pw").read([1])
    assert registry.requests >= 2 and not registry.asked  # retried; answered 503 each time
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{s.getsockname()[1]}"
    client = AvroSchemas(SchemaRegistryConfig(url=nowhere, retry_seconds=1))
    with pytest.raises(SchemaRegistryError, match=f"cannot reach the schema registry at {nowhere}"):
        client.read([1])


def test_a_schema_that_is_not_an_envelope_is_refused_once(
    registry: StandInRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    union = json.dumps({"type": "record", "name": "E", "fields": [{"name": "x", "type": ["null", "int", "string"]}]})
    bad = registry.register("x-value", union)
    client = schemas(registry, monkeypatch, "s3cret-pw")
    for _ in range(2):
        reason = client.read([bad])[bad]
        assert reason.startswith("not a Debezium envelope schema: Avro union")
    assert registry.asked == [bad]


def test_a_records_key_columns_come_from_its_avro_key_schema_once_per_id(
    registry: StandInRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = {"type": "record", "name": "Key", "namespace": "x.db.t", "fields": [{"name": "a_u005fb", "type": "int"}]}
    key_id = registry.register("x.db.t-key", json.dumps(key))
    client = schemas(registry, monkeypatch, "s3cret-pw")
    wire = b"\x00" + key_id.to_bytes(4, "big") + b"\x02"
    assert client.key_columns(wire) == client.key_columns(wire) == ("a_u005fb",)
    assert registry.asked == [key_id]  # once
    unescaping = AvroSchemas(client.http.config, unescape_names=True)
    assert unescaping.key_columns(wire) == ("a_b",)
    assert client.key_columns(b'{"id": 1}') == ("id",)  # a JSON key beside Avro values
    assert client.key_columns(None) == client.key_columns(b"\x00\x00\x00\x03\x09") == ()  # none; unknown id
