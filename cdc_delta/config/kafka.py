"""The ``kafka`` section: where the change events come from, and which topics the stream subscribes to."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from cdc_delta.config.common import Frozen, PasswordSource, absolute, check_regex
from cdc_delta.config.tables import TableConfig
from cdc_delta.exceptions import ConfigError

_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})")


SASL = ("SASL_PLAINTEXT", "SASL_SSL")
TLS = ("SSL", "SASL_SSL")


class KafkaSecurity(PasswordSource):
    """How every Kafka client of cdc-delta's connects: Spark's Kafka source and the librdkafka clients of
    ``status``, ``check``, the snapshot's readiness, the lag metrics, the broker watch and the consumer
    group's offsets alike. The SASL password comes from ``password_env`` or ``password_file``."""

    SECTION: ClassVar[str] = "kafka.security"
    FILES: ClassVar[tuple[str, ...]] = ("password_file", "ca_file", "certificate_file", "key_file")
    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    """The brokers' listener: ``PLAINTEXT`` (neither TLS nor SASL), ``SSL`` (TLS), ``SASL_PLAINTEXT`` (SASL
    without TLS) or ``SASL_SSL`` (SASL over TLS)."""
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = "PLAIN"
    """SASL: how the user and password are presented, as the brokers' listener expects."""
    username: str | None = None
    """The SASL user (SASL_PLAINTEXT, SASL_SSL)."""
    ca_file: str | None = None
    """TLS: the CA certificates (PEM) the brokers' certificates are checked against; unset: the
    system's."""
    certificate_file: str | None = None
    """TLS: this client's certificate (PEM), where the brokers require one."""
    key_file: str | None = None
    """TLS: its private key (PEM, not encrypted)."""
    check_hostname: bool = True
    """TLS: check that a broker's certificate names the host connected to."""

    @model_validator(mode="after")
    def _complete(self) -> KafkaSecurity:
        sasl = self.protocol in SASL
        if sasl and not self.username:
            raise ValueError(f"kafka.security.protocol {self.protocol} needs kafka.security.username")
        if sasl and not (self.password_env or self.password_file):
            raise ValueError(
                f"kafka.security.protocol {self.protocol} needs the password: kafka.security.password_env "
                "(an environment variable) or password_file"
            )
        if not sasl and (self.username or self.password_env or self.password_file):
            raise ValueError(
                f"kafka.security.username and password are for SASL: set kafka.security.protocol to SASL_SSL "
                f"or SASL_PLAINTEXT (it is {self.protocol})"
            )
        tls_files = [f for f in ("ca_file", "certificate_file", "key_file") if getattr(self, f)]
        if tls_files and self.protocol not in TLS:
            raise ValueError(
                f"kafka.security.{tls_files[0]} is for TLS: set kafka.security.protocol to SSL or SASL_SSL "
                f"(it is {self.protocol})"
            )
        if bool(self.certificate_file) != bool(self.key_file):
            raise ValueError("kafka.security.certificate_file and key_file go together: set both or neither")
        return self

    @field_validator("ca_file", "certificate_file", "key_file")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        return absolute(value)

    @field_validator("key_file")
    @classmethod
    def _pkcs8(cls, value: str | None) -> str | None:
        """Spark's Kafka client (Java) reads a PEM key only in unencrypted PKCS#8 (librdkafka reads more):
        a key in another form, where the file is here to read, is refused now rather than by the stream."""
        head = _first_line(value)
        if head is not None and head.startswith("-----BEGIN ") and head != "-----BEGIN PRIVATE KEY-----":
            raise ValueError(
                f"kafka.security.key_file {value} is not an unencrypted PKCS#8 key ({head.strip('-')}), the only PEM "
                f"key Spark's Kafka client reads: convert it with openssl pkcs8 -topk8 -nocrypt -in {value} -out "
                "<new file> and set key_file to that"
            )
        return value


def _first_line(path: str | None) -> str | None:
    """The first line of a local file, or None (no file here, or not readable)."""
    try:
        with open(path or "", encoding="ascii", errors="replace") as file:
            return file.readline().strip()
    except OSError:
        return None


