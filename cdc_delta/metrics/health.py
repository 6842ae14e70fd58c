"""Whether the stream (or a merge job) is healthy, for ``/healthz``: its query runs and its batches keep
finishing (a merge job: its rounds)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Health:
    healthy: bool
    reason: str


def judge(
    *,
    active: bool,
    failure: str | None,
    trigger_active: bool,
    since_last_batch_s: float,
    waiting_records: int | None,
    limit_s: float,
) -> Health:
    """Unhealthy when the query has ended, or when no batch has finished for ``limit_s`` although a
    batch is running or records wait in Kafka. An idle stream (nothing to read) is healthy however
    long it idles."""
    if not active:
        return Health(
            False, f"the streaming query has ended: {failure}" if failure else "the streaming query has ended"
        )
    since = f"no batch finished for {since_last_batch_s:.0f}s"
    if since_last_batch_s > limit_s and trigger_active:
        return Health(False, f"{since} (limit {limit_s:.0f}s) and a batch is still running")
    if since_last_batch_s > limit_s and waiting_records:
        return Health(False, f"{since} (limit {limit_s:.0f}s) while {waiting_records} records wait in Kafka")
    waiting = "unknown" if waiting_records is None else str(waiting_records)
    return Health(True, f"ok: last batch {since_last_batch_s:.0f}s ago, {waiting} records waiting")


def judge_merger(
    *, running_for_s: float | None, since_last_round_s: float | None, pending_tables: int, limit_s: float
) -> Health:
    """Unhealthy when a merge round has run for more than ``limit_s`` (``running_for_s``; None between
    rounds; ``since_last_round_s`` None before the first). A merger waiting for tables to become due is
    healthy however long it waits; one that falls behind says so in its metrics (merge lag), which a
    probe that restarts it would not help."""
    if running_for_s is not None and running_for_s > limit_s:
        return Health(False, f"a merge round has run for {running_for_s:.0f}s (limit {limit_s:.0f}s)")
    if running_for_s is not None:
        doing = "a round running" if since_last_round_s is not None else "the first round running"
    else:
        doing = f"last round {since_last_round_s:.0f}s ago" if since_last_round_s is not None else "no round yet"
    return Health(True, f"ok: {doing}, {pending_tables} tables with changes pending")
