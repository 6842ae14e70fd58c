"""The consistent point read from the changelog with delta-rs (no Spark): for ``status``, the stream's
metrics and the stream itself, which keeps the point in each landing's record for the next reader to go
on from (:mod:`.point`)."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from cdc_delta.changelog.table import LAND_SEQ
from cdc_delta.config import AppConfig
from cdc_delta.consistency.point import Consistency, End, Point, advance, committed_before, first_past, parse_counts
from cdc_delta.decode.plan import decode_plan
from cdc_delta.delta.commits import AppCommit, parse_commit
from cdc_delta.delta.delta_rs import open_table, read
from cdc_delta.events.transactions import TXN_END
from cdc_delta.exceptions import one_line

logger = logging.getLogger(__name__)

TRANSACTION_TOPIC_SUFFIX = ".transaction"
PACE = 5
"""The stream spends at most a fifth of its time moving the consistent point on."""
RECENT_DEPTH = 20
LANDINGS_DEPTH = 500
"""Commits read back for the newest point a landing's record keeps: the recent ones first, then more."""


NO_METADATA = (
    "no source transaction's END has landed: turn on provide.transaction.metadata in the connector "
    "(`cdc-delta connectors apply` sets it where the file leaves it out) and subscribe the stream to "
    "<topic.prefix>.transaction (kafka.topics or kafka.topic_pattern)"
)


def taken_by(config: AppConfig) -> Callable[[str, str], bool]:
    """``taken(topic_prefix, data_collection)``: whether the lake takes a data collection's changes: they
    route to a configured table (on their topic ``<topic.prefix>.<db>.<table>``), and it is not the signal
    table."""
    plan = decode_plan(config)
    cache: dict[tuple[str, str], bool] = {}

    def taken(prefix: str, collection: str) -> bool:
        if (prefix, collection) not in cache:
            db, _, table = collection.partition(".")
            routed = plan.router.route(f"{prefix}.{collection}", db, table) is not None
            cache[(prefix, collection)] = routed and not plan.is_signal(table)
        return cache[(prefix, collection)]

    return taken


def _landing_commits(entries: list[dict[str, Any]], app_id: str) -> Iterator[AppCommit]:
    """The landings among ``entries`` (a Delta history, newest first) as the stream's commit records."""
    for entry in entries:
        commit = parse_commit(
            entry.get("version", 0), None, entry.get("operation", ""), entry.get("userMetadata"), None, app_id
        )
        if commit is not None and commit.record.operation == "land":
            yield commit


def newest_landing(changelog: Any, app_id: str) -> tuple[int | None, Point | None, int | None]:
    """The newest landing among the changelog's recent commits, the newest point a landing keeps, and the
    newest source time of the stream's newest landing (a replay of dead letters lands older changes). The
    newest commits first: the newest landing keeps a point where the stream computed one after the landing
    before."""
    for depth in (RECENT_DEPTH, LANDINGS_DEPTH):
        newest: int | None = None
        newest_ts: int | None = None
        entries = changelog.history(depth)  # newest first
        for commit in _landing_commits(entries, app_id):
            if commit.record.land_seq is None:
                continue
            if newest is None:
                newest = commit.record.land_seq
            if newest_ts is None and not commit.record.from_dead_letters:  # the stream's, not a replay's
                newest_ts = commit.record.max_source_ts_ms
            kept = Point.from_dict(commit.record.consistent)
            if kept is not None:
                return newest, kept, newest_ts
        if len(entries) < depth:  # that was the whole log
            break
    return newest, None, newest_ts


def consistent_point(config: AppConfig, previous: Point | None = None) -> Consistency:
    """The consistent point now: from ``previous`` (the stream's own), else from the newest point a
    landing keeps, else from the changelog's start."""
    changelog = open_table(config, config.changelog.located(config.storage.root))
    if changelog is None:
        return Consistency(None, unavailable="no changelog yet")
    newest, kept, newest_ts = newest_landing(changelog, config.app_id)
    if newest is None:
        return Consistency(None, unavailable="nothing landed yet")
    found = point_after(config, changelog, previous or kept, newest)
    return dataclasses.replace(found, newest_source_ts_ms=newest_ts)


class PointKeeper:
    """The stream's consistent point, moved on after the landings that may move it (they landed ENDs, or
    ENDs wait past the point), from the changelog it keeps open (read again incrementally). Not sooner than
    :data:`PACE` times the time the last one took after it: a point held by a missing change reads more
    landings each time, and the stream must not slow down for it."""

    def __init__(self, config: AppConfig) -> None:
        self.config = config
        self.now: Consistency | None = None
        self._changelog: Any = None
        self._next_at = 0.0
        self._waiting = False
        """ENDs landed that it has not walked yet."""

    def landed(self, land_seq: int, ends: int) -> Consistency | None:
        """After landing ``land_seq``, which held ``ends`` transaction markers."""
        self._waiting = self._waiting or ends > 0 or (self.now is not None and self.now.ends_after > 0)
        started = time.monotonic()
        if not self._waiting or started < self._next_at:
            return self.now
        try:
            if self._changelog is None:
                self._changelog = open_table(self.config, self.config.changelog.located(self.config.storage.root))
                previous = None if self._changelog is None else newest_landing(self._changelog, self.config.app_id)[1]
            else:
                self._changelog.update_incremental()
                previous = self.now.point if self.now is not None else None
            if self._changelog is not None:
                self.now = point_after(self.config, self._changelog, previous, land_seq)
                self._waiting = False
        except Exception as e:  # noqa: BLE001 (the landing stands; the point moves on after a later one)
            logger.warning("the consistent point was not moved on after landing %d: %s", land_seq, one_line(e))
            self._changelog = None
        took = time.monotonic() - started
        self._next_at = started + PACE * took
        return self.now

    def kept(self) -> dict[str, Any] | None:
        """What the next landing's record keeps (:attr:`~cdc_delta.delta.commits.StreamCommit.consistent`)."""
        point = self.now.point if self.now is not None else None
        return None if point is None else point.to_dict()


