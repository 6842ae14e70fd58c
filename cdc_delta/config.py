"""The one configuration file: Kafka, Spark, storage, and the replicated tables.

Loaded from YAML (or JSON) plus environment overrides ``CDC_DELTA__SECTION__FIELD=value``
(``CDC_DELTA__KAFKA__BOOTSTRAP_SERVERS=broker:9092``). Validated before anything starts:
a bad file raises :class:`~cdc_delta.exceptions.ConfigError` naming the field and the fix.
"""

from __future__ import annotations

import os
import re
import zoneinfo
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


class StockExportConfig(_Frozen):
    """The full export of a table as DataX writes it: the nightly snapshot's base the first time.

    Text files have no header; their fields follow the table's ``columns`` in order.
    """

    path: str
    """A folder of export files (every file in it not starting with '.' or '_'), or a glob such as
    ``/exports/orders/orders__*``."""
    format: Literal["text", "parquet", "orc"] = "text"
    """``text``: delimited lines; ``parquet``/``orc``: columns in table order (their names are ignored)."""
    delimiter: str = "\t"
    """Field delimiter of text files, one or more characters (``"\\t"``, ``"\\u0001"``, ``","``
    in YAML double quotes)."""
    null_marker: str = "\\N"
    """A field equal to this is NULL (DataX writes ``\\N``)."""
    compression: Literal["auto", "none", "gzip", "bzip2"] = "auto"
    """Compression of text files; ``auto`` tells gzip and bzip2 by their first bytes."""
    encoding: str = "utf-8"
    """Character encoding of text files; a line that does not decode is rejected."""

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        return value if is_uri(value) else os.path.abspath(value)

    @field_validator("delimiter")
    @classmethod
    def _delimiter(cls, value: str) -> str:
        if not value or "\n" in value or "\r" in value:
            raise ValueError("stock.delimiter must be one or more characters other than a newline")
        return value

    @field_validator("encoding")
    @classmethod
    def _encoding(cls, value: str) -> str:
        try:
            "".encode(value)
        except LookupError:
            raise ValueError(f"stock.encoding {value!r} is not an encoding Python knows (e.g. utf-8, gbk)") from None
        return value


