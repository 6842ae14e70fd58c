"""One ``kafka.security`` section, two clients: librdkafka's settings and Spark's Kafka source options
(the broker itself is in tests/stream/test_secured_kafka.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from cdc_delta.config import parse_config
from cdc_delta.config.kafka import KafkaSecurity
from cdc_delta.exceptions import ConfigError
from cdc_delta.kafka.client import brokers, librdkafka_settings, spark_source_options

BASE = {"app_id": "a", "storage": {"root": "/tmp/x"}, "tables": [{"name": "a.b", "topics": ["t"], "key": ["id"]}]}


def kafka(security: dict | None = None, **extra: object):
    return parse_config({**BASE, "kafka": {"topics": ["t"], "security": security or {}, **extra}}).kafka


def test_plaintext_adds_nothing() -> None:
    plain = kafka()
    assert librdkafka_settings(plain.security) == {} and spark_source_options(plain.security) == {}
    assert str(brokers(plain)) == "127.0.0.1:9092"


def test_sasl_ssl_with_scram_and_a_client_certificate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ca.pem").write_text("CA")
    (tmp_path / "me.pem").write_text("CERT")
    (tmp_path / "me.key").write_text("KEY")
    monkeypatch.setenv("KP", 'p"w\\d')
    security = kafka(
        {
            "protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "username": "cdc",
            "password_env": "KP",
            "ca_file": str(tmp_path / "ca.pem"),
            "certificate_file": str(tmp_path / "me.pem"),
            "key_file": str(tmp_path / "me.key"),
        }
    ).security
    assert librdkafka_settings(security) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "cdc",
        "sasl.password": 'p"w\\d',
        "ssl.endpoint.identification.algorithm": "https",
        "ssl.ca.location": str(tmp_path / "ca.pem"),
        "ssl.certificate.location": str(tmp_path / "me.pem"),
        "ssl.key.location": str(tmp_path / "me.key"),
    }
    assert spark_source_options(security) == {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": (
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="cdc" password="p\\"w\\\\d";'
        ),
        "kafka.ssl.endpoint.identification.algorithm": "https",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(tmp_path / "ca.pem"),
        "kafka.ssl.keystore.type": "PEM",
        "kafka.ssl.keystore.certificate.chain": "CERT",
        "kafka.ssl.keystore.key": "KEY",
    }
    assert 'p"w' not in repr(brokers(kafka({"protocol": "SASL_PLAINTEXT", "username": "u", "password_env": "KP"})))


@pytest.mark.parametrize(
    ("security", "extra", "says"),
    [
        (
            {"protocol": "SASL_SSL", "password_env": "KP"},
            {},
            "kafka.security.protocol SASL_SSL needs kafka.security.username",
        ),
        ({"protocol": "SASL_PLAINTEXT", "username": "u"}, {}, "needs the password: kafka.security.password_env"),
        ({"username": "u"}, {}, "kafka.security.username and password are for SASL"),
        (
            {"ca_file": "/ca.pem"},
            {},
            "kafka.security.ca_file is for TLS: set kafka.security.protocol to SSL or SASL_SSL",
        ),
        ({"protocol": "SSL", "certificate_file": "/c.pem"}, {}, "certificate_file and key_file go together"),
        (
            {"protocol": "SSL"},
            {"options": {"kafka.security.protocol": "SSL"}},
            "kafka.options kafka.security.protocol and kafka.security both set the brokers' security",
        ),
    ],
)
def test_an_incomplete_section_is_refused_saying_what_to_set(security: dict, extra: dict, says: str) -> None:
    with pytest.raises(ConfigError, match="kafka") as refused:
        kafka(security, **extra)
    assert says in str(refused.value), str(refused.value)


def test_a_key_spark_cannot_read_is_refused_with_the_conversion(tmp_path: Path) -> None:
    """Java's client reads unencrypted PKCS#8 PEM keys only (librdkafka reads PKCS#1 too)."""
    rsa = tmp_path / "rsa.key"
    rsa.write_text("-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----\n")
    pkcs8 = tmp_path / "pkcs8.key"
    pkcs8.write_text("-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n")
    security = {"protocol": "SSL", "certificate_file": str(tmp_path / "me.pem")}
    with pytest.raises(
        ValidationError, match=r"is not an unencrypted PKCS#8 key \(BEGIN RSA PRIVATE KEY\).*openssl pkcs8"
    ):
        KafkaSecurity(**security, key_file=str(rsa))
    assert KafkaSecurity(**security, key_file=str(pkcs8)).key_file == str(pkcs8)
    assert KafkaSecurity(**security, key_file=str(tmp_path / "not-here.key"))  # read where it is: not here
