"""The long-running stream: Spark's Kafka source -> foreachBatch(BatchProcessor) -> the changelog, each
landing told to the listener it is handed (the merger, which applies them to the Delta tables).

Exactly-once by construction: Spark's checkpoint records which offsets each batch id covers, and each
landing is idempotent per batch id (and checkpoint epoch), each table's merge per landing number, so a
kill at any moment followed by a restart re-applies nothing twice and loses nothing. After each batch
the processed offsets are also committed to the Kafka consumer group ``app_id`` (best effort), so
standard lag tools see the stream.

The command that starts the stream chooses the listener (:func:`cdc_delta.merger.with_stream.merging_for`):
the merger after each landing, beside the ingest in a thread of its own, or none where ``cdc-delta merge``
runs it apart.
"""

from __future__ import annotations

import logging
import signal
import threading
from contextlib import nullcontext
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from cdc_delta.changelog.table import ensure_tables
from cdc_delta.config import AppConfig
from cdc_delta.config.kafka import require_subscription
from cdc_delta.decode.jvm import register_reader
from cdc_delta.exceptions import KafkaUnavailable
from cdc_delta.kafka.client import brokers, spark_source_options
from cdc_delta.kafka.offsets import commit_group_offsets
from cdc_delta.merger.results import RoundResult
from cdc_delta.spark_session import jvm_loggers_at
from cdc_delta.stream.batch import BatchProcessor, LandingListener
from cdc_delta.stream.checkpoint import checkpoint_location, prepare_start
from cdc_delta.stream.results import BatchResult

if TYPE_CHECKING:
    from cdc_delta.stream.broker_watch import BrokerWatch

logger = logging.getLogger(__name__)


# Spark reads each partition's offset range of a batch with a consumer of its own, and the broker holds
# a fetch at a partition's end for fetch.max.wait.ms (500 ms by default): half a second per partition per
# batch, 13 s of a 48-partition batch on 2 cores. The ranges are known to hold data: no need to wait.
SOURCE_DEFAULTS = {"kafka.fetch.max.wait.ms": "20"}


def kafka_source(spark: SparkSession, config: AppConfig, starting_offsets: str | None = None) -> DataFrame:
    """The Kafka records as Spark's Kafka source delivers them (topic, partition, offset, key, value...);
    a new checkpoint starts at ``starting_offsets`` (Spark's JSON form), else at kafka.starting_offsets."""
    kafka = config.kafka
    require_subscription(kafka)
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("startingOffsets", starting_offsets or kafka.starting_offsets)
    )
    if kafka.topics:
        reader = reader.option("subscribe", ",".join(kafka.topics))
    else:
        reader = reader.option("subscribePattern", kafka.topic_pattern)
    if kafka.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(kafka.max_offsets_per_trigger))
    # Spark reads a topic-partition's range in one task: a table of one partition (Debezium's topics have
    # one by default) would decode on one core. Fewer ranges than cores are split (more ranges: no change).
    cores = {"minPartitions": str(spark.sparkContext.defaultParallelism)}
    options = {**SOURCE_DEFAULTS, **cores, **spark_source_options(kafka.security), **kafka.options}
    return reader.options(**options).load()


STOP_MARKER = "cdc-delta graceful stop"


class BatchObserver(Protocol):
    """What is told of each batch and merge round (the stream's Prometheus metrics,
    :mod:`cdc_delta.metrics.stream`)."""

    def batch_done(self, result: BatchResult) -> None: ...

    def batch_failed(self) -> None: ...

    def round_done(self, result: RoundResult) -> None: ...


class StopRequested(RuntimeError):
    """Raised at the start of a batch once a stop was requested: the batch is not applied, Spark does
    not commit it, and the next start processes it; the batches before it are complete."""