class SourceCountJdbc(_Frozen):
    """Count the source table over JDBC when the snapshot is published (MariaDB or MySQL)."""

    url: str
    """``jdbc:mariadb://host:3306/shop`` (the bundled MariaDB driver also serves MySQL servers);
    never with the password in it."""
    query: str
    """The count, e.g. ``SELECT COUNT(*) FROM orders``: its first column of the first row is used."""
    user: str | None = None
    password_env: str | None = None
    """Name of the environment variable holding the password."""
    password_file: str | None = None
    """Or a file holding it (a mounted secret); its surrounding whitespace is ignored."""
    driver: str = "org.mariadb.jdbc.Driver"

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith("jdbc:"):
            raise ValueError(f"source_count_jdbc.url {value!r} must be a JDBC URL (jdbc:mariadb://host:3306/db)")
        if "password" in value.lower():
            raise ValueError(
                "source_count_jdbc.url must not hold the password: set password_env or password_file instead"
            )
        return value

    @model_validator(mode="after")
    def _one_password(self) -> SourceCountJdbc:
        if self.password_env and self.password_file:
            raise ValueError("set source_count_jdbc.password_env or password_file, not both")
        return self

    def password(self) -> str | None:
        """The password from the environment or the file (read when needed, never logged)."""
        if self.password_env:
            value = os.environ.get(self.password_env)
            if value is None:
                raise ConfigError(
                    f"source_count_jdbc.password_env names {self.password_env}, which is not set in the environment"
                )
            return value
        if self.password_file:
            try:
                return Path(self.password_file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ConfigError(
                    f"source_count_jdbc.password_file {self.password_file} cannot be read: {exc.strerror}"
                ) from None
        return None


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
    stock: StockExportConfig | None = None
    """The table's full export (DataX), the nightly snapshot's base the first time. Without it the
    first snapshot holds only what the stream captured (enough when Debezium's initial snapshot ran)."""
    source_count_path: str | None = None
    """A file holding the source table's row count at the cut-off (one integer), written by the export
    job; ``{date}`` is replaced by the snapshot date. The snapshot report compares its count with it."""
    source_count_jdbc: SourceCountJdbc | None = None
    """Or count the source table over JDBC when the snapshot is published (the source keeps changing:
    the difference then includes the changes since the cut-off)."""

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
        if self.source_count_path and self.source_count_jdbc:
            raise ValueError(f"table {self.name!r}: set source_count_path or source_count_jdbc, not both")
        if self.stock is not None:
            if not self.columns:
                raise ValueError(
                    f"table {self.name!r} has a stock export but no columns: list them in export order "
                    "under columns: (name: type), key columns included"
                )
            missing = [k for k in self.key if k not in self.columns]
            if missing:
                raise ValueError(f"table {self.name!r}: key column(s) {missing} missing from columns")
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
    stream_hold_max_seconds: float = Field(default=300, gt=0)
    """When OPTIMIZE or the purge has lost 3 write races to the stream, the stream pauses its writes to
    that table until the command has committed, for at most this long (a hold file beside the lock)."""

    @model_validator(mode="after")
    def _retention(self) -> MaintenanceConfig:
        if self.vacuum_retention_hours < DELTA_MIN_RETENTION_HOURS and not self.allow_short_retention:
            raise ValueError(
                f"maintenance.vacuum_retention_hours {self.vacuum_retention_hours:g} is below Delta's "
                f"{DELTA_MIN_RETENTION_HOURS:g} h safety check: set maintenance.allow_short_retention: true "
                "if no reader or writer needs older files"
            )
        return self


class SnapshotConfig(_Frozen):
    """The nightly snapshot: Delta tables plus the stock export, published as Hive partitions."""

    database: str = "ods"
    """Hive database of the snapshot tables (``<database>.<table name without its db>``)."""
    tables: list[str] = Field(default_factory=list)
    """Tables to snapshot (logical names); default: every table whose key does not include the shard
    (``key_includes_source`` tables have no shard columns in a stock export and are not supported)."""
    metastore_uri: str | None = None
    """Thrift URI of the Hive metastore (production); unset: an embedded Derby metastore in
    ``metastore_dir`` (one process at a time)."""
    metastore_dir: str | None = None
    """Folder of the embedded Derby metastore; default ``<storage.root>/_cdc_metastore``."""
    warehouse_dir: str | None = None
    """Where the snapshot tables' files live; default ``<storage.root>/_cdc_warehouse``."""
    time_zone: str = "UTC"
    """The day of ``--date`` ends at midnight in this time zone: that is the cut-off."""
    wait_minutes: float = Field(default=0, ge=0)
    """How long to wait for the stream to pass the cut-off before giving up (0: check once)."""
    poll_seconds: float = Field(default=30, gt=0)
    """How often to check again while waiting."""
    idle_grace_minutes: float = Field(default=15, ge=0)
    """A Kafka partition with nothing left to read counts as past the cut-off once this long has gone
    by since the cut-off (a quiet table sends no later event to prove it)."""
    full_check: bool = False
    """Also check key uniqueness over the whole written snapshot (a shuffle of every key). Without it
    uniqueness follows from its parts: the Delta side is checked, stock rows are deduplicated, and a
    previous snapshot must still read the row count it was published with."""
    max_rejects: int = Field(default=0, ge=0)
    """Rejected stock lines tolerated per table; more fail the run (nothing is published)."""
    log_path: str | None = None
    """Delta table recording every published snapshot; default ``<storage.root>/_cdc_snapshots``."""
    report_dir: str | None = None
    """JSON report of each run and rejected stock lines; default ``<storage.root>/_cdc_snapshot_reports``."""
    lock_path: str | None = None
    """Lock file keeping two snapshot runs apart; default ``<storage.root>/_cdc_snapshot.lock``."""

    @field_validator("database")
    @classmethod
    def _database(cls, value: str) -> str:
        if not _IDENTIFIER.fullmatch(value):
            raise ValueError(f"snapshot.database {value!r} must be a plain identifier")
        return value

    @field_validator("time_zone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"snapshot.time_zone {value!r} is not an IANA time zone (e.g. Asia/Shanghai)") from None
        return value

    @field_validator("metastore_dir", "warehouse_dir", "log_path", "report_dir", "lock_path")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        return value if value is None or is_uri(value) else os.path.abspath(value)


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
    snapshot: SnapshotConfig = Field(default_factory=SnapshotConfig)
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

    @model_validator(mode="after")
    def _snapshot_tables(self) -> AppConfig:
        names = {t.name for t in self.tables}
        unknown = [n for n in self.snapshot.tables if n not in names]
        if unknown:
            raise ValueError(f"snapshot.tables names unknown table(s) {unknown}; known: {sorted(names)}")
        sharded = [t.name for t in self.tables if t.key_includes_source and t.name in self.snapshot.tables]
        if sharded:
            raise ValueError(
                f"snapshot.tables lists {sharded}, whose key includes the shard (key_includes_source): the "
                "nightly snapshot does not support those tables; leave them out"
            )
        short = [t.name.split(".")[-1] for t in self.snapshot_tables()]
        clashes = sorted({n for n in short if short.count(n) > 1})
        if clashes:
            raise ValueError(
                f"snapshot tables would share Hive names {self.snapshot.database}.{clashes}: list only one table "
                "per name under snapshot.tables"
            )
        return self

    def snapshot_tables(self) -> list[TableConfig]:
        """The tables the nightly snapshot publishes."""
        if self.snapshot.tables:
            return [t for t in self.tables if t.name in self.snapshot.tables]
        return [t for t in self.tables if not t.key_includes_source]

    def under_root(self, configured: str | None, name: str) -> str:
        """``configured`` if set, else ``<storage.root>/<name>``."""
        return configured or f"{self.storage.root.rstrip('/')}/{name}"

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
