"""The brokers as every Kafka client of cdc-delta's reaches them, from the one ``kafka.security`` section:
settings for librdkafka (``status``, ``check``, the lag metrics, the broker watch, the consumer group's
offsets) and options for Spark's Kafka source (Java's client). The password is read when a client is
made, and never logged."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cdc_delta.config.kafka import SASL, TLS, KafkaConfig, KafkaSecurity

LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


@dataclass(frozen=True)
class Brokers:
    """Where the brokers are, and librdkafka's security settings for them (empty: PLAINTEXT)."""

    bootstrap: str
    settings: dict[str, str] = field(default_factory=dict, repr=False)  # repr: it holds the password

    def __str__(self) -> str:
        return self.bootstrap


def quiet_logging(logger: logging.Logger) -> dict[str, Any]:
    """librdkafka settings that send its own lines (one per failed connection attempt, many a second) to
    ``logger`` at debug only (-v): what failed is raised as one clear error instead."""
    return {"logger": logger, "log_level": 7 if logger.isEnabledFor(logging.DEBUG) else 0}


def brokers(kafka: KafkaConfig) -> Brokers:
    """The brokers of ``kafka`` with the security its ``security`` section sets."""
    return Brokers(kafka.bootstrap_servers, librdkafka_settings(kafka.security))


def as_brokers(where: Brokers | str) -> Brokers:
    """A bootstrap list given as text is a PLAINTEXT broker."""
    return where if isinstance(where, Brokers) else Brokers(where)


def librdkafka_settings(security: KafkaSecurity) -> dict[str, str]:
    if security.protocol == "PLAINTEXT":
        return {}
    out: dict[str, str] = {"security.protocol": security.protocol}
    if security.protocol in SASL:
        out |= {
            "sasl.mechanisms": security.sasl_mechanism,
            "sasl.username": security.username or "",
            "sasl.password": security.password() or "",
        }
    if security.protocol in TLS:
        out["ssl.endpoint.identification.algorithm"] = "https" if security.check_hostname else "none"
        if security.ca_file:
            out["ssl.ca.location"] = security.ca_file
        if security.certificate_file and security.key_file:
            out |= {"ssl.certificate.location": security.certificate_file, "ssl.key.location": security.key_file}
    return out


def spark_source_options(security: KafkaSecurity) -> dict[str, str]:
    """Options of Spark's Kafka source (Java's client; PEM files as Kafka 2.7+ reads them)."""
    if security.protocol == "PLAINTEXT":
        return {}
    out: dict[str, str] = {"kafka.security.protocol": security.protocol}
    if security.protocol in SASL:
        module = LOGIN_MODULES[security.sasl_mechanism]
        user, password = _jaas_quoted(security.username or ""), _jaas_quoted(security.password() or "")
        out |= {
            "kafka.sasl.mechanism": security.sasl_mechanism,
            "kafka.sasl.jaas.config": f'{module} required username="{user}" password="{password}";',
        }
    if security.protocol in TLS:
        out["kafka.ssl.endpoint.identification.algorithm"] = "https" if security.check_hostname else ""
        if security.ca_file:
            out |= {"kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": security.ca_file}
        if security.certificate_file and security.key_file:
            out |= {
                "kafka.ssl.keystore.type": "PEM",
                "kafka.ssl.keystore.certificate.chain": Path(security.certificate_file).read_text(encoding="utf-8"),
                "kafka.ssl.keystore.key": Path(security.key_file).read_text(encoding="utf-8"),
            }
    return out


def _jaas_quoted(text: str) -> str:
    """``text`` inside a JAAS configuration's double quotes."""
    return text.replace("\\", "\\\\").replace('"', '\\"')
