"""The scan_pii section: how ``cdc-delta scan-pii`` samples the tables for sensitive values in plain text."""

from __future__ import annotations

from pydantic import Field, field_validator

from cdc_delta.config.common import Frozen


class ScanPiiConfig(Frozen):
    """``cdc-delta scan-pii`` reads a sample of the live rows of each table's string columns and reports
    the columns whose values look sensitive (e-mail addresses, phone numbers, card numbers by their Luhn
    check, national ids and IBANs by their check digits)."""

    nightly: bool = False
    """The nightly ``cdc-delta snapshot`` scans every table too, after publishing (its lines, report and
    textfile as ``scan-pii``'s; a finding does not change the snapshot's exit code)."""
    sample_rows: int = Field(default=10_000, ge=1)
    """Live rows read per table (the first a scan of the table yields)."""
    min_share: float = Field(default=0.2, gt=0, le=1)
    """A column is reported when at least this share of its non-empty sampled values is one kind..."""
    min_matches: int = Field(default=5, ge=1)
    """... and at least this many of them."""
    allow: list[str] = Field(default_factory=list)
    """Columns known to hold such values on purpose, as ``<table>.<column>`` (``shop.users.email``): not
    reported."""

    @field_validator("allow")
    @classmethod
    def _columns(cls, value: list[str]) -> list[str]:
        for entry in value:
            if "." not in entry.strip("."):
                raise ValueError(
                    f"scan_pii.allow entry '{entry}' does not name a table's column: write <table>.<column>, "
                    "e.g. shop.users.email"
                )
        return value
