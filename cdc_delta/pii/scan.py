"""Scan each table's string columns for sensitive values in plain text, without Spark: a sample of its
live rows read with delta-rs, each value matched by :func:`~cdc_delta.pii.detectors.kind_of`. A column is
a finding when one kind makes up ``scan_pii.min_share`` of its non-empty values, and at least
``scan_pii.min_matches`` of them, unless ``scan_pii.allow`` lists it. The bookkeeping columns
(``_cdc_*``) are not scanned."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from cdc_delta.columns import DELETED
from cdc_delta.config import AppConfig
from cdc_delta.delta.delta_rs import open_table
from cdc_delta.exceptions import one_line
from cdc_delta.pii.detectors import kind_of


@dataclass(frozen=True)
class Finding:
    column: str
    kind: str
    matched: int
    values: int
    """Non-empty values sampled."""

    @property
    def share(self) -> float:
        return self.matched / self.values


@dataclass(frozen=True)
class TableScan:
    table: str
    rows_sampled: int = 0
    columns_scanned: int = 0
    plaintext_columns: int = 0
    """How many findings (the metric an alert reads)."""
    findings: list[Finding] = field(default_factory=list)
    skipped: str | None = None

    def line(self) -> str:
        if self.skipped:
            return f"{self.table}: not scanned ({self.skipped})"
        if not self.findings:
            return f"{self.table}: nothing found in {self.columns_scanned} string columns ({self.rows_sampled} rows)"
        found = "; ".join(f"{f.column}: {f.kind} in {f.share:.0%} of {f.values} values" for f in self.findings)
        return f"{self.table}: plain text found: {found}"


@dataclass(frozen=True)
class PiiReport:
    ran_at: str
    tables: list[TableScan]
    duration_s: float

    @property
    def findings(self) -> int:
        return sum(t.plaintext_columns for t in self.tables)


def scan_table(config: AppConfig, table: str) -> TableScan:
    import pyarrow as pa
    import pyarrow.dataset as ds

    delta = open_table(config, config.table_path(table))
    if delta is None:
        return TableScan(table, skipped="no Delta table yet")
    dataset = delta.to_pyarrow_dataset()
    columns = [f.name for f in dataset.schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
    columns = [c for c in columns if not c.startswith("_cdc_")]
    if not columns:
        return TableScan(table)
    live = None  # a row whose flag is null is live; a table without the flag is read whole
    if DELETED in dataset.schema.names:
        live = ds.field(DELETED).is_null() | (ds.field(DELETED) == False)  # noqa: E712 (a pyarrow expression)
    sample = dataset.scanner(columns=columns, filter=live, use_threads=False).head(config.scan_pii.sample_rows)
    s = config.scan_pii
    findings = []
    for column in columns:
        if f"{table}.{column}" in s.allow:
            continue
        values = [v for v in sample[column].to_pylist() if v is not None and v.strip()]
        kinds = Counter(k for v in values if (k := kind_of(v)) is not None)
        if kinds:
            kind, matched = kinds.most_common(1)[0]
            if matched >= s.min_matches and matched >= s.min_share * len(values):
                findings.append(Finding(column, kind, matched, len(values)))
    return TableScan(table, sample.num_rows, len(columns), len(findings), findings)


def scan(config: AppConfig, tables: list[str]) -> PiiReport:
    import datetime as dt

    started = time.monotonic()
    ran_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    return PiiReport(ran_at, [_scanned(config, t) for t in tables], round(time.monotonic() - started, 2))


def _scanned(config: AppConfig, table: str) -> TableScan:
    """:func:`scan_table`, or the table marked not scanned with the reason (one unreadable table does
    not stop the scan of the others)."""
    try:
        return scan_table(config, table)
    except Exception as exc:  # noqa: BLE001 (a torn log, a lost file, an unreadable store: said per table)
        return TableScan(table, skipped=f"cannot be read: {one_line(exc, limit=200)}")
