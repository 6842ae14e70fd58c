"""Hive tables over the live Delta tables, through Delta's symlink manifests (Presto, Trino, Athena)."""

from __future__ import annotations

from pydantic import field_validator

from cdc_delta.config.common import Frozen, plain_identifier


class LiveTablesConfig(Frozen):
    """Per replicated table ``db.name``: the Hive external table ``<database>.<name>_all`` over the
    Delta table's symlink manifest (every row, soft-deleted ones included) and the view
    ``<database>.<name>`` of its live rows, registered in the snapshot's metastore."""

    enabled: bool = False
    """The stream turns on Delta's manifest on every table it writes
    (``delta.compatibility.symlinkFormatManifest.enabled``: the manifest is rewritten after each
    commit, a small extra write per table per batch); ``cdc-delta live-tables --register`` and the
    hourly maintenance register the Hive tables and views, and re-create them when the Delta schema
    changed."""
    database: str = "cdc_live"
    """Hive database of the live tables and views."""

    @field_validator("database")
    @classmethod
    def _database(cls, value: str) -> str:
        return plain_identifier(value, "live_tables.database")
