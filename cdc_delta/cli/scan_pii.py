"""``cdc-delta scan-pii``: report the columns of the replicated tables whose values look sensitive in
plain text (:mod:`cdc_delta.pii`), as lines or JSON, with a JSON report and, with
``metrics.textfile_dir``, the textfile ``cdc_delta_scan_pii.prom`` (``..._table_plaintext_columns``)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from cdc_delta.cli.common import add_config_argument
from cdc_delta.config import AppConfig, load_config
from cdc_delta.exceptions import EXIT_ATTENTION, CdcDeltaError
from cdc_delta.metrics.textfile import job_metrics


def cmd_scan_pii(args: argparse.Namespace) -> int:
    from cdc_delta.changelog.table_index import indexed_without_spark

    config = load_config(args.config)
    names = [t.name for t in indexed_without_spark(config).tables()]
    unknown = sorted(set(args.table or []) - set(names))
    if unknown:
        raise CdcDeltaError(f"--table {', '.join(unknown)}: no such table; the tables are {', '.join(names)}")
    return scan_and_report(config, args.table or names, args.json)


def scan_and_report(config: AppConfig, tables: list[str], as_json: bool = False) -> int:
    """Scan ``tables``, write the JSON report and the textfile, print the lines (or the JSON); returns the
    exit code (1: a column found)."""
    from cdc_delta.pii.scan import scan
    from cdc_delta.reports import write_report

    with job_metrics(config, "scan_pii") as run:
        report = run.report = scan(config, tables)
        run.exit_code = EXIT_ATTENTION if report.findings else 0
    payload = dataclasses.asdict(report)
    write_report(config.under_root(None, "_cdc_pii_reports"), f"scan-pii-{report.ran_at}", payload)
    if as_json:
        print(json.dumps(payload, indent=2))
        return run.exit_code
    for table in report.tables:
        print(table.line())
    fix = " (mask them at the source, or list them in scan_pii.allow)" if report.findings else ""
    print(
        f"scan-pii: {len(report.tables)} table(s), {report.findings} column(s) with plain text, in "
        f"{report.duration_s}s{fix}",
        file=sys.stderr if report.findings else sys.stdout,
    )
    return run.exit_code


def add_commands(sub: Any) -> None:
    """Register ``scan-pii`` on the top-level subparsers."""
    command = sub.add_parser(
        "scan-pii",
        help="find columns whose values look sensitive in plain text (e-mails, phones, card and id numbers)",
        description=(
            "Reads scan_pii.sample_rows live rows of each table's string columns with delta-rs (no Spark) and "
            "reports each column where one kind of sensitive value makes up scan_pii.min_share of the values: "
            "e-mail addresses, phone numbers, card numbers (Luhn check), Chinese resident ids (check digit), "
            "IBANs (check digits), US SSNs. Writes a JSON report; exit 0 nothing found, 1 a column found (one "
            "line each), 2 a bad config or --table."
        ),
    )
    add_config_argument(command)
    command.add_argument("--table", action="append", help="only this logical table (repeatable); default: all")
    command.add_argument("--json", action="store_true", help="print the report as JSON instead of lines")
    command.set_defaults(func=cmd_scan_pii)
