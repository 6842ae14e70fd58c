"""``cdc-delta jvm-archive``: make the class-data-sharing archive local Spark JVMs start from
(:mod:`cdc_delta.jvm_archive`)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from cdc_delta import jvm_archive
from cdc_delta.config import SparkConfig, load_config
from cdc_delta.exceptions import ConfigError


def cmd_jvm_archive(args: argparse.Namespace) -> int:
    from cdc_delta.spark_session import extra_jars, jars_dir, session_conf

    config = load_config(args.config).spark if args.config else SparkConfig()
    if args.train:
        return _train(config, args.train)
    if not (config.master or "").startswith("local"):
        raise ConfigError(
            f"spark.master is {config.master!r}: the archive serves the JVMs cdc-delta starts itself "
            "(spark.master local[...]); a cluster's JVMs are started by spark-submit"
        )
    elsewhere = jvm_archive.chosen_elsewhere(config.conf.get("spark.driver.extraJavaOptions", ""))
    if elsewhere:
        print(f"jvm-archive: nothing to make: {elsewhere} chooses the JVM's class archive itself")
        return 0
    jars = extra_jars(session_conf(config))
    if not jars:
        raise ConfigError(
            f"no jars in {jars_dir(config)}: run scripts/fetch-jars.sh first (the archive holds their classes)"
        )
    train = [sys.executable, "-m", "cdc_delta.cli", "jvm-archive", "--train"]
    if args.config:
        train += ["--config", args.config]
    made = jvm_archive.make(jars, jars_dir(config), train)
    if not made.made:
        print(f"jvm-archive: up to date: {made.path}")
    else:
        size = made.path.stat().st_size / 2**20
        removed = f"; removed {len(made.removed)} of earlier jars" if made.removed else ""
        print(f"jvm-archive: made {made.path} ({size:.0f} MiB) in {made.seconds:.0f}s{removed}")
    return 0


def _train(config: SparkConfig, archive: str) -> int:
    """A Spark JVM that does what the stream, the merger and the SQL command do, and writes the classes
    it loaded to ``archive`` as it exits: generated changes decoded, landed and merged (the demo's
    batches), read through the live views, a file stream through ``foreachBatch``, the Kafka source
    planned (no broker is needed to load its classes)."""
    from cdc_delta.demo.batches import demo_config, run_demo
    from cdc_delta.metastore import register_delta_tables
    from cdc_delta.spark_session import build_session

    options = config.conf.get("spark.driver.extraJavaOptions", "")
    conf = {**config.conf, "spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={archive} {options}".strip()}
    spark = build_session(config.model_copy(update={"conf": conf}))
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    with tempfile.TemporaryDirectory(prefix="cdc-delta-jvm-archive-") as folder:
        root = Path(folder)
        run_demo(spark, root / "lake", events=300, batches=2)
        register_delta_tables(spark, demo_config(root / "lake"))
        spark.sql("SELECT _cdc_source_db, count(*) FROM shop.orders WHERE NOT _cdc_deleted GROUP BY 1").collect()
        (root / "in").mkdir()
        (root / "in" / "1.json").write_text('{"id": 1, "name": "a"}\n')
        query = (
            spark.readStream.schema("id bigint, name string")
            .json(str(root / "in"))
            .writeStream.option("checkpointLocation", str(root / "checkpoint"))
            .foreachBatch(lambda frame, _: frame.write.format("delta").mode("append").save(str(root / "t")))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        kafka = spark.readStream.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:1")
        kafka.option("subscribe", "cdc-delta-jvm-archive").load().selectExpr("CAST(value AS STRING)").explain()
        print(f"{jvm_archive.PID_LINE}{jvm.java.lang.ProcessHandle.current().pid()}", flush=True)
        spark.stop()
    return 0


def add_commands(sub: Any) -> None:
    """Register this module's command on the top-level subparsers."""
    parser = sub.add_parser(
        "jvm-archive",
        help="make the JVM class archive local Spark starts from (a few seconds faster each start; make setup runs it)",
        description=(
            "Run Spark once through the stream's work and keep the classes its JVM loaded in a class-data-sharing "
            "archive beside the jars (spark.jars_dir); every local Spark JVM cdc-delta starts then maps it, and its "
            "cold start is a quarter to a third shorter. Nothing to do when the archive of these jars and this JDK "
            "is there; made again after they change (until then Spark starts without it). One to two minutes, once."
        ),
    )
    parser.add_argument("--config", help="path to the YAML config whose spark section to use (default: the defaults)")
    parser.add_argument("--train", metavar="ARCHIVE", help=argparse.SUPPRESS)
    parser.set_defaults(func=cmd_jvm_archive)
