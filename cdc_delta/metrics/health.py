"""Whether the stream is healthy, for ``/healthz``: its query runs and its batches keep finishing."""

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
