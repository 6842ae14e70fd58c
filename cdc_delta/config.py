"""The one configuration file: Kafka, Spark, storage, and the replicated tables.

Loaded from YAML (or JSON) plus environment overrides ``CDC_DELTA__SECTION__FIELD=value``
(``CDC_DELTA__KAFKA__BOOTSTRAP_SERVERS=broker:9092``). Validated before anything starts:
a bad file raises :class:`~cdc_delta.exceptions.ConfigError` naming the field and the fix.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cdc_delta import column_types
from cdc_delta.exceptions import ConfigError

ENV_PREFIX = "CDC_DELTA__"
_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_APP_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def is_uri(path: str) -> bool:
    """True for ``scheme:...`` locations (s3a://, abfss://, file:/); False for local filesystem paths."""
    return ":" in path.split("/")[0]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _check_regex(value: str | None, what: str) -> str | None:
    if value is not None:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"{what} {value!r} is not a valid regular expression: {exc}") from None
    return value


class KafkaConfig(_Frozen):
    """Where the change events come from."""

    bootstrap_servers: str = "127.0.0.1:9092"
    """Comma-separated host:port list of the Kafka brokers."""
    topics: list[str] = Field(default_factory=list)
    """Topics to subscribe to. Leave empty to use ``topic_pattern``."""
    topic_pattern: str | None = None
    """A Java regex of topics to subscribe to (Spark's ``subscribePattern``), instead of ``topics``."""
    starting_offsets: Literal["earliest", "latest"] = "earliest"
    """Where a new stream (no checkpoint yet) starts reading."""
    max_offsets_per_trigger: int | None = Field(default=None, gt=0)
    """Upper bound on records per micro-batch; unset reads everything available."""
    value_format: Literal["json"] = "json"
    """Encoding of the record values: Debezium's JsonConverter output (with or without schemas)."""
    options: dict[str, str] = Field(default_factory=dict)
    """Extra options for Spark's Kafka source, e.g. ``kafka.security.protocol``."""

    @model_validator(mode="after")
    def _one_subscription(self) -> KafkaConfig:
        if self.topics and self.topic_pattern:
            raise ValueError("set either kafka.topics or kafka.topic_pattern, not both")
        _check_regex(self.topic_pattern, "kafka.topic_pattern")
        return self


class SparkConfig(_Frozen):
    """How the Spark session is built. Static settings only take effect in a new process."""

    master: str | None = "local[2]"
    """Spark master; ``null`` leaves it to spark-submit (YARN, Kubernetes, ...)."""
    app_name: str = "cdc-delta"
    """Spark application name."""
    shuffle_partitions: int = Field(default=4, gt=0)
    """``spark.sql.shuffle.partitions``: 2-4x the cores. Spark's default of 200 writes 200 tiny files."""
    jars_dir: str | None = None
    """Folder of pre-fetched JVM jars (scripts/fetch-jars.sh). Default: ``$CDC_DELTA_JARS_DIR`` or
    ``./.jars/spark``; when it holds no jars, Spark resolves them from Maven Central at start."""
    conf: dict[str, str] = Field(default_factory=dict)
    """Any other Spark settings, applied last."""


class StorageConfig(_Frozen):
    """Where tables, dead letters and checkpoints live (local paths or s3a://, abfss://, gs:// URIs)."""

    root: str
    """Base location; a logical table ``db.table`` lives at ``<root>/db/table``."""
    dead_letter_path: str | None = None
    """Dead-letter Delta table; default ``<root>/_cdc_dead_letters``."""
    checkpoint_root: str | None = None
    """Streaming checkpoints; default ``<root>/_cdc_checkpoints``."""

    @field_validator("root", "dead_letter_path", "checkpoint_root")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        """Local relative paths are taken from the working directory and made absolute (Delta's
        table builder refuses relative locations); URIs (s3a://, file:/...) stay as they are."""
        if value is None or is_uri(value):
            return value
        return os.path.abspath(value)

    def table_path(self, table: TableConfig) -> str:
        return table.path or f"{self.root.rstrip('/')}/{table.name.replace('.', '/')}"

    @property
    def dead_letters(self) -> str:
        return self.dead_letter_path or f"{self.root.rstrip('/')}/_cdc_dead_letters"


