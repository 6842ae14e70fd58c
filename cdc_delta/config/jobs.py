"""The hourly maintenance and nightly snapshot sections."""

from __future__ import annotations

import zoneinfo

from pydantic import Field, field_validator, model_validator

from cdc_delta.config.common import Frozen, absolute, plain_identifier

DELTA_MIN_RETENTION_HOURS = 168.0
"""Delta's VACUUM safety check: below this, readers and writers may lose files they still need."""


class MaintenanceConfig(Frozen):
    """The hourly maintenance job: OPTIMIZE, tombstone purge, VACUUM, checkpoint."""

    vacuum_retention_hours: float = Field(default=DELTA_MIN_RETENTION_HOURS, ge=0)
    """VACUUM removes files no longer referenced for this long (time travel reaches this far back)."""
    vacuum_interval_hours: float = Field(default=0, ge=0)
    """VACUUM a table only when its last VACUUM is at least this old (Delta's
    ``_delta_log/_last_vacuum_info`` says when); 0: every run. VACUUM lists the whole table folder,
    most of an idle run's time; files wait up to this much longer past the retention to go."""
    allow_short_retention: bool = False
    """Must be true to VACUUM with less than Delta's 168 h safety margin (the seeds keep 2 h)."""
    tombstone_retention_hours: float = Field(default=DELTA_MIN_RETENTION_HOURS, ge=0)
    """Soft-deleted rows are purged once their source change is older than this (and the stream has
    read past them on every partition)."""
    zorder: bool = False
    """Cluster with OPTIMIZE ... ZORDER BY the table's zorder_by (default: its key) instead of bin-packing (not
    again for a table unchanged since its last Z-order by the same columns)."""
    target_file_size_mb: int = Field(default=128, gt=0)
    """OPTIMIZE's target file size."""
    lock_path: str | None = None
    """Lock file that keeps two runs apart (a local or shared filesystem path);
    default ``<storage.root>/_cdc_maintenance.lock`` when the root is local."""
    report_dir: str | None = None
    """Where the JSON report of each run goes; default ``<storage.root>/_cdc_maintenance_reports``."""
    concurrency: int = Field(default=2, ge=1)
    """Tables maintained at once, each in a Spark session of its own."""
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


class SnapshotConfig(Frozen):
    """The nightly snapshot: Delta tables plus the stock export, published as Hive partitions."""

    database: str = "ods"
    """Hive database of the snapshot tables (``<database>.<table name without its db>``)."""
    tables: list[str] = Field(default_factory=list)
    """Tables to snapshot (logical names); default: every table whose key does not include the shard
    (``key_includes_source`` tables have no shard columns in a stock export and are not supported)."""
    metastore_uri: str | None = None
    """Thrift URI of the Hive metastore (production); unset: an embedded Derby metastore in
    ``metastore_dir`` (one process at a time)."""
    metastore_timeout_seconds: float = Field(default=30, gt=0)
    """How long a job waits for the thrift metastore to accept a connection before it exits 2 naming
    ``metastore_uri`` (Hive's client would otherwise retry with stack traces)."""
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
    concurrency: int = Field(default=4, ge=1)
    """Tables published at once, each in a Spark session of its own."""
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
        return plain_identifier(value, "snapshot.database")

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
        return absolute(value)
