"""The repair section: how cdc-delta has Debezium read tables from the source again (``cdc-delta
resnapshot``), and how it tells the connector's own signal rows from a table's."""

from __future__ import annotations

from pydantic import Field, field_validator

from cdc_delta.config.common import IDENTIFIER, Frozen


class RepairConfig(Frozen):
    """Re-reading tables from the source through Debezium's snapshots (``cdc-delta resnapshot``)."""

    signal_table: str = "debezium_signal"
    """The name of Debezium's signal table in a captured database (the connector's
    ``signal.data.collection`` is ``<database>.<signal_table>``). Debezium captures its rows like any
    table's (the watermarks of incremental snapshots): the stream skips them with a count, never a table
    or a dead letter; ``connectors apply`` names it for a connector that has no signal table."""
    wait_seconds: float = Field(default=3600, gt=0)
    """How long ``resnapshot`` follows a snapshot until the rows it read again are merged, before it gives
    up with exit 1 (the snapshot goes on in the connector, and its rows are merged as they land)."""
    settle_seconds: float = Field(default=3, ge=0)
    """After Debezium reports the snapshot complete, how long ``resnapshot`` waits before it reads the
    topics' end offsets (the connector's producer may still hold the last reads)."""

    @field_validator("signal_table")
    @classmethod
    def _plain(cls, value: str) -> str:
        if not IDENTIFIER.fullmatch(value):
            raise ValueError(f"repair.signal_table {value!r} must be a plain table name (letters, digits, _)")
        return value
