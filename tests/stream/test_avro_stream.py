"""Avro through a real broker and the stream as a process: the real connector's changes of the wide
table (every MySQL type, schema changes, a truncate, a key widening; tests/events/debezium) produced
once as JsonConverter wrote them and once with confluent-kafka's AvroSerializer (fastavro) through
the stand-in registry. The two Delta tables are equal, value for value and type for type."""

from __future__ import annotations

import json
import socket
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from cdc_delta import columns as C
from cdc_delta.config import load_config
from cdc_delta.demo.avro_encoding import avro_datum, avro_schema
from cdc_delta.demo.producer import ensure_topics
from tests.events.test_captured_debezium import RECORDS
from tests.registry import StandInRegistry
from tests.services import caught_up_here, cdc_delta_here

pytestmark = [pytest.mark.integration, pytest.mark.spark]

WIDE = [r for r in RECORDS if r["topic"] == "cap.e2e.wide"]
NOT_AVRO = b'{"op": "c", "after": {"id": 1}}'


def avro_values(registry_url: str, topic: str) -> list[bytes | None]:
    """The wide table's records as Confluent's serializer writes them, one serializer per schema."""
    client = SchemaRegistryClient({"url": registry_url})
    serializers: dict[str, AvroSerializer] = {}
    out: list[bytes | None] = []
    for r in WIDE:
        if r["value"] is None:
            out.append(None)
            continue
        record = json.loads(r["value"])
        text = json.dumps(avro_schema(record["schema"]))
        serializer = serializers.setdefault(text, AvroSerializer(client, text, conf={"auto.register.schemas": True}))
        datum = avro_datum(record["schema"], record["payload"])
        out.append(serializer(datum, SerializationContext(topic, MessageField.VALUE)))
    return out


def send(bootstrap: str, topic: str, values: list[bytes | None]) -> None:
    ensure_topics(bootstrap, [topic], 1)
    producer = Producer({"bootstrap.servers": bootstrap})
    for r, value in zip(WIDE, values, strict=True):
        producer.produce(topic, key=(r["key"] or "").encode() or None, value=value)
    producer.flush(30)


def config_file(folder: Path, bootstrap: str, prefix: str, **extra: Any) -> Path:
    data = {
        "app_id": f"it-{prefix}",
        "kafka": {"bootstrap_servers": bootstrap, "topics": [f"{prefix}.e2e.wide"], **extra.pop("kafka", {})},
        "spark": {"master": "local[2]", "shuffle_partitions": 2, "conf": {"spark.ui.enabled": "false"}},
        "storage": {"root": str(folder / "lake")},
        "trigger_interval": "1 second",
        "tables": [{"name": "e2e.wide", "topics": [f"{prefix}.e2e.wide"], "key": ["id"]}],
        **extra,
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "cdc.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def table(spark: Any, config: Path) -> tuple[list[tuple[str, str]], list[dict[str, Any]]]:
    cfg = load_config(config, env={})
    df = spark.read.format("delta").load(cfg.storage.table_path(cfg.table("e2e.wide")))
    kept = [f for f in df.schema.fields if f.name not in (C.TOPIC, C.INGESTED_AT)]
    rows = [r.asDict() for r in df.select(*[f.name for f in kept]).orderBy("id").collect()]
    return [(f.name, f.dataType.simpleString()) for f in kept], rows


def test_an_avro_stream_equals_the_json_stream_of_the_same_changes(
    spark: Any, kafka_bootstrap: str, schema_registry: StandInRegistry, tmp_path: Path
) -> None:
    run = uuid.uuid4().hex[:6]
    json_prefix, avro_prefix = f"j{run}", f"a{run}"
    send(
        kafka_bootstrap, f"{json_prefix}.e2e.wide", [None if r["value"] is None else r["value"].encode() for r in WIDE]
    )
    values = avro_values(schema_registry.url, f"{avro_prefix}.e2e.wide")
    unknown = b"\x00\x00\x00\x27\x0f" + next(v for v in values if v is not None)[5:]
    # A poison record: its schema, nested 100,000 deep, is past what any JSON reader in Python recurses.
    deep = schema_registry.register(f"{avro_prefix}-poison", "[" * 100_000 + "]" * 100_000)
    poison = b"\x00" + deep.to_bytes(4, "big") + b"\x02"
    send(kafka_bootstrap, f"{avro_prefix}.e2e.wide", values)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for bad in (NOT_AVRO, unknown, poison):
        producer.produce(f"{avro_prefix}.e2e.wide", value=bad)
    producer.flush(30)

    json_config = config_file(tmp_path / "json", kafka_bootstrap, json_prefix)
    avro_config = config_file(
        tmp_path / "avro",
        kafka_bootstrap,
        avro_prefix,
        kafka={"value_format": "avro"},
        schema_registry={"url": schema_registry.url},
    )
    for config in (json_config, avro_config):
        caught_up_here(config)

    json_types, json_rows = table(spark, json_config)
    avro_types, avro_rows = table(spark, avro_config)
    assert avro_types == json_types
    assert ("id", "bigint") in avro_types and ("c_decimal", "decimal(38,10)") in avro_types
    for row in json_rows:
        row.pop(C.OFFSET)
    for row in avro_rows:
        row.pop(C.OFFSET)
    assert avro_rows == json_rows and len(json_rows) >= 5
    dead = spark.read.format("delta").load(load_config(avro_config, env={}).storage.dead_letters).collect()
    assert sorted(bytes(r["value"]) for r in dead) == sorted([NOT_AVRO, unknown, poison])
    reason = next(r["reason"] for r in dead if bytes(r["value"]) == poison)
    assert reason.startswith(f"Avro schema id {deep}: not a Debezium envelope schema: the schema cannot be read: ")
    assert "RecursionError" in reason


def test_a_registry_that_cannot_be_reached_stops_the_stream_and_loses_nothing(
    spark: Any, kafka_bootstrap: str, schema_registry: StandInRegistry, tmp_path: Path
) -> None:
    prefix = f"r{uuid.uuid4().hex[:6]}"
    send(kafka_bootstrap, f"{prefix}.e2e.wide", avro_values(schema_registry.url, f"{prefix}.e2e.wide"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{s.getsockname()[1]}"
    down = config_file(
        tmp_path,
        kafka_bootstrap,
        prefix,
        kafka={"value_format": "avro"},
        schema_registry={"url": nowhere, "retry_seconds": 2},
    )
    run = cdc_delta_here(down, "stream", "--until-caught-up")
    assert run.returncode == 69  # unavailable: a supervisor restarts it later
    assert f"cannot reach the schema registry at {nowhere}" in run.stderr
    cfg = load_config(down, env={})
    assert not Path(cfg.storage.dead_letters).exists()

    up = config_file(
        tmp_path, kafka_bootstrap, prefix, kafka={"value_format": "avro"}, schema_registry={"url": schema_registry.url}
    )
    caught_up_here(up)
    _, rows = table(spark, up)
    assert len(rows) >= 5
