"""Each table's change history read with delta-rs (no Spark: ``status`` reads it, and so does the
maintenance after counting): the counts of ``_cdc_activity`` plus the changelog's landings since they
were counted, so that a table that changes again is no longer silent before the next count."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

from cdc_delta.activity.counts import activity_path, activity_txn_id
from cdc_delta.activity.judge import BUCKET_MS, History, Verdict, judge
from cdc_delta.changelog.table import LAND_SEQ, TABLE, changelog_path
from cdc_delta.config import AppConfig
from cdc_delta.delta.delta_rs import open_table, read


def histories(config: AppConfig) -> dict[str, History]:
    """Per table seen, its counts and newest change (empty before the first count)."""
    counted = open_table(config, activity_path(config))
    if counted is None:
        return {}
    buckets: dict[str, dict[int, int]] = defaultdict(dict)
    last: dict[str, int] = {}
    rows = read(counted.to_pyarrow_dataset(), [TABLE, "bucket_ms", "changes", "last_ms"]).to_pylist()
    through = counted.transaction_version(activity_txn_id(config))
    changelog = open_table(config, changelog_path(config))
    if changelog is not None and through is not None:
        rows += _tail_counts(changelog, int(through))
    for row in rows:
        table, bucket = row[TABLE], row["bucket_ms"]
        buckets[table][bucket] = buckets[table].get(bucket, 0) + row["changes"]
        last[table] = max(last.get(table, row["last_ms"]), row["last_ms"])
    return {table: History(counts, last.get(table)) for table, counts in buckets.items()}


def _tail_counts(changelog: Any, through: int) -> list[dict[str, Any]]:
    """The changes of the landings past ``through`` per table and bucket, counted by pyarrow (as the
    maintenance's count does, snapshot reads left out)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    tail = read(
        changelog.to_pyarrow_dataset(),
        [TABLE, "source_ts_ms", "landed_at"],
        (ds.field(LAND_SEQ) > through) & (ds.field("op") != "r"),
    )
    if not tail.num_rows:
        return []
    landed_ms = pc.divide(pc.cast(pc.cast(tail["landed_at"], pa.timestamp("us")), pa.int64()), 1000)
    ts = pc.coalesce(tail["source_ts_ms"], landed_ms)
    buckets = pc.multiply(pc.divide(ts, BUCKET_MS), BUCKET_MS)  # integer division: the bucket's start
    grouped = (
        pa.table({TABLE: tail[TABLE], "bucket_ms": buckets, "ts": ts})
        .group_by([TABLE, "bucket_ms"])
        .aggregate([("ts", "count"), ("ts", "max")])
    )
    return [
        {TABLE: r[TABLE], "bucket_ms": r["bucket_ms"], "changes": r["ts_count"], "last_ms": r["ts_max"]}
        for r in grouped.to_pylist()
    ]


def verdicts(config: AppConfig, tables: list[str], now_ms: int | None = None) -> dict[str, Verdict]:
    """Per table of ``tables``, how its recent changes compare with its history."""
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    known = histories(config)
    empty = History({}, None)
    return {t: judge(known.get(t, empty), now_ms, config.activity) for t in tables}