class TableConfig(_Frozen):
    """One logical table: which events feed it, its key, and optionally its column types."""

    name: str
    """Logical name, ``db.table`` or ``table`` (letters, digits, underscores)."""
    topics: list[str] = Field(default_factory=list)
    """Topics whose events belong to this table."""
    topic_pattern: str | None = None
    """Or a Python regex matched against the whole topic name."""
    source_database: str | None = None
    """Regex matched against the whole ``source.db`` of each event (shards: ``shop_[0-7]``)."""
    source_table: str | None = None
    """Regex matched against the whole ``source.table`` of each event (shards: ``orders_\\d{3}``)."""
    key: list[str]
    """Primary-key columns, in order."""
    key_includes_source: bool = False
    """Add the shard (source db and table) to the key, for shards that reuse primary keys."""
    columns: dict[str, str] = Field(default_factory=dict)
    """Column types (Spark SQL names) for events that carry no Connect schema. Columns the events'
    own schema describes take the schema's type."""
    path: str | None = None
    """Override of the table location; default ``<storage.root>/<db>/<table>``."""
    zorder_by: list[str] = Field(default_factory=list)
    """Columns to cluster by when maintenance runs OPTIMIZE (default: the key)."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _TABLE_NAME.fullmatch(value):
            raise ValueError(f"table name {value!r} must look like db.table or table (letters, digits, _)")
        return value

    @field_validator("key")
    @classmethod
    def _key(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("key must name at least one primary-key column, e.g. key: [id]")
        for col in value:
            if not _IDENTIFIER.fullmatch(col) or col.startswith("_cdc_"):
                raise ValueError(f"key column {col!r} must be a plain identifier not starting with _cdc_")
        return value

    @field_validator("columns")
    @classmethod
    def _columns(cls, value: dict[str, str]) -> dict[str, str]:
        out = {}
        for col, type_name in value.items():
            if not _IDENTIFIER.fullmatch(col) or col.startswith("_cdc_"):
                raise ValueError(f"column {col!r} must be a plain identifier not starting with _cdc_")
            out[col] = column_types.normalize(type_name)
        return out

    @model_validator(mode="after")
    def _routed(self) -> TableConfig:
        _check_regex(self.topic_pattern, "topic_pattern")
        _check_regex(self.source_database, "source_database")
        _check_regex(self.source_table, "source_table")
        if not (self.topics or self.topic_pattern or self.source_table):
            raise ValueError(f"table {self.name!r} has no route: set topics, topic_pattern or source_table")
        return self


DELTA_MIN_RETENTION_HOURS = 168.0
"""Delta's VACUUM safety check: below this, readers and writers may lose files they still need."""


class MaintenanceConfig(_Frozen):
    """The hourly maintenance job: OPTIMIZE, tombstone purge, VACUUM, checkpoint."""

    vacuum_retention_hours: float = Field(default=DELTA_MIN_RETENTION_HOURS, ge=0)
    """VACUUM removes files no longer referenced for this long (time travel reaches this far back)."""
    allow_short_retention: bool = False
    """Must be true to VACUUM with less than Delta's 168 h safety margin (the seeds keep 2 h)."""
    tombstone_retention_hours: float = Field(default=DELTA_MIN_RETENTION_HOURS, ge=0)
    """Soft-deleted rows are purged once their source change is older than this (and the stream has
    read past them on every partition)."""
    zorder: bool = False
    """Cluster with OPTIMIZE ... ZORDER BY the table's zorder_by (default: its key) instead of bin-packing."""
    target_file_size_mb: int = Field(default=128, gt=0)
    """OPTIMIZE's target file size."""
    lock_path: str | None = None
    """Lock file that keeps two runs apart (a local or shared filesystem path);
    default ``<storage.root>/_cdc_maintenance.lock`` when the root is local."""
    lock_stale_after_minutes: float = Field(default=120, gt=0)
    """A lock older than this is taken to belong to a crashed run and is taken over."""
    report_dir: str | None = None
    """Where the JSON report of each run goes; default ``<storage.root>/_cdc_maintenance_reports``."""

    @model_validator(mode="after")
    def _retention(self) -> MaintenanceConfig:
        if self.vacuum_retention_hours < DELTA_MIN_RETENTION_HOURS and not self.allow_short_retention:
            raise ValueError(
                f"maintenance.vacuum_retention_hours {self.vacuum_retention_hours:g} is below Delta's "
                f"{DELTA_MIN_RETENTION_HOURS:g} h safety check: set maintenance.allow_short_retention: true "
                "if no reader or writer needs older files"
            )
        return self