class KafkaConfig(Frozen):
    """Where the change events come from."""

    bootstrap_servers: str = "127.0.0.1:9092"
    """Comma-separated host:port list of the Kafka brokers."""
    topics: list[str] = Field(default_factory=list)
    """Topics to subscribe to. Leave empty to use ``topic_pattern``."""
    topic_pattern: str | None = None
    """A regex of topics to subscribe to (Spark's ``subscribePattern``), instead of ``topics``. Like Spark,
    it matches anywhere in a topic name: anchor it (``^dbserver1\\.inventory\\..*$``) so that it does not
    also catch ``dbserver1-history`` or another connector's topics."""
    starting_offsets: Literal["earliest", "latest"] = "earliest"
    """Where a new stream (no checkpoint yet) starts reading."""
    max_offsets_per_trigger: int | None = Field(default=None, gt=0)
    """Upper bound on records per micro-batch; unset reads everything available."""
    value_format: Literal["json", "avro"] = "json"
    """Encoding of the record values: ``json``, Debezium's JsonConverter output (with or without
    schemas); ``avro``, Confluent's AvroConverter output (magic byte, schema id, Avro binary), its
    schemas read from ``schema_registry``. A row's key comes from its image; record keys are read only
    where a pattern entry without ``key`` takes its tables' keys from them: JSON keys always, Avro keys
    (through the registry) with ``avro``, so ``key.converter`` may be either there."""
    unescape_field_names: bool = False
    """Avro only: the connectors set ``field.name.adjustment.mode: avro_unicode``, so column names
    arrive with ``_uXXXX`` escapes; turn them back into the source's names. (With ``avro`` the
    characters Avro refuses arrive as ``_`` and the tables use those names.)"""
    startup_timeout_seconds: float = Field(default=30, gt=0)
    """How long the stream waits at start for a broker to answer; then it exits 69 naming
    ``bootstrap_servers`` (credentials the brokers refuse: exit 2 at once). Not checked when the brokers'
    security is set in ``options`` rather than ``security``: Spark's Kafka client is then the first to
    connect."""
    unreachable_timeout_seconds: float = Field(default=300, ge=0)
    """While the stream runs, it asks the brokers every 15 s; when they stop answering it says so in
    one line (again once a minute), and after this long it stops and exits 69 naming
    ``bootstrap_servers`` (to be restarted by its supervisor). 0: keep waiting. Like
    ``startup_timeout_seconds``, not checked with the security in ``options``."""
    security: KafkaSecurity = Field(default_factory=KafkaSecurity)
    """How the clients authenticate and encrypt (SASL, TLS); PLAINTEXT by default."""
    options: dict[str, str] = Field(default_factory=dict)
    """Extra options for Spark's Kafka source (the brokers' security goes in ``security``, which every
    client uses); they override the stream's defaults (``kafka.fetch.max.wait.ms`` 20, see
    :data:`cdc_delta.stream.query.SOURCE_DEFAULTS`)."""

    @model_validator(mode="after")
    def _one_subscription(self) -> KafkaConfig:
        if self.topics and self.topic_pattern:
            raise ValueError("set either kafka.topics or kafka.topic_pattern, not both")
        check_regex(self.topic_pattern, "kafka.topic_pattern")
        if self.unescape_field_names and self.value_format != "avro":
            raise ValueError("kafka.unescape_field_names applies to Avro records only: set kafka.value_format: avro")
        raw = sorted(k for k in self.options if k.lower().startswith(("kafka.security.", "kafka.sasl.", "kafka.ssl.")))
        if raw and self.security.protocol != "PLAINTEXT":
            raise ValueError(
                f"kafka.options {', '.join(raw)} and kafka.security both set the brokers' security: keep "
                "kafka.security, which every client of cdc-delta's uses (in kafka.options only Spark's Kafka "
                "source sees it)"
            )
        return self

    @property
    def raw_security(self) -> bool:
        """The brokers' security is set in ``options`` (Spark's Kafka source only): cdc-delta's own
        clients cannot follow it, and the checks that need them are left out."""
        return self.options.get("kafka.security.protocol", "PLAINTEXT").upper() != "PLAINTEXT"

    @field_validator("bootstrap_servers")
    @classmethod
    def _bootstrap(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("kafka.bootstrap_servers is empty: write host:port, e.g. 127.0.0.1:9092")
        bad = [problem for entry in value.split(",") if (problem := _broker_problem(entry.strip()))]
        if bad:
            raise ValueError(f"kafka.bootstrap_servers is host:port, comma-separated: {'; '.join(bad)}")
        return value


def _broker_problem(entry: str) -> str | None:
    """Why ``entry`` of bootstrap_servers is not ``host:port``, or None."""
    if not entry:
        return "an entry is empty (two commas in a row, or one at an end): remove it"
    if "://" in entry:
        return f"{entry!r} has a scheme: write {entry.split('://', 1)[1].rstrip('/')}"
    found = _HOST_PORT.fullmatch(entry)
    if found and 0 < int(found.group(2)) <= 65535:
        return None
    if ":" not in entry:
        return f"{entry!r} has no port: write {entry}:9092"
    return f"{entry!r} is not host:port (e.g. broker1:9092)"


def require_subscription(kafka: KafkaConfig) -> None:
    """A stream needs topics to read; the other jobs (maintenance, snapshot, sql) do not, so a config
    without them is valid and only the stream refuses it, before Spark starts."""
    if not (kafka.topics or kafka.topic_pattern):
        raise ConfigError("the stream needs kafka.topics or kafka.topic_pattern in the config")


def unsubscribed(kafka: KafkaConfig, tables: Sequence[TableConfig]) -> str | None:
    """Why the stream's subscription (kafka.topics or kafka.topic_pattern) would never deliver a table's
    topics, or None. Spark's ``subscribePattern`` matches anywhere in a name (``re.search``); a table's
    ``topic_pattern`` is checked only against a ``kafka.topics`` list."""
    if kafka.topic_pattern:
        pattern = re.compile(kafka.topic_pattern)
        missed = [f"{topic!r} of table {t.name!r}" for t in tables for topic in t.topics if not pattern.search(topic)]
        if missed:
            return (
                f"kafka.topic_pattern '{kafka.topic_pattern}' does not match topic {', '.join(missed)}: the stream "
                f"would never read {_them(missed)}; widen the pattern or fix the table's topics"
            )
    elif kafka.topics:
        listed = set(kafka.topics)
        missed = [f"{topic!r} of table {t.name!r}" for t in tables for topic in t.topics if topic not in listed]
        missed += [
            f"topic_pattern {t.topic_pattern!r} of table {t.name!r}"
            for t in tables
            if t.topic_pattern and not any(re.fullmatch(t.topic_pattern, topic) for topic in listed)
        ]
        if missed:
            return (
                f"kafka.topics does not list {', '.join(missed)}: the stream would never read {_them(missed)}; add "
                "the table's topics to kafka.topics (or subscribe with kafka.topic_pattern)"
            )
    return None


def _them(items: Sequence[object]) -> str:
    return "it" if len(items) == 1 else "them"
