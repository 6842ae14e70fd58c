"""The one place a SparkSession is built: Delta enabled, sized for the configured cores, jars offline."""

from __future__ import annotations

import atexit
import contextlib
import functools
import glob
import hashlib
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from cdc_delta import jvm_archive
from cdc_delta.config import SparkConfig
from cdc_delta.exceptions import SparkSetupError

logger = logging.getLogger(__name__)

SPARK_VERSION = "4.0.0"
DELTA_VERSION = "4.0.0"
SCALA_BINARY = "2.13"
MAVEN_PACKAGES = (
    f"io.delta:delta-spark_{SCALA_BINARY}:{DELTA_VERSION}",
    f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY}:{SPARK_VERSION}",
    "org.mariadb.jdbc:mariadb-java-client:3.5.3",
)
JARS_DIR_ENV = "CDC_DELTA_JARS_DIR"
DEFAULT_JARS_DIR = ".jars/spark"

# Settings every session gets; SparkConfig.conf is applied after them and wins.
BASE_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
    # Delta writes a checkpoint and reconstructs its snapshot with this many tasks (default 50).
    "spark.databricks.delta.snapshotPartitions": "4",
    # Tables of a batch are merged by several threads (cdc_delta.delta.workers), each with a
    # scheduler pool: FAIR shares the cores between them instead of queueing small jobs behind large.
    "spark.scheduler.mode": "FAIR",
    # Delta's MERGE copies a source that is not a Delta scan before using it (``auto``), against a
    # source that changes between its two passes. The stream's source is a cached, deterministic frame
    # over the batch's local checkpoint: the copy is a job and ~10% of each MERGE for nothing.
    "spark.databricks.delta.merge.materializeSource": "none",
    # Timestamps as Parquet INT64 microseconds, not Spark's default INT96 (deprecated, and read by
    # delta-rs as nanoseconds, which overflow before 1677 and after 2262). The nightly snapshot writes
    # INT96 around its own write, for Hive (cdc_delta.snapshot.hive_publish).
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # The Kafka source keeps a consumer per topic partition between batches, at most 64 by default:
    # with a few hundred partitions (100 tables x 3) every batch closed and reopened consumers and
    # warned ("Pool exceeds its soft max size") hundreds of times. Idle ones still go after 5 minutes.
    "spark.kafka.consumer.cache.capacity": "1024",
    # query.stop() waits this long for the stream's thread, then gives up with an error instead of
    # waiting for ever (Spark's default): a thread blocked on a broker that is gone may never answer
    # the interrupt. The interrupted batch is run again at the next start.
    "spark.sql.streaming.stopTimeout": "20000",
    # VACUUM records VACUUM START/END commits (the files it deleted: maintenance's count and an audit
    # trail). Delta turns that on by default for some stores only: on s3a:// it was off, and every
    # maintenance run reported 0 files vacuumed while it deleted them.
    "spark.databricks.delta.vacuum.logging.enabled": "true",
    # PySpark records the Python call site of every DataFrame function it calls, for error messages:
    # six or so calls into the JVM each. The decoder builds its expressions with a few thousand such
    # calls per batch with many tables (100 tables of distinct columns: 30,000 calls, 6.3 s of a 10 s
    # batch); without the call sites, 2.6 s. The stream's errors name their table and cause themselves.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}


def jars_dir(config: SparkConfig) -> Path:
    """Where pre-fetched jars are looked for: ``spark.jars_dir``, else ``$CDC_DELTA_JARS_DIR``, else
    ``.jars/spark`` of the source checkout cdc_delta runs from, else ``./.jars/spark``."""
    if config.jars_dir or os.environ.get(JARS_DIR_ENV):
        return Path(config.jars_dir or os.environ[JARS_DIR_ENV])
    checkout = Path(__file__).resolve().parents[1] / DEFAULT_JARS_DIR
    return checkout if checkout.is_dir() else Path(DEFAULT_JARS_DIR)


