"""The one line a maintenance run says per table and for the changelog: the same text in the log and in
``cdc-delta maintain``'s output (both print :meth:`summary`), every outcome named."""

from __future__ import annotations

from cdc_delta.maintenance.changelog import ChangelogReport
from cdc_delta.maintenance.run import TableReport

SIZES = {"files_before": 12, "bytes_before": 9000, "files_after": 1, "bytes_after": 7000}


def test_a_table_that_was_compacted_purged_vacuumed_and_checkpointed() -> None:
    report = TableReport(
        "db.t",
        **SIZES,
        files_compacted=12,
        rows_purged=3,
        purge_cutoff="2026-11-20T00:00:00+00:00",
        files_vacuumed=14,
        checkpoint_version=31,
        duration_s=4.25,
    )
    assert report.summary() == (
        "files 12 -> 1, bytes 9000 -> 7000, 3 tombstones purged (before 2026-11-20T00:00:00+00:00), "
        "14 files vacuumed, checkpoint at version 31, 4.2s"
    )


def test_an_idle_table_says_why_nothing_was_purged_vacuumed_or_checkpointed() -> None:
    report = TableReport(
        "db.t",
        **SIZES,
        purge_waits_for="no published snapshot yet",
        vacuumed=False,
        duration_s=0.5,
    )
    assert report.summary() == (
        "files 12 -> 1, bytes 9000 -> 7000, 0 tombstones purged (none may go: no published snapshot yet), "
        "VACUUM not due (maintenance.vacuum_interval_hours), no checkpoint (no file rewritten), 0.5s"
    )


def test_skipped_table_and_changelog() -> None:
    assert TableReport("db.t", skipped="no table yet").summary() == "skipped (no table yet)"
    assert ChangelogReport(skipped="no changelog yet").summary() == "skipped (no changelog yet)"


def test_the_changelog_line() -> None:
    report = ChangelogReport(
        **SIZES,
        rows_deleted=40,
        retention_cutoff="2026-11-21T00:00:00+00:00",
        files_vacuumed=5,
        checkpoint_version=8,
        duration_s=2.0,
    )
    assert report.summary() == (
        "files 12 -> 1, bytes 9000 -> 7000, 40 merged changes deleted (landed before 2026-11-21T00:00:00+00:00), "
        "5 files vacuumed, checkpoint at version 8, 2.0s"
    )