class AppConfig(_Frozen):
    """The whole configuration file."""

    app_id: str
    """Names this pipeline: the Delta transaction id prefix, the consumer group, the checkpoint folder.
    Change it and the stream starts over."""
    storage: StorageConfig
    tables: list[TableConfig]
    kafka: KafkaConfig = Field(default_factory=KafkaConfig)
    spark: SparkConfig = Field(default_factory=SparkConfig)
    trigger_interval: str = "10 seconds"
    """Micro-batch trigger interval for the stream."""
    truncate_policy: Literal["soft_delete", "skip", "dead_letter"] = "soft_delete"
    """What a TRUNCATE (op ``t``) does: soft-delete every row of that source table written before it,
    skip it (counted), or park it in the dead letters for a person to decide."""
    maintenance: MaintenanceConfig = Field(default_factory=MaintenanceConfig)
    allow_type_widening: bool = True
    """Follow a source column that widens (int -> bigint, decimal(10,2) -> decimal(12,2)) with Delta's
    type widening. Off: such a change stops the table like any other incompatible change."""

    @field_validator("app_id")
    @classmethod
    def _app_id(cls, value: str) -> str:
        if not _APP_ID.fullmatch(value):
            raise ValueError(f"app_id {value!r} must be letters, digits, '.', '_' or '-'")
        return value

    @field_validator("tables")
    @classmethod
    def _tables(cls, value: list[TableConfig]) -> list[TableConfig]:
        if not value:
            raise ValueError("list at least one table under tables:")
        seen: set[str] = set()
        for table in value:
            if table.name in seen:
                raise ValueError(f"table {table.name!r} is listed twice; each logical table once")
            seen.add(table.name)
        return value

    def table(self, name: str) -> TableConfig:
        for table in self.tables:
            if table.name == name:
                return table
        raise ConfigError(f"no table named {name!r} in the config; known: {[t.name for t in self.tables]}")


def _apply_env(data: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    for name, raw in sorted(env.items()):
        if not name.startswith(ENV_PREFIX):
            continue
        path = [part.lower() for part in name[len(ENV_PREFIX) :].split("__")]
        node = data
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"environment variable {name}: {part!r} is not a section of the config")
            node = child
        node[path[-1]] = yaml.safe_load(raw) if raw.strip() else raw
    return data


def _describe(exc: ValidationError, source: str) -> str:
    lines = [f"invalid configuration in {source}:"]
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "missing":
            msg = "is required but missing"
        elif err["type"] == "extra_forbidden":
            msg = "is not a known setting (check the spelling; see streaming/example-config.yaml)"
        lines.append(f"  - {where}: {msg}")
    return "\n".join(lines)


def parse_config(data: Mapping[str, Any], source: str = "<dict>", env: Mapping[str, str] | None = None) -> AppConfig:
    """Validate a config mapping (plus ``CDC_DELTA__`` overrides from ``env``)."""
    merged = _apply_env(dict(data), env or {})
    try:
        return AppConfig.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, source)) from None


def load_config(path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> AppConfig:
    """Read and validate the config file at ``path``; environment overrides come from ``os.environ``."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"config file {str(file)!r} does not exist; pass --config PATH to an existing file")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {str(file)!r} is not valid YAML/JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(file)!r} must hold a mapping (app_id:, storage:, tables: ...)")
    return parse_config(data, str(file), os.environ if env is None else env)