def kept_before(changelog: Any, app_id: str, through: int, bound: int | None) -> Point | None:
    """The newest point a landing up to ``through`` keeps that is before the END at offset ``bound`` (None:
    any), among the newest :data:`LANDINGS_DEPTH` commits; None where none is."""
    for commit in _landing_commits(changelog.history(LANDINGS_DEPTH), app_id):  # newest first
        kept = Point.from_dict(commit.record.consistent)
        if kept is None or kept.through > through or kept.txn_id is None or kept.offset is None:
            continue
        if bound is None or kept.offset < bound:
            return kept
    return None


def point_before(config: AppConfig, cutoff_ms: int, through: int) -> Consistency:
    """The consistent point at or before the cut-off ``cutoff_ms`` (epoch milliseconds), from the landings
    up to ``through``: the newest transaction such that it and every one before it committed before the
    cut-off and landed whole by then (the nightly snapshot's cut, :mod:`cdc_delta.snapshot.boundary`). It
    goes on from the newest point the stream kept before the first END past the cut-off (the ENDs alone
    are read from the start to find that one)."""
    changelog = open_table(config, config.changelog.located(config.storage.root))
    if changelog is None:
        return Consistency(None, unavailable="no changelog yet")
    dataset = changelog.to_pyarrow_dataset()
    if "txn" not in dataset.schema.names:
        return Consistency(None, unavailable=NO_METADATA)
    bound = first_past(_ends(dataset, 0, through), cutoff_ms)
    previous = kept_before(changelog, config.app_id, through, bound)
    return point_after(config, changelog, previous, through, cutoff_ms)


def _ends(dataset: Any, start: int, newest: int) -> list[End]:
    """The ENDs landed from landing ``start`` through ``newest``."""
    import pyarrow.dataset as ds

    window = (ds.field(LAND_SEQ) >= start) & (ds.field(LAND_SEQ) <= newest)
    found = read(
        dataset,
        ["txn", "topic", "partition", "offset", "source_ts_ms", LAND_SEQ, "row_json"],
        window & (ds.field("op") == TXN_END),
    ).to_pylist()
    return [
        End(
            r["txn"]["id"],
            r["topic"],
            r["partition"],
            r["offset"],
            parse_counts(r["row_json"]),
            r["source_ts_ms"],
            r[LAND_SEQ],
        )
        for r in found
        if r["txn"] is not None
    ]


def point_after(
    config: AppConfig, changelog: Any, previous: Point | None, newest: int, cutoff_ms: int | None = None
) -> Consistency:
    """The point after ``previous``, from the landings past its :attr:`~Point.scan_from` through ``newest``;
    with ``cutoff_ms``, not past the last transaction committed before it."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    dataset = changelog.to_pyarrow_dataset()
    if "txn" not in dataset.schema.names:
        return Consistency(None, unavailable=NO_METADATA)
    start = 0 if previous is None else previous.scan_from
    window = (ds.field(LAND_SEQ) >= start) & (ds.field(LAND_SEQ) <= newest)
    ends = _ends(dataset, start, newest)
    if not ends and (previous is None or previous.txn_id is None):
        return Consistency(previous, unavailable=NO_METADATA)
    if cutoff_ms is not None:
        ends = committed_before(ends, cutoff_ms)
    # A truncate's transaction has no END (nor has a DDL's): it waits for nothing, and nothing waits for it.
    changes = read(
        dataset,
        ["txn", "source_db", "source_table", LAND_SEQ],
        window & ds.field("txn").is_valid() & ~ds.field("op").isin([TXN_END, "t"]),
    )
    flat = changes.select([LAND_SEQ]).append_column("id", pc.struct_field(changes["txn"], "id"))
    flat = flat.append_column("order", pc.struct_field(changes["txn"], "total_order"))
    collection = pc.binary_join_element_wise(changes["source_db"], changes["source_table"], ".")
    flat = flat.append_column("collection", collection)
    grouped = flat.group_by(["id", "collection"]).aggregate([("order", "count_distinct"), (LAND_SEQ, "min")])
    landed = {
        (r["id"], r["collection"]): (r["order_count_distinct"], r[f"{LAND_SEQ}_min"])
        for r in grouped.to_pylist()
        if r["collection"] is not None
    }
    topic = next((e.topic for e in ends), previous.topic if previous is not None else None) or ""
    prefix = topic.removesuffix(TRANSACTION_TOPIC_SUFFIX)
    taken = taken_by(config)
    return advance(previous, ends, landed, lambda c: taken(prefix, c), newest)