class StreamBatch:
    """The foreachBatch function of the stream: apply the batch, commit group offsets, count it in
    ``metrics``, then log its line."""

    def __init__(
        self,
        config: AppConfig,
        stop_requested: threading.Event | None = None,
        metrics: BatchObserver | None = None,
        epoch: str | None = None,
        listener: LandingListener | None = None,
    ) -> None:
        """``listener``: told of each landing (the merger), which may merge at once or beside."""
        self.config = config
        self.processor = BatchProcessor(config, epoch, listener)
        self.stop_requested = stop_requested or threading.Event()
        self.metrics = metrics
        self.listener = listener

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if self.stop_requested.is_set():
            _quiet_refusal(batch)
            raise StopRequested(f"{STOP_MARKER}: batch {batch_id} left for the next start")
        try:
            with self.listener.landing() if self.listener is not None else nullcontext():
                result = self.processor.process(batch, batch_id)
        except Exception:
            if self.metrics is not None:
                self.metrics.batch_failed()
            raise
        if result.offsets:
            commit_group_offsets(brokers(self.config.kafka), self.config.app_id, result.offsets)
        if self.metrics is not None:
            self.metrics.batch_done(result)
            if result.merge is not None:
                self.metrics.round_done(result.merge)
        # The batch's line last: once it is in the log, the group offsets and the metrics say so too.
        logger.info("%s", result.summary())


class RunningStream:
    """The started query and the listener of its landings."""

    def __init__(self, query: StreamingQuery, listener: LandingListener | None) -> None:
        self.query = query
        self.listener = listener

    def check(self) -> None:
        """Raise the failure that ended the listener's own work (the merger's thread), if one did."""
        if self.listener is not None:
            self.listener.check()


def start_stream(
    spark: SparkSession,
    config: AppConfig,
    *,
    listener: LandingListener | None = None,
    available_now: bool = False,
    stop_requested: threading.Event | None = None,
    metrics: BatchObserver | None = None,
) -> RunningStream:
    """Start the streaming query: every ``trigger_interval``, or once over what is there now.

    ``listener`` is told of each landing (the merger; None: the batches only land). Once
    ``stop_requested`` is set, the next batch is refused (see :class:`StopRequested`); each batch is
    counted in ``metrics`` when given. The checkpoint is checked first (:func:`.checkpoint.prepare_start`)."""
    start = prepare_start(spark, config)
    if config.kafka.value_format == "json":
        register_reader(spark)  # up front: a missing decoder jar is a setup error, not a failed first batch
    ensure_tables(spark, config)  # before the first batch and a merger's thread both look for them
    batch = StreamBatch(config, stop_requested, metrics, start.epoch, listener)
    writer = (
        kafka_source(spark, config, start.starting_offsets)
        .writeStream.queryName(config.app_id)
        .option("checkpointLocation", checkpoint_location(config))
        .foreachBatch(batch)
    )
    writer = (
        writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=config.trigger_interval)
    )
    query = writer.start()
    logger.info(
        "stream %s started: %s -> %s (checkpoint %s, epoch %s, %s)",
        config.app_id,
        config.kafka.topics or config.kafka.topic_pattern,
        config.storage.root,
        checkpoint_location(config),
        start.epoch or "-",
        "until caught up" if available_now else f"every {config.trigger_interval}",
    )
    return RunningStream(query, listener)


