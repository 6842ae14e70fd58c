"""The source database that ``cdc-delta check`` compares the Delta tables with (MariaDB or MySQL)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, field_validator

from cdc_delta.config.common import Frozen, PasswordSource, absolute


class CheckConfig(Frozen):
    """How ``cdc-delta check`` allows for the stream's lag and for changes while it probes."""

    settle_seconds: float = Field(default=5, ge=0)
    """Time for Debezium to bring the changes before the probe into Kafka: the Kafka end offsets read
    this long after the probe are what the stream must have applied before Delta is compared."""
    wait_seconds: float = Field(default=300, gt=0)
    """How long to wait for the stream to apply them; then the table fails as ``behind``."""
    attempts: int = Field(default=3, ge=1)
    """A table fails only when this many probes in a row disagree (a change between the source's and
    Delta's reading can make one probe disagree)."""
    retry_seconds: float = Field(default=20, ge=0)
    """Pause between two probes of a table that disagreed."""
    report_dir: str | None = None
    """JSON report of each run; default ``<storage.root>/_cdc_check_reports``."""

    @field_validator("report_dir")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        return absolute(value)


class SourceConfig(PasswordSource):
    """Where the source database listens and who reads it (``SELECT`` on the replicated tables; the
    capture user will do). The password comes from ``password_env`` or ``password_file``."""

    SECTION: ClassVar[str] = "source"
    host: str = "127.0.0.1"
    """Host name or address of the source database (MariaDB or MySQL)."""
    port: int = Field(default=3306, gt=0, le=65535)
    """Its port."""
    user: str = "root"
    """The user ``check`` reads as; its password comes from ``password_env`` or ``password_file``."""
    connect_timeout_seconds: float = Field(default=10, gt=0)
    """How long to wait for the server to answer; then ``check`` exits 2 naming host and port."""
    check: CheckConfig = Field(default_factory=CheckConfig)
    """How ``cdc-delta check`` waits for the stream and probes again."""
