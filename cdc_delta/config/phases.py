"""The two phases' sections: where the changelog lands every batch, and when each table is merged."""

from __future__ import annotations

from pydantic import Field, field_validator

from cdc_delta.config.common import Frozen, absolute


class ChangelogConfig(Frozen):
    """The multi-table changelog every micro-batch appends to, once, before any table is merged."""

    path: str | None = None
    """The changelog's Delta table; default ``<storage.root>/_cdc_changelog`` (its schemas beside it,
    ``<path>_schemas``)."""
    retention_hours: float = Field(default=168, ge=0)
    """Maintenance deletes changes every table has merged once they are older than this; a change a
    table has not merged yet is never deleted. Within it, ``cdc-delta rebuild`` rebuilds a table without
    Kafka."""
    row_group_mb: float = Field(default=0.25, ge=1 / 64)
    """Parquet row-group size of the changelog's files (as Parquet measures it while it writes: a row
    group on disk is smaller). Each landing's rows are sorted by table, so a merge or a live view reading
    one table's changes skips the row groups that hold none of them; a group as large as a landing's
    file skips nothing (docs/performance.md, "Reading one table's pending changes"). Smaller skips more,
    in larger files."""

    @field_validator("path")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        return absolute(value)

    def located(self, root: str) -> str:
        return self.path if self.path else f"{root.rstrip('/')}/_cdc_changelog"


class MergeConfig(Frozen):
    """When the merger MERGEs a table's pending changes into its Delta table.

    A MERGE has a fixed cost (about a second of JVM CPU on 2 cores, whatever its size), so the merger
    waits until a table has ``min_events`` pending or its oldest pending change is ``max_delay_seconds``
    old; readers of the live views see every landed change meanwhile."""

    min_events: int = Field(default=20_000, ge=1)
    """Merge a table once this many changes are pending."""
    max_delay_seconds: float = Field(default=60, ge=0)
    """Or once its oldest pending change landed this long ago. 0: every table with pending changes is
    merged after every batch (the stream waits for it)."""
    concurrency: int = Field(default=4, ge=1)
    """Tables merged at once, each in a Spark session of its own (1: one after the other)."""
    max_tables_per_round: int = Field(default=50, ge=1)
    """The due tables taken by one round, most overdue first (pending changes x their age); the pending
    changes of a round are read from the changelog in one pass."""
    in_stream: bool = True
    """Run the merger in the stream's process, beside the ingest. False: the stream only lands, and
    ``cdc-delta merge`` runs the merger (a second job on a cluster)."""
