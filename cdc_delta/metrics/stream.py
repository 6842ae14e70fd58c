"""The stream's metrics, fed by each micro-batch's result and by the broker's end offsets.

Counters carry ``table`` labels for the configured tables only (records routed to no table are
``table="(unrouted)"``), so the series are bounded by the config, not by the data."""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from cdc_delta.config import AppConfig
from cdc_delta.delta import repair_log
from cdc_delta.kafka.offsets import PartitionLag
from cdc_delta.merger.results import RoundResult
from cdc_delta.metrics.merge import DURATION_BUCKETS, MergeMetrics
from cdc_delta.stream.results import BatchResult

UNROUTED = "(unrouted)"
REPAIR_LOG_S = 60.0
OUTCOMES = ("in", "landed", "dead_lettered", "skipped")


class StreamMetrics:
    """One stream's metrics in a registry of its own (served by :mod:`cdc_delta.metrics.server`)."""

    def __init__(self, config: AppConfig) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.batches = Counter(
            "cdc_delta_batches", "Micro-batches finished, by result (ok, failed)", ["result"], registry=r
        )
        self.events = Counter(
            "cdc_delta_events",
            "Kafka records per table and outcome; in = landed + dead_lettered + skipped",
            ["table", "outcome"],
            registry=r,
        )
        self.archived = Counter(
            "cdc_delta_archived_changes",
            "Changes landed archived per table: a purge's deletes the lake keeps (archival_deletes)",
            ["table"],
            registry=r,
        )
        self.duration = Histogram(
            "cdc_delta_batch_duration_seconds", "Time to apply one micro-batch", buckets=DURATION_BUCKETS, registry=r
        )
        self.last_batch_id = Gauge("cdc_delta_last_batch_id", "Id of the last micro-batch landed", registry=r)
        self.last_batch_end = Gauge(
            "cdc_delta_last_batch_end_timestamp_seconds", "When the last micro-batch finished (Unix time)", registry=r
        )
        self.merges = MergeMetrics(r)
        self.source_ts = Gauge(
            "cdc_delta_table_source_timestamp_seconds",
            "Source (binlog) time of the newest change applied to the table (Unix time)",
            ["table"],
            registry=r,
        )
        self.consistent_ts = Gauge(
            "cdc_delta_consistent_point_timestamp_seconds",
            "Source commit time of the consistent point: the newest transaction that, with every one before it, "
            "has all its changes landed (Unix time; transaction metadata only)",
            registry=r,
        )
        self.consistent_lag = Gauge(
            "cdc_delta_consistent_point_lag_seconds",
            "How far the consistent point trails the newest change landed, in source time",
            registry=r,
        )
        self.consistent_after = Gauge(
            "cdc_delta_consistent_point_transactions_after",
            "Transactions whose END has landed past the consistent point (a consistent read does not show them yet)",
            registry=r,
        )
        self.started = Gauge("cdc_delta_start_timestamp_seconds", "When the stream started (Unix time)", registry=r)
        self.started.set(time.time())
        self.repairs = _RepairCollector(config)
        r.register(self.repairs)
        self.partition_lag = _LagCollector()
        r.register(self.partition_lag)
        r.register(_FreshnessCollector(self.source_ts))
        self.tables_known([t.name for t in config.listed_tables])
        for result in ("ok", "failed"):
            self.batches.labels(result)
        self._newest: dict[str, float] = {}
        self.last_finished = time.monotonic()
        """Monotonic time of the last finished batch (the start before the first)."""

    def tables_known(self, names: Collection[str]) -> None:
        """Every series of these tables from the start, so that ``rate()`` and ``absent()`` work: the
        listed tables at once, those the pattern entries made once the table index is read."""
        for name in names:
            for outcome in OUTCOMES:
                self.events.labels(name, outcome)
        self.merges.tables_known(names)
        self.repairs.known |= set(names)

    def batch_done(self, result: BatchResult) -> None:
        """Count one applied micro-batch."""
        self.batches.labels("ok").inc()
        self.duration.observe(result.duration_s)
        self.last_batch_id.set(result.batch_id)
        self.last_batch_end.set(time.time())
        self.last_finished = time.monotonic()
        for table, counts in result.table_counts().items():
            for outcome, n in counts.items():
                self.events.labels(table or UNROUTED, outcome).inc(n)
        for table, n in result.archived.items():
            self.archived.labels(table).inc(n)
        if result.land_seq is not None:
            self.merges.landing_known(result.land_seq)
        for table, ts_ms in result.max_source_ts_ms_by_table.items():
            newest = self._newest[table] = max(ts_ms / 1000, self._newest.get(table, 0.0))
            self.source_ts.labels(table).set(newest)
        point = result.consistency.point if result.consistency is not None else None
        if point is not None and point.source_ts_ms is not None and result.consistency is not None:
            self.consistent_ts.set(point.source_ts_ms / 1000)
            self.consistent_lag.set(max(0.0, max(self._newest.values(), default=0.0) - point.source_ts_ms / 1000))
            self.consistent_after.set(result.consistency.ends_after)

    def round_begins(self) -> None:
        self.merges.round_begins()

    def round_done(self, result: RoundResult | None) -> None:
        """Count one merge round of the merger in the stream's process (None: nothing was due)."""
        self.merges.round_done(result)

    def batch_failed(self) -> None:
        self.batches.labels("failed").inc()

    def waiting_records(self) -> int | None:
        """Records in Kafka the stream has not applied yet (last lag reading), None if unknown."""
        return self.partition_lag.total()