def session_conf(config: SparkConfig, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every Spark setting the session is built with (without building it); ``extra`` (the Hive
    metastore of the snapshot job) comes before the config's own ``spark.conf``, which wins."""
    conf = dict(BASE_CONF)
    conf.update(extra or {})
    conf["spark.sql.shuffle.partitions"] = str(config.shuffle_partitions)
    conf["spark.databricks.delta.snapshotPartitions"] = str(config.shuffle_partitions)
    folder = jars_dir(config)
    jars = sorted(glob.glob(str(folder / "*.jar")))
    if jars:
        conf["spark.jars"] = ",".join(jars)
    else:
        if config.jars_dir:
            raise SparkSetupError(
                f"spark.jars_dir {config.jars_dir!r} holds no jars: run scripts/fetch-jars.sh, "
                "or remove spark.jars_dir to resolve them from Maven Central at start"
            )
        logger.info("no jars in %s: Spark resolves %s from Maven Central", folder, ", ".join(MAVEN_PACKAGES))
        conf["spark.jars.packages"] = ",".join(MAVEN_PACKAGES)
    conf.update(config.conf)
    if _local(config):  # the JVM is started here: its log set up from the first line, its classes mapped
        options = conf.get("spark.driver.extraJavaOptions", "")
        archive = jvm_archive.java_options(extra_jars(conf), folder, options)
        log = f"-Dlog4j2.configurationFile={log4j_file(log_level())}"
        conf["spark.driver.extraJavaOptions"] = " ".join(o for o in (log, archive, options) if o)
    return conf


def extra_jars(conf: Mapping[str, str]) -> list[str]:
    """The extra jars of a session's settings (``spark.jars``: the folder's, or the config's own)."""
    return [jar for jar in conf.get("spark.jars", "").split(",") if jar]


def session_archive(config: SparkConfig) -> Path | None:
    """The JVM class archive a local session of ``config`` maps where it exists
    (:func:`cdc_delta.jvm_archive.archive_path` of its final ``spark.jars``, beside its jars folder)."""
    return jvm_archive.archive_path(extra_jars(session_conf(config)), jars_dir(config))


def _local(config: SparkConfig) -> bool:
    return bool(config.master and config.master.startswith("local"))


def log_level() -> str:
    """The JVM's log level: ``$CDC_DELTA_SPARK_LOG_LEVEL``, else WARN."""
    return os.environ.get("CDC_DELTA_SPARK_LOG_LEVEL", "WARN").upper()


def log4j_file(level: str) -> Path:
    """A log4j2 configuration for a JVM this process starts: every logger at ``level``, the loggers of
    :data:`EXPECTED_WARNINGS` at ERROR when that is WARN, on stderr in the format of cdc_delta's own
    lines. Without it Spark prints its default profile's banner and Hadoop's native-library warning
    before the session can set a level. Written in a folder of this process's own (mode 0700, an
    unpredictable name, removed at exit): a file at a shared, predictable path could be replaced by
    another user of the machine with a configuration of theirs."""
    lines = [
        "status = error",
        f"rootLogger.level = {level}",
        "rootLogger.appenderRef.stderr.ref = stderr",
        "appender.stderr.type = Console",
        "appender.stderr.name = stderr",
        "appender.stderr.target = SYSTEM_ERR",
        "appender.stderr.layout.type = PatternLayout",
        "appender.stderr.layout.pattern = %d{yyyy-MM-dd HH:mm:ss,SSS} %p %c: %m%n%ex",
    ]
    for i, name in enumerate(EXPECTED_WARNINGS if level == "WARN" else ()):
        lines += [f"logger.expected{i}.name = {name}", f"logger.expected{i}.level = error"]
    text = "\n".join(lines) + "\n"
    path = _private_dir() / f"log4j2-{hashlib.sha256(text.encode()).hexdigest()[:12]}.properties"
    if not path.exists():
        path.write_text(text)
    return path


@functools.cache
def _private_dir() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="cdc-delta-"))  # 0700, made by this process only
    atexit.register(shutil.rmtree, folder, True)
    return folder


def build_session(config: SparkConfig, extra: Mapping[str, str] | None = None) -> SparkSession:
    """Build (or join) the SparkSession. Static settings only apply to the first session of a process."""
    builder = SparkSession.builder.appName(config.app_name)
    if _local(config):
        # Local Python workers must run the driver's interpreter (the one cdc_delta is installed in).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        # Everything runs on this host: no warning that the hostname resolves to a loopback address.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if config.master:
        builder = builder.master(config.master)
    options = session_conf(config, extra)
    for key, value in options.items():
        builder = builder.config(key, value)
    try:
        _jvm_apart(config, options)
        spark = builder.getOrCreate()
    except Exception as exc:  # py4j/JVM start-up failures carry no useful type
        raise SparkSetupError(f"could not start Spark ({config.master or 'spark-submit master'}): {exc}") from exc
    level = log_level()
    spark.sparkContext.setLogLevel(level)
    if level == "WARN":
        quiet_expected_warnings(spark)
    return spark


