"""What the changelog holds, read with delta-rs (no Spark, for ``status`` and ``check``): the newest
landing and the Kafka offsets landed, and per table the changes not merged yet."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from cdc_delta.changelog.table import LAND_SEQ, TABLE
from cdc_delta.config import AppConfig
from cdc_delta.delta.commits import merge_txn_app_id, parse_commit
from cdc_delta.delta.delta_rs import open_table, read
from cdc_delta.delta.status import TableStatus

LANDINGS_DEPTH = 500
"""Landings read back for the Kafka offsets the changelog holds (a quiet partition older than them
shows none)."""


def with_pending(config: AppConfig, tables: list[TableStatus]) -> list[TableStatus]:
    """``tables`` with their pending changes, counted in one pass over the landings past theirs."""
    readable = [t for t in tables if t.version is not None or t.unreadable is None]  # the torn: pending unknown
    pending = pending_changes(config, {t.table: -1 if t.merged_seq is None else t.merged_seq for t in readable})
    return [dataclasses.replace(t, **pending[t.table]) if t.table in pending else t for t in tables]


def pending_changes(config: AppConfig, merged: dict[str, int], through: int | None = None) -> dict[str, dict[str, Any]]:
    """Per table, the changes the changelog holds past ``merged`` (its merged landing) and up to landing
    ``through`` (None: the newest): how many, and how long ago the oldest landed."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    changelog = open_table(config, config.changelog.located(config.storage.root))
    if changelog is None or not merged:
        return {}
    low = min(merged.values())
    where = ds.field(LAND_SEQ) > low
    if through is not None:
        where = where & (ds.field(LAND_SEQ) <= through)
    rows = read(changelog.to_pyarrow_dataset(), [TABLE, LAND_SEQ, "landed_at"], where)
    out: dict[str, dict[str, Any]] = {}
    now = time.time()
    for name, position in merged.items():
        mine = rows.filter(pc.and_(pc.equal(rows[TABLE], name), pc.greater(rows[LAND_SEQ], position)))
        if mine.num_rows:
            oldest = pc.min(mine["landed_at"]).as_py()
            out[name] = {"pending": mine.num_rows, "oldest_pending_s": max(0.0, now - oldest.timestamp())}
    return out


def merged_landing(config: AppConfig, table: str) -> int:
    """The newest landing the table holds (-1: none, or no table)."""
    found = open_table(config, config.table_path(table))
    merged = None if found is None else found.transaction_version(merge_txn_app_id(config.app_id, table))
    return -1 if merged is None else int(merged)


def landed_offsets(config: AppConfig) -> tuple[int | None, dict[tuple[str, int], int]]:
    """The newest landing, and per topic partition the next offset after the highest one the recent
    landings read (the changelog's view of the stream's position)."""
    changelog = open_table(config, config.changelog.located(config.storage.root))
    if changelog is None:
        return None, {}
    newest: int | None = None
    out: dict[tuple[str, int], int] = {}
    for entry in changelog.history(LANDINGS_DEPTH):
        commit = parse_commit(
            entry.get("version", 0), None, entry.get("operation", ""), entry.get("userMetadata"), None, config.app_id
        )
        if commit is None or commit.record.operation != "land" or commit.record.land_seq is None:
            continue
        newest = max(newest if newest is not None else -1, commit.record.land_seq)
        for topic, partitions in commit.record.offsets.items():
            for partition, offset in partitions.items():
                key = (topic, int(partition))
                out[key] = max(out.get(key, 0), offset + 1)
    return newest, out


def wait_merged(config: AppConfig, table: str, wait_s: float) -> int:
    """Wait until the table has merged every change the changelog holds now. Returns the changes still
    pending (0: done)."""
    newest, _ = landed_offsets(config)
    if newest is None:
        return 0
    deadline = time.monotonic() + max(0.0, wait_s)
    while True:
        merged = merged_landing(config, table)
        pending = pending_changes(config, {table: merged}, newest).get(table, {}).get("pending", 0)
        if not pending or time.monotonic() >= deadline:
            return int(pending)
        time.sleep(min(2.0, max(0.0, deadline - time.monotonic())))