class _LagCollector(Collector):
    """``cdc_delta_consumer_lag`` per partition: end offset minus the stream's committed position,
    as last read from the broker (replaced whole, so a scrape never sees half an update)."""

    def __init__(self) -> None:
        self.lags: list[PartitionLag] | None = None
        self.read_at: float | None = None

    def update(self, lags: list[PartitionLag]) -> None:
        self.lags, self.read_at = lags, time.time()

    def total(self) -> int | None:
        lags = self.lags
        if lags is None or any(lag.lag is None for lag in lags):
            return None
        return sum(lag.lag or 0 for lag in lags)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        lags, read_at = self.lags, self.read_at
        lag = GaugeMetricFamily(
            "cdc_delta_consumer_lag",
            "Records in the partition the stream has not applied yet (end offset - committed offset)",
            labels=["topic", "partition"],
        )
        for p in lags or []:
            if p.lag is not None:
                lag.add_metric([p.topic, str(p.partition)], p.lag)
        yield lag
        lost = GaugeMetricFamily(
            "cdc_delta_kafka_lost_records",
            "Records Kafka deleted (retention) before the stream read them: the stream stops at them "
            "(cdc-delta accept-gap moves past, on the record)",
            labels=["topic", "partition"],
        )
        for p in lags or []:
            lost.add_metric([p.topic, str(p.partition)], p.lost)
        yield lost
        if read_at is not None:
            yield GaugeMetricFamily(
                "cdc_delta_consumer_lag_read_timestamp_seconds", "When the lag was last read (Unix time)", value=read_at
            )

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())


class _RepairCollector(Collector):
    """``cdc_delta_table_resnapshot_needed``: 1 for a table a gap accepted touched with no re-snapshot
    recorded since (:mod:`cdc_delta.delta.repair_log`), 0 for the others known; the log is read at most
    every :data:`REPAIR_LOG_S` (a re-snapshot done while the stream runs clears it)."""

    def __init__(self, config: AppConfig) -> None:
        self.config = config
        self.known: set[str] = set()
        self._needed: set[str] = set()
        self._read_at: float | None = None

    def needed(self) -> set[str]:
        now = time.monotonic()
        if self._read_at is None or now - self._read_at >= REPAIR_LOG_S:
            self._needed, self._read_at = set(repair_log.resnapshot_needed(repair_log.entries(self.config))), now
        return self._needed

    def collect(self) -> Iterator[GaugeMetricFamily]:
        needed = self.needed()
        gauge = GaugeMetricFamily(
            "cdc_delta_table_resnapshot_needed",
            "1 while changes of the table were lost in a gap accepted and no re-snapshot was done since",
            labels=["table"],
        )
        for table in sorted(self.known | needed):
            gauge.add_metric([table], 1 if table in needed else 0)
        yield gauge

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())


class _FreshnessCollector(Collector):
    """``cdc_delta_table_freshness_seconds``: now minus the newest applied change's source time."""

    def __init__(self, source_ts: Gauge) -> None:
        self.source_ts = source_ts

    def collect(self) -> Iterator[GaugeMetricFamily]:
        fresh = GaugeMetricFamily(
            "cdc_delta_table_freshness_seconds",
            "Seconds since the source time of the newest change applied to the table",
            labels=["table"],
        )
        now = time.time()
        for metric in self.source_ts.collect():
            for sample in metric.samples:
                fresh.add_metric([sample.labels["table"]], max(0.0, now - sample.value))
        yield fresh

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())