def _jvm_apart(config: SparkConfig, options: Mapping[str, str]) -> None:
    """Start the driver's JVM as PySpark does, but in a session (and process group) of its own, so that a
    SIGTERM sent to this command's whole process group (systemd's default ``KillMode``, a Ctrl-C in a
    shell, ``kill -- -PGID``) reaches this process alone, whose handler lets the running batch finish and
    then stops Spark; sent to the JVM too, it would die first, under the batch. The JVM still ends with
    this process however that ends: it exits when its stdin, a pipe from here, closes (PySpark's own
    contract). Where spark-submit started this process, the JVM is its parent and nothing is started."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    conf = SparkConf().setAppName(config.app_name)
    if config.master:
        conf.setMaster(config.master)
    for key, value in options.items():
        conf.set(key, value)
    SparkContext._ensure_initialized(gateway=launch_gateway(conf, popen_kwargs={"start_new_session": True}))


# Warnings Spark and Delta log in normal operation, every batch or every start: nothing to act on.
EXPECTED_WARNINGS = {
    "org.apache.spark.rdd.MapPartitionsRDD": "Delta's MERGE checkpoints its source locally, every batch",
    "org.apache.spark.sql.execution.streaming.ProcessingTimeExecutor": "a batch longer than the trigger",
    "org.apache.spark.sql.execution.streaming.ResolveWriteToStream": "adaptive execution is off in streaming",
    "org.apache.spark.sql.catalyst.util.SparkStringUtils": "a long plan's text is truncated",
    "org.apache.spark.sql.delta.commands.UpdateCommand": "no file statistics to check an UPDATE's count",
    "org.apache.spark.scheduler.FairSchedulableBuilder": "table workers' scheduler pools are made on first use",
    # A broker that cannot be reached: a warning a second and stack traces per retry; the stream's
    # own watch (cdc_delta.stream.broker_watch) says it in one line instead.
    "org.apache.kafka.clients.NetworkClient": "a broker that cannot be reached, once a second",
    "org.apache.spark.sql.kafka010.KafkaOffsetReaderAdmin": "retries of an unreachable broker, with traces",
    "org.apache.spark.scheduler.DAGScheduler": "a stopped query's job group had no job left to cancel",
    # Commits within a millisecond of each other (merges beside maintenance): Delta adjusts the times.
    "org.apache.spark.sql.delta.DeltaHistoryManager": "a commit's timestamp not after the one before it",
    # A stop interrupts the query's thread; when that thread is setting a checkpoint file's
    # permissions, Hadoop warns with a trace. The batch is run again from the checkpoint on restart.
    "org.apache.hadoop.util.Shell": "a stop that lands while a checkpoint file's permissions are set",
    "org.apache.hadoop.util.NativeCodeLoader": "Hadoop's native library is not installed: Java code is used",
}


def quiet_expected_warnings(spark: SparkSession) -> None:
    """Log only errors from the loggers of :data:`EXPECTED_WARNINGS` (set the environment variable
    CDC_DELTA_SPARK_LOG_LEVEL to another level than WARN to see them)."""
    jvm_loggers_at(spark, EXPECTED_WARNINGS, "ERROR")


def jvm_loggers_at(spark: SparkSession, names: Iterable[str], level: str) -> None:
    """Set the JVM's (log4j's) loggers ``names`` to ``level`` (``ERROR``, ``OFF``, ...)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    at = getattr(jvm.org.apache.logging.log4j.Level, level)
    for name in names:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, at)


@contextlib.contextmanager
def console_quiet(spark: SparkSession) -> Iterator[None]:
    """While in it, what Scala code prints to the console from this thread's JVM thread goes nowhere
    (kept when ``$CDC_DELTA_SPARK_LOG_LEVEL`` is not WARN). Delta's VACUUM prints a line a table,
    "Deleted N files and directories in a total of M directories.", past any log setting; the caller
    reports the count itself. Scala's console stream is a per-thread variable of ``scala.Console``,
    not ``System.out``, hence the reflection."""
    if log_level() != "WARN":
        yield
        return
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    console = jvm.java.lang.Class.forName("scala.Console$")
    field = console.getDeclaredField("outVar")
    field.setAccessible(True)
    stream = field.get(console.getField("MODULE$").get(None))
    before = stream.value()
    getattr(stream, "value_$eq")(jvm.java.io.PrintStream(jvm.java.io.OutputStream.nullOutputStream()))
    try:
        yield
    finally:
        getattr(stream, "value_$eq")(before)


JOB_DESCRIPTION = "spark.job.description"
"""The local property that names a thread's Spark jobs (the UI's jobs page, the event log)."""


def describe_jobs(spark: SparkSession, text: str | None) -> None:
    """The Spark jobs this thread starts from now on carry ``text`` as their description, None to clear
    it. The stream's work comes through py4j callbacks, whose call sites name only py4j: without it, a
    profile cannot tell which step of a batch or which table's merge ran a job."""
    spark.sparkContext.setLocalProperty(JOB_DESCRIPTION, text)  # type: ignore[arg-type]


@contextlib.contextmanager
def jobs_described(spark: SparkSession, text: str) -> Iterator[None]:
    """:func:`describe_jobs` for the jobs of the block, the description before it restored after it."""
    before = spark.sparkContext.getLocalProperty(JOB_DESCRIPTION)
    describe_jobs(spark, text)
    try:
        yield
    finally:
        describe_jobs(spark, before)


@contextlib.contextmanager
def session_confs(spark: SparkSession, confs: Mapping[str, str]) -> Iterator[None]:
    """``confs`` set in the session for the block, each put back as it was (unset where it was) after it.
    Session-wide: every thread of the session sees them meanwhile."""
    saved = {key: spark.conf.get(key, None) for key in confs}
    for key, value in confs.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)
