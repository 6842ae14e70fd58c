"""The whole configuration file: Kafka, Spark, storage, the tables and the jobs."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Literal

from pydantic import Field, PrivateAttr, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from cdc_delta.config.activity import ActivityConfig
from cdc_delta.config.common import Frozen, absolute, is_uri
from cdc_delta.config.connect import ConnectConfig
from cdc_delta.config.durations import check_trigger_interval
from cdc_delta.config.fresh_views import FreshViewsConfig
from cdc_delta.config.jobs import MaintenanceConfig, SnapshotConfig
from cdc_delta.config.kafka import KafkaConfig, unsubscribed
from cdc_delta.config.live_tables import LiveTablesConfig
from cdc_delta.config.masking import MaskingConfig
from cdc_delta.config.metrics import MetricsConfig
from cdc_delta.config.phases import ChangelogConfig, MergeConfig
from cdc_delta.config.repair import RepairConfig
from cdc_delta.config.scan_pii import ScanPiiConfig
from cdc_delta.config.schema_registry import SchemaRegistryConfig
from cdc_delta.config.source import SourceConfig
from cdc_delta.config.tables import TableConfig
from cdc_delta.events.routing import Owners
from cdc_delta.exceptions import ConfigError

logger = logging.getLogger(__name__)

_APP_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


class KeyNotKnown(ConfigError):
    """A made table's key comes from Debezium's record key and the table index does not hold it (yet)."""


class SparkConfig(Frozen):
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


class StorageConfig(Frozen):
    """Where tables, dead letters and checkpoints live (local paths or s3a://, abfss://, gs:// URIs)."""

    root: str
    """Base location; a logical table ``db.table`` lives at ``<root>/db/table``. Like every local path in
    the config, a relative one is taken from the config file's folder."""
    dead_letter_path: str | None = None
    """Dead-letter Delta table; default ``<root>/_cdc_dead_letters``."""
    checkpoint_root: str | None = None
    """Streaming checkpoints; default ``<root>/_cdc_checkpoints``."""
    lease_timeout_seconds: int = Field(default=60, ge=5)
    """The stream and the merge job each hold a lease in the lake (``<root>/_cdc_leases``), renewed every
    sixth of this: a second one is refused while the holder lives; a lease not renewed for this long (its
    holder killed, its host lost) is taken over. Keep it above the clock skew between hosts."""

    @field_validator("root", "dead_letter_path", "checkpoint_root")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        """Local relative paths are taken from the config file's folder and made absolute (Delta's
        table builder refuses relative locations); URIs (s3a://, file:/...) stay as they are."""
        return absolute(value)

    def table_path(self, table: TableConfig) -> str:
        return table.path or f"{self.root.rstrip('/')}/{table.name.replace('.', '/')}"

    @property
    def dead_letters(self) -> str:
        return self.dead_letter_path or f"{self.root.rstrip('/')}/_cdc_dead_letters"


ARCHIVAL_RETENTION_HOURS = 1.0
"""The shortest changelog retention with archival deletes: a purge's deletes land over seconds or minutes,
and are counted over the changelog until the last of them has landed."""


class AppConfig(Frozen):
    """The whole configuration file."""

    app_id: str
    """Names this pipeline: the Delta transaction id prefix, the consumer group, the checkpoint folder.
    Change it and the stream starts over."""
    storage: StorageConfig
    """Where the tables, dead letters, checkpoints and the jobs' files live."""
    tables: list[TableConfig]
    """The replicated tables, one entry each, and pattern entries that make one table per source table
    (``name: "{db}.{table}"``). An event goes to the first listed table whose route matches it, else to
    the first pattern entry whose route does."""
    kafka: KafkaConfig = Field(default_factory=KafkaConfig)
    """The brokers, the topics the stream subscribes to and how their records are encoded."""
    spark: SparkConfig = Field(default_factory=SparkConfig)
    """How every command builds its Spark session."""
    trigger_interval: str = "10 seconds"
    """Micro-batch trigger interval for the stream, as Spark reads it: ``10 seconds``, ``1 minute``,
    ``500 milliseconds``."""
    truncate_policy: Literal["soft_delete", "skip", "dead_letter"] = "soft_delete"
    """What a TRUNCATE (op ``t``) does: soft-delete every row of that source table written before it,
    skip it (counted), or park it in the dead letters for a person to decide."""
    maintenance: MaintenanceConfig = Field(default_factory=MaintenanceConfig)
    """The hourly maintenance (``cdc-delta maintain``)."""
    snapshot: SnapshotConfig = Field(default_factory=SnapshotConfig)
    """The nightly snapshot (``cdc-delta snapshot``)."""
    connect: ConnectConfig = Field(default_factory=ConnectConfig)
    """The Kafka Connect worker that ``cdc-delta connectors`` applies the Debezium connectors to."""
    schema_registry: SchemaRegistryConfig = Field(default_factory=SchemaRegistryConfig, validate_default=True)
    """Where ``kafka.value_format: avro`` reads its schemas."""
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    """Prometheus metrics and health of the stream; metrics files of the jobs."""
    live_tables: LiveTablesConfig = Field(default_factory=LiveTablesConfig)
    """Hive/Presto/Trino tables over the live Delta tables (symlink manifests)."""
    fresh_views: FreshViewsConfig = Field(default_factory=FreshViewsConfig)
    """Views in the metastore that show each table's pending changes to every Spark SQL reader."""
    source: SourceConfig = Field(default_factory=SourceConfig)
    """The source database ``cdc-delta check`` compares the tables with."""
    changelog: ChangelogConfig = Field(default_factory=ChangelogConfig)
    """The multi-table changelog every micro-batch lands in (phase 1)."""
    merge: MergeConfig = Field(default_factory=MergeConfig)
    """When each table's pending changes are merged into its Delta table (phase 2)."""
    repair: RepairConfig = Field(default_factory=RepairConfig)
    """Re-reading tables from the source through Debezium (``cdc-delta resnapshot``)."""
    activity: ActivityConfig = Field(default_factory=ActivityConfig)
    """Each table's change rate learned from its history: silent tables and rate jumps flagged."""
    scan_pii: ScanPiiConfig = Field(default_factory=ScanPiiConfig)
    """How ``cdc-delta scan-pii`` looks for sensitive values in plain text."""
    masking: MaskingConfig = Field(default_factory=MaskingConfig)
    """The salt of the tables' ``mask: {column: hash}`` rules (read like a password, never in this file)."""
    allow_type_widening: bool = True
    """Follow a source column that widens (int -> bigint, decimal(10,2) -> decimal(12,2)). Off: such a
    change stops the table like any other incompatible change."""
    _owners: tuple[list[TableConfig], Owners, dict[str, TableConfig]] | None = PrivateAttr(default=None)
    """:meth:`owner`'s index of :attr:`tables`, and the list it was built from."""
    type_widening: Literal["rewrite", "delta_feature"] = "rewrite"
    """How a column is widened. ``rewrite``: the table's files are rewritten with the wider type in one
    commit, so every reader (delta-rs, Trino, symlink manifests) can still open the table; it costs a
    full rewrite of the table, once per widening. ``delta_feature``: Delta's typeWidening table feature,
    metadata only, but readers without it (delta-rs, hence Polars and DuckDB) cannot open the table."""

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: object) -> object:
        if isinstance(data, dict) and "merge_concurrency" in data:
            raise ValueError("merge_concurrency is now merge.concurrency (merge: {concurrency: 4})")
        return data

    @field_validator("app_id")
    @classmethod
    def _app_id(cls, value: str) -> str:
        if not _APP_ID.fullmatch(value):
            raise ValueError(f"app_id {value!r} must be letters, digits, '.', '_' or '-'")
        return value

    @field_validator("trigger_interval", mode="before")
    @classmethod
    def _trigger_interval(cls, value: object) -> object:
        return check_trigger_interval(value)

    @field_validator("kafka")
    @classmethod
    def _subscribed(cls, value: KafkaConfig, info: ValidationInfo) -> KafkaConfig:
        problem = unsubscribed(value, info.data.get("tables") or [])
        if problem:
            raise ValueError(problem)
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

    @property
    def listed_tables(self) -> list[TableConfig]:
        """The tables listed one by one (not made by a pattern entry)."""
        return [t for t in self.tables if not t.is_pattern]

    @property
    def patterns(self) -> list[TableConfig]:
        """The pattern entries."""
        return [t for t in self.tables if t.is_pattern]

    def key_from_records(self, name: str) -> bool:
        """Whether the table named ``name`` takes its key from Debezium's record key (a pattern entry
        without ``key`` makes it)."""
        entry = self.pattern_entry(name)
        return entry is not None and not entry.key

    @property
    def keys_from_records(self) -> bool:
        """Whether a pattern entry takes its tables' keys from Debezium's record keys."""
        return any(not p.key for p in self.patterns)

    @model_validator(mode="after")
    def _across_sections(self) -> AppConfig:
        """The checks of one setting against another section's, all reported at once."""
        problems = [
            (loc, message)
            for loc, message in (
                (("schema_registry",), self._registry_problem()),
                ((), self._snapshot_tables_problem()),
                ((), self._local_parts_problem()),
                (("masking",), self._salt_problem()),
                (("changelog", "retention_hours"), self._archival_retention_problem()),
            )
            if message
        ]
        if problems:
            raise ValidationError.from_exception_data(
                type(self).__name__,
                [
                    InitErrorDetails(type=PydanticCustomError("value_error", message), loc=loc, input=None)
                    for loc, message in problems
                ],
            )
        return self

    def _archival_retention_problem(self) -> str | None:
        archival = [t.name for t in self.tables if t.archival_deletes is not None]
        if archival and self.changelog.retention_hours < ARCHIVAL_RETENTION_HOURS:
            return (
                f"archival_deletes (tables {', '.join(archival)}) counts a purge's deletes over the changelog's "
                f"landings: keep them at least {ARCHIVAL_RETENTION_HOURS:g} hours "
                f"(changelog.retention_hours: {self.changelog.retention_hours:g})"
            )
        return None

    def _salt_problem(self) -> str | None:
        hashed = [t.name for t in self.tables if any(r.kind == "hash" for r in t.mask_rules().values())]
        if hashed and not (self.masking.password_env or self.masking.password_file):
            return (
                f"mask: hash (tables {', '.join(hashed)}) needs a salt: set masking.password_env to the variable "
                "holding it, or masking.password_file (a secret: never in this file)"
            )
        return None

    def _registry_problem(self) -> str | None:
        if self.kafka.value_format == "avro" and "url" not in self.schema_registry.model_fields_set:
            return (
                "value_format avro needs schema_registry.url, the registry holding the Avro schemas: "
                "write schema_registry: {url: http://schema-registry:8081}"
            )
        return None

    def _snapshot_tables_problem(self) -> str | None:
        names = {t.name for t in self.listed_tables}
        unknown = [n for n in self.snapshot.tables if n not in names and self.pattern_entry(n) is None]
        if unknown:
            return f"snapshot.tables names unknown table(s) {unknown}; known: {sorted(names)}"
        sharded = [t.name for t in self.listed_tables if t.key_includes_source and t.name in self.snapshot.tables]
        if sharded:
            return (
                f"snapshot.tables lists {sharded}, whose key includes the shard (key_includes_source): the "
                "nightly snapshot does not support those tables; leave them out"
            )
        if self.snapshot.tables and self.hive_name_clashes():
            return self.hive_name_clashes()
        if self.live_tables.enabled:
            clashes = short_name_clashes(self.listed_tables)
            if clashes:
                return (
                    f"live_tables: tables would share Hive names {self.live_tables.database}.{clashes}: the live "
                    "tables are named by the table name without its database; rename the logical tables"
                )
        return None

    def _local_parts_problem(self) -> str | None:
        """What must stay on a local (or shared POSIX) filesystem when the lake is on an object store: the
        jobs' locks (``flock``) and the embedded Derby metastore; refused now rather than at 3 a.m."""
        root = self.storage.root
        if not is_uri(root) or root.startswith("file:"):
            return None
        missing = []
        if not self.maintenance.lock_path:
            missing.append("maintenance.lock_path")
        if not self.snapshot.lock_path:
            missing.append("snapshot.lock_path")
        if not self.snapshot.metastore_uri and not self.snapshot.metastore_dir:
            missing.append("snapshot.metastore_dir (or snapshot.metastore_uri, a Hive metastore)")
        if missing:
            return (
                f"storage.root {root!r} is on an object store, where a lock or an embedded metastore cannot "
                f"live: set {', '.join(missing)} to local paths (shared by every host that runs the jobs)"
            )
        return None

    def second_writer_hazard(self) -> str | None:
        """Why a job that commits to the tables beside the stream (``maintain``, ``cdc-delta merge``) may
        lose a commit here, or None: on S3, Delta's default log store keeps only the commits of one JVM
        apart (S3 has no rename that refuses to overwrite)."""
        scheme = self.storage.root.split(":", 1)[0].lower()
        if scheme not in ("s3a", "s3n", "s3"):
            return None
        store = self.spark.conf.get(f"spark.delta.logStore.{scheme}.impl", "")
        if "DynamoDB" in store:
            return None
        return (
            f"storage.root is on S3 with Delta's single-driver log store: a commit of this job and one of the "
            f"stream to the same table are not kept apart, and one can replace the other. Run it while the stream "
            f"is stopped, or set spark.conf spark.delta.logStore.{scheme}.impl: io.delta.storage.S3DynamoDBLogStore "
            "for every job (docs/design.md: Object storage)"
        )

    def hive_name_clashes(self) -> str | None:
        """Why the snapshot tables cannot all be published (two would share a Hive name), or None.

        Tables that share a name in different databases (inventory.items, archive.items) replicate
        fine; only their nightly snapshots would collide in ``<snapshot.database>.<name>``."""
        clashes = short_name_clashes([t for t in self.listed_tables if self.in_snapshot(t)])
        if not clashes:
            return None
        return (
            f"snapshot tables would share Hive names {self.snapshot.database}.{clashes}: list only one table "
            "per name under snapshot.tables"
        )

    def apart(self, tables: list[TableConfig]) -> tuple[list[TableConfig], dict[str, list[str]]]:
        """``tables`` without those a pattern entry made whose Hive name (the name without its database)
        another of ``tables`` has; and those left out, each with the others of its name. (Listed tables
        are kept: the config refuses listed tables that would share a Hive name.)"""
        clashes = set(short_name_clashes(tables))
        listed = {t.name for t in self.listed_tables}
        kept: list[TableConfig] = []
        left: dict[str, list[str]] = {}
        for table in tables:
            short = table.name.split(".")[-1]
            if short in clashes and table.name not in listed:
                left[table.name] = sorted(t.name for t in tables if t.name.split(".")[-1] == short and t is not table)
            else:
                kept.append(table)
        return kept, left

    def in_snapshot(self, table: TableConfig) -> bool:
        """Whether the nightly snapshot publishes ``table``."""
        return table.name in self.snapshot.tables if self.snapshot.tables else not table.key_includes_source

    def under_root(self, configured: str | None, name: str) -> str:
        """``configured`` if set, else ``<storage.root>/<name>``."""
        return configured or f"{self.storage.root.rstrip('/')}/{name}"

    def table(self, name: str) -> TableConfig:
        """The table named ``name``: listed, or made by a pattern entry that names its key
        (:meth:`pattern_table`; the tables known at run time: :class:`cdc_delta.catalog.TableCatalog`)."""
        entry = self.entry(name)
        made = self.pattern_table(name) if entry.is_pattern else entry
        assert made is not None
        return made

    def table_path(self, name: str) -> str:
        """Where the table named ``name`` lives (its name alone tells it: no key needed)."""
        entry = self.entry(name)
        return self.storage.table_path(entry.made(name) if entry.is_pattern else entry)

    def entry(self, name: str) -> TableConfig:
        """The entry a table named ``name`` belongs to (:meth:`owner`); a :class:`ConfigError` when none."""
        entry = self.owner(name)
        if entry is None:
            patterns = "".join(f", or made by {p.name!r}" for p in self.patterns)
            raise ConfigError(
                f"no table named {name!r} in the config; known: {[t.name for t in self.listed_tables]}{patterns}"
            )
        return entry

    def owner(self, name: str) -> TableConfig | None:
        """The entry that a table named ``name`` belongs to: the table listed under that name, else the first
        pattern entry whose names look like it. Names decide, so every process finds the same entry."""
        index = self._owners
        if index is None or index[0] is not self.tables:  # built once per list (a batch asks per table)
            by_name: dict[str, TableConfig] = {}
            for t in self.tables:
                by_name.setdefault(t.name, t)
            index = self._owners = (self.tables, Owners(by_name), by_name)
        _, owners, by_name = index
        owner = owners.of(name)
        return None if owner is None else by_name.get(owner)

    def pattern_table(self, name: str) -> TableConfig | None:
        """The table named ``name`` that a pattern entry makes, as far as the file tells it, or None. Raises
        :class:`KeyNotKnown` for a table whose key comes from Debezium's record key: the table index knows
        it (:class:`cdc_delta.catalog.TableCatalog`)."""
        entry = self.pattern_entry(name)
        if entry is None:
            return None
        if not entry.key:
            raise KeyNotKnown(
                f"the key of table {name!r} is not known here: pattern entry {entry.name!r} takes each table's key "
                "from Debezium's record key, which the changelog's table index records when the stream first "
                "lands the table; run the stream first, or give the entry a key"
            )
        return entry.made(name)

    def pattern_entry(self, name: str) -> TableConfig | None:
        """The pattern entry that makes the table named ``name``, or None."""
        entry = self.owner(name)
        return entry if entry is not None and entry.is_pattern else None


def short_name_clashes(tables: Iterable[TableConfig]) -> list[str]:
    """Table names (without their database) that more than one of ``tables`` has."""
    short = [t.name.split(".")[-1] for t in tables]
    return sorted({n for n in short if short.count(n) > 1})
