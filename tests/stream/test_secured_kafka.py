"""Every command against a broker with a SASL_SSL listener (TLS, SCRAM-SHA-512 and PLAIN) and ACLs,
configured once in ``kafka.security``: the stream (Spark's Kafka source), ``status`` and the consumer
group's offsets (librdkafka) work for the user the ACLs allow; a wrong password, a user without ACLs and
a CA that did not sign the broker's certificate are one line each, naming what to fix, exit 2, and the
password is in nothing printed."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from cdc_delta.config import load_config
from cdc_delta.demo.batches import DEMO_TABLES
from cdc_delta.demo.generator import ORDER_COLUMNS, ChangeGenerator, SourceTable, topic_of
from cdc_delta.demo.producer import ensure_topics, produce
from cdc_delta.kafka.client import Brokers, spark_source_options
from tests.services import NativeKafka, StreamProcess, cdc_delta, free_port_block, write_config

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SERVER = "sec"
PASSWORDS = {"admin": "adm1n-pw", "cdc": "cdc-s3cret-pw", "stranger": "str4nger-pw"}


def sasl(broker: NativeKafka, user: str, password: str) -> dict[str, str]:
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": user,
        "sasl.password": password,
        "ssl.ca.location": str(broker.ca_file),
    }


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NativeKafka]:
    users = ",".join(f"{u}:{p}" for u, p in PASSWORDS.items())
    port = free_port_block(3)  # the SASL_SSL listener, the controller, the mTLS listener
    folder = tmp_path_factory.mktemp("sasl-kafka")
    kafka = NativeKafka(port, folder, sasl_users=users, tls=True, mtls_port=port + 2)
    kafka.start()
    try:
        yield kafka
    finally:
        kafka.stop()


def allow_cdc(admin: Brokers, app_id: str) -> None:
    """User cdc may describe and read the source's topics and use its consumer group; stranger nothing."""
    client = AdminClient({**admin.settings, "bootstrap.servers": admin.bootstrap})
    allow = [
        AclBinding(
            ResourceType.TOPIC, f"{SERVER}.", ResourcePatternType.PREFIXED, "User:cdc", "*", op, AclPermissionType.ALLOW
        )
        for op in (AclOperation.DESCRIBE, AclOperation.READ)
    ]
    allow.append(
        AclBinding(
            ResourceType.GROUP,
            app_id,
            ResourcePatternType.LITERAL,
            "User:cdc",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
    )
    for future in client.create_acls(allow).values():
        future.result(timeout=30)


def secured_config(
    folder: Path, broker: NativeKafka, user: str, topics: bool = False, ca_file: Path | None = None
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = write_config(folder, broker.bootstrap, SERVER, max_per_batch=1000)
    data = yaml.safe_load(path.read_text())
    data["kafka"]["security"] = {
        "protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "username": user,
        "password_env": "CDC_KAFKA_PASSWORD",
        "ca_file": str(ca_file or broker.ca_file),
    }
    if topics:  # named topics: a topic hidden from the user is told apart from one not created yet
        data["kafka"].pop("topic_pattern")
        data["kafka"]["topics"] = sorted({topic_of(t, SERVER) for t in DEMO_TABLES})
    path.write_text(yaml.safe_dump(data))
    return path


def cli(config: Path, password: str, *args: str) -> subprocess.CompletedProcess[str]:
    return cdc_delta(config, *args, env={"CDC_KAFKA_PASSWORD": password}, timeout=300)


def test_every_command_works_through_sasl_and_acls_and_refusals_are_one_line(
    spark: Any, broker: NativeKafka, tmp_path: Path
) -> None:
    admin = Brokers(broker.bootstrap, sasl(broker, "admin", PASSWORDS["admin"]))
    generator = ChangeGenerator(DEMO_TABLES, seed=31, tombstones=True, server=SERVER)
    ensure_topics(admin, [topic_of(t, SERVER) for t in DEMO_TABLES], 2)
    produce(admin, generator.changes(600))
    config = secured_config(tmp_path, broker, "cdc")
    app_id = yaml.safe_load(config.read_text())["app_id"]
    allow_cdc(admin, app_id)

    # The stream (Spark's Kafka source and librdkafka's checks) as user cdc.
    os.environ["CDC_KAFKA_PASSWORD"] = PASSWORDS["cdc"]
    try:
        stream = StreamProcess(config, tmp_path / "stream.log")
        assert stream.run_until_caught_up() == 0, stream.log.read_text()[-3000:]
    finally:
        del os.environ["CDC_KAFKA_PASSWORD"]
    cfg = load_config(config, env={"CDC_KAFKA_PASSWORD": "x"})
    for name, sources in (("inventory.orders", DEMO_TABLES[:1]), ("shop.orders", DEMO_TABLES[1:])):
        df = spark.read.format("delta").load(cfg.storage.table_path(cfg.table(name)))
        live = {(r["_cdc_source_db"], r["id"]) for r in df.where("NOT _cdc_deleted").collect()}
        assert live == {(t.db, k) for t in sources for k in generator.rows[(t.db, t.table)]}, name
    # status reads the lag through the same section: the group's offsets were committed as user cdc.
    status = cli(config, PASSWORDS["cdc"], "status")
    assert status.returncode == 0, status.stderr[-2000:]
    assert "total lag: 0 events over 6 partitions" in status.stdout, status.stdout

    # A wrong password: one line naming the settings, exit 2, for the stream (before Spark) and status.
    for command in ("stream", "status"):
        refused = cli(config, "not-the-password", command)
        assert refused.returncode == 2, (command, refused.stderr[-2000:])
        (line,) = refused.stderr.strip().splitlines()
        assert line == (
            f"cdc-delta: error: Kafka at {broker.bootstrap} refused user cdc (Authentication failed during "
            "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512): check "
            "kafka.security.username and kafka.security.password_env (or password_file)"
        ), line
    # A user without ACLs: the topic it may not describe, and the grant to ask for.
    stranger = secured_config(tmp_path / "stranger", broker, "stranger", topics=True)
    refused = cli(stranger, PASSWORDS["stranger"], "status")
    assert refused.returncode == 2, refused.stderr[-2000:]
    (line,) = refused.stderr.strip().splitlines()
    first = sorted({topic_of(t, SERVER) for t in DEMO_TABLES})[0]
    assert line.startswith(
        f"cdc-delta: error: Kafka at {broker.bootstrap} does not let user stranger describe topic {first}: "
    ), line
    assert "--allow-principal User:stranger --operation Describe --operation Read" in line
    # A CA that did not sign the broker's certificate: the handshake's reason and the settings to check.
    other_ca = tmp_path / "other-ca.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=other",
         "-keyout", str(tmp_path / "other-ca.key"), "-out", str(other_ca)],
        check=True, capture_output=True,
    )  # fmt: skip
    untrusted = cli(secured_config(tmp_path / "other-ca", broker, "cdc", ca_file=other_ca), PASSWORDS["cdc"], "status")
    assert untrusted.returncode == 2, untrusted.stderr[-2000:]
    (line,) = untrusted.stderr.strip().splitlines()
    assert line.startswith(f"cdc-delta: error: Kafka at {broker.bootstrap}: the TLS handshake failed (") and (
        "certificate verify failed" in line
        and line.endswith(
            "check kafka.security.ca_file (the CA that signed the "
            "brokers' certificates), check_hostname, and certificate_file/key_file where the brokers ask for a client "
            "certificate"
        )
    ), line
    printed = status.stdout + status.stderr + refused.stdout + refused.stderr + stream.log.read_text()
    printed += untrusted.stdout + untrusted.stderr
    assert not any(password in printed for password in PASSWORDS.values())