class GracefulStop:
    """First SIGTERM/SIGINT: stop once the running batch (``unit``) is done. Second: stop now; with
    ``hand_back``, by the handlers there were before :meth:`install` (the command line's, which end the
    command at once: a merge job's round is called from the main thread, and its MERGEs commit whole or
    not at all; those running finish, :meth:`~cdc_delta.delta.workers.TableWorkers.map`)."""

    def __init__(self, unit: str = "batch", hand_back: bool = False) -> None:
        self.requested = threading.Event()
        self.signals = 0
        self.unit = unit
        self.hand_back = hand_back
        self._before: dict[int, Any] = {}

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._before[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.signals += 1
        self.requested.set()
        name = signal.Signals(signum).name
        if self.signals > 1:
            logger.warning("%s again: stopping now; the interrupted %s is run again on restart", name, self.unit)
            return
        logger.warning("%s: stopping after the current %s (send it again to stop at once)", name, self.unit)
        if self.hand_back:
            for sig, handler in self._before.items():
                signal.signal(sig, signal.SIG_DFL if handler is None else handler)


def run_until_stopped(
    stream: RunningStream, stop: GracefulStop, poll_s: int = 1, watch: BrokerWatch | None = None
) -> None:
    """Wait for the query to end by itself (an error, or caught up) or for a stop request.

    After the first signal the running batch finishes and the next one is refused; while no batch
    is being applied (none runs, or Spark is still asking Kafka for offsets) the query is stopped at
    once. After a second signal it is stopped at once regardless. ``watch`` asks the brokers as it
    goes; once it gives up (:class:`~cdc_delta.exceptions.KafkaUnavailable`) the query is stopped and
    the error raised; so is a failure of the merger's thread."""
    query = stream.query
    while query.isActive:
        if stop.requested.is_set() and (stop.signals > 1 or not _applying(query, watch)):
            _stop(query, stuck_on_kafka=watch is not None and watch.down_since is not None)
            logger.info("stream stopped on request")
            return
        if watch is not None:
            try:
                watch.poll()
            except KafkaUnavailable:
                _stop(query, stuck_on_kafka=True)
                raise
        try:
            stream.check()
        except BaseException:
            _stop(query)
            raise
        try:
            query.awaitTermination(poll_s)
        except StreamingQueryException as exc:
            _raise_unless_requested(exc, stop)
            return
    failure = query.exception()
    if failure is not None:
        _raise_unless_requested(failure, stop)


REFUSAL_LOGGERS = ("org.apache.spark.sql.execution.streaming.MicroBatchExecution",)
"""The JVM's loggers that report a batch refused on a stop request as an error, with both stacks."""


def _quiet_refusal(batch: DataFrame) -> None:
    """Silence what reports the refusal of a batch after a stop request as a failure (py4j's callback
    server and the query's executor, each with a stack trace): the stream is stopping, on purpose, and
    says so in one line."""
    logging.getLogger("py4j.clientserver").setLevel(logging.CRITICAL)
    jvm_loggers_at(batch.sparkSession, REFUSAL_LOGGERS, "OFF")


STUCK_STOP_TIMEOUT_MS = 2000
"""How long a stop waits for the query's thread when the brokers are known gone: it is blocked in the
Kafka client, applying nothing (:func:`_applying`), and would only use up ``spark.sql.streaming.stopTimeout``."""


def _stop(query: StreamingQuery, stuck_on_kafka: bool = False) -> None:
    """Stop the query; where its thread does not answer within ``spark.sql.streaming.stopTimeout`` (it
    can be blocked on a broker that is gone; then :data:`STUCK_STOP_TIMEOUT_MS`), leave it: the process
    ends, and the batch it was in is run again at the next start."""
    if stuck_on_kafka:
        # the session the query runs in (Python's StreamingQuery does not expose it), whose conf its stop reads
        query._jsq.sparkSession().conf().set("spark.sql.streaming.stopTimeout", str(STUCK_STOP_TIMEOUT_MS))
    try:
        query.stop()
    except Exception as exc:  # noqa: BLE001 (a JVM TimeoutException reaches Python as a generic error)
        if "spark.sql.streaming.stopTimeout" not in str(exc):
            raise
        logger.warning("the stream's thread did not stop in time (waiting on Kafka?); ending without it")


def _applying(query: StreamingQuery, watch: BrokerWatch | None) -> bool:
    """Whether a batch is being applied now (a stop then waits for it to finish)."""
    if watch is not None and watch.down_since is not None:
        return False  # waiting on a broker that is gone: nothing is being applied
    status = query.status
    return bool(status.get("isTriggerActive")) and not str(status.get("message", "")).startswith("Getting offsets")


def _raise_unless_requested(exc: StreamingQueryException, stop: GracefulStop) -> None:
    if not (stop.requested.is_set() and STOP_MARKER in str(exc)):
        raise exc
    logger.info("stream stopped on request after its last complete batch")