def test_a_protocol_the_listener_does_not_speak_is_named_not_an_unreachable_broker_or_a_ca(
    broker: NativeKafka, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """A TLS client at a plaintext listener: one line naming the mismatch and kafka.security.protocol, exit 2
    (not the CA); a plaintext client at the TLS listener: the unreachable line says that it may be that."""
    for folder in ("plain", "tls"):
        (tmp_path / folder).mkdir()
    plain = write_config(tmp_path / "plain", broker.bootstrap, SERVER)
    tls = write_config(tmp_path / "tls", kafka_bootstrap, SERVER)
    data = yaml.safe_load(tls.read_text())
    data["kafka"]["security"] = {"protocol": "SSL", "ca_file": str(broker.ca_file)}
    tls.write_text(yaml.safe_dump(data))
    for command in ("stream", "status"):
        refused = cdc_delta(tls, command, timeout=300)
        assert refused.returncode == 2, (command, refused.stderr[-2000:])
        (line,) = refused.stderr.strip().splitlines()
        says = f"cdc-delta: error: Kafka at {kafka_bootstrap}: the listener does not speak TLS, which "
        assert line.startswith(says) and "set kafka.security.protocol to the listener's" in line, line
    # librdkafka 2.x sees only a connection closed while it asks for the API versions: the line says what
    # that may be besides a broker that is down
    plaintext = cdc_delta(plain, "status", timeout=300)  # status: the lake shown, Kafka's part one line
    assert plaintext.returncode == 69, plaintext.stderr[-2000:]
    (line,) = [line for line in plaintext.stdout.splitlines() if line.startswith("kafka: ")]
    assert line.startswith(f"kafka: cannot reach Kafka at {broker.bootstrap} ") and (
        "(or, where it answers on that port, its listener expects TLS or SASL: kafka.security.protocol)" in line
    ), line


def test_a_client_certificate_serves_spark_and_librdkafka_where_the_brokers_require_one(
    spark: Any, broker: NativeKafka, tmp_path: Path
) -> None:
    """mTLS: a listener that requires a client certificate (its CN the principal, User:cdc, under the same
    ACLs). ``status`` (librdkafka) and Spark's Kafka source (Java's client, the PEM key store) read with
    ``certificate_file``/``key_file``; without them the refusal is one line naming them."""
    admin = Brokers(broker.bootstrap, sasl(broker, "admin", PASSWORDS["admin"]))
    table = SourceTable("mtls", "items", ORDER_COLUMNS)
    ensure_topics(admin, [topic_of(table, SERVER)], 1)
    sent = list(ChangeGenerator((table,), seed=3, server=SERVER).changes(25))
    produce(admin, iter(sent))
    assert broker.mtls_port is not None
    certificate, key = broker.client_certificate

    def mtls_config(folder: Path, with_certificate: bool) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = write_config(folder, f"127.0.0.1:{broker.mtls_port}", SERVER)
        data = yaml.safe_load(path.read_text())
        data["kafka"].pop("topic_pattern")
        data["kafka"]["topics"] = [topic_of(table, SERVER)]
        data["tables"] = [{"name": "mtls.items", "topics": [topic_of(table, SERVER)], "key": ["id"]}]
        data["kafka"]["security"] = {"protocol": "SSL", "ca_file": str(broker.ca_file)}
        if with_certificate:
            data["kafka"]["security"] |= {"certificate_file": str(certificate), "key_file": str(key)}
        path.write_text(yaml.safe_dump(data))
        return path

    config = mtls_config(tmp_path / "mtls", with_certificate=True)
    allow_cdc(admin, yaml.safe_load(config.read_text())["app_id"])
    status = cdc_delta(config, "status", timeout=300)
    assert status.returncode == 0, status.stderr[-2000:]
    assert re.search(rf"^{re.escape(topic_of(table, SERVER))} +0 +{len(sent)} ", status.stdout, re.M), status.stdout

    cfg = load_config(config, env={})
    options = {"kafka.bootstrap.servers": cfg.kafka.bootstrap_servers, "subscribe": topic_of(table, SERVER)}
    read = spark.read.format("kafka").options(**options, **spark_source_options(cfg.kafka.security)).load()
    assert sorted(bytes(r["value"]) for r in read.select("value").collect()) == sorted(c.value for c in sent)

    refused = cdc_delta(mtls_config(tmp_path / "no-certificate", with_certificate=False), "status", timeout=300)
    assert refused.returncode == 2, refused.stderr[-2000:]
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith(f"cdc-delta: error: Kafka at 127.0.0.1:{broker.mtls_port}") and line.endswith(
        "certificate_file/key_file where the brokers ask for a client certificate"
    ), line
