"""Fresh views kept in the metastore (``cdc-delta fresh-views``): the merged table overridden by the
changes still pending in the changelog, as SQL text any Spark session with the metastore can read. The
generator is the reference, and the live views of ``cdc-delta sql`` (:mod:`cdc_delta.views.live`) agree
with them column for column where the view's text can type every pending change."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import DataFrame, SparkSession

from cdc_delta.changelog.table import changelog_path
from cdc_delta.config import AppConfig, load_config, parse_config
from cdc_delta.demo.batches import DEMO_TABLES, demo_tables, kafka_frame
from cdc_delta.demo.generator import ChangeGenerator
from cdc_delta.merger.run import Merger
from cdc_delta.rows.as_of import live_rows
from cdc_delta.stream.batch import BatchProcessor
from cdc_delta.views import fresh
from tests.services import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SOURCE = (DEMO_TABLES[0].db, DEMO_TABLES[0].table)
ORDERS = "inventory.orders"


class Source:
    """Generated changes of ``inventory.orders`` landed batch by batch, merged only when asked."""

    def __init__(self, spark: SparkSession, tmp_path: Path, database: str) -> None:
        self.spark = spark
        self.config_path = tmp_path / "cdc.yaml"
        self.config_path.write_text(
            yaml.safe_dump(
                {
                    "app_id": "fresh",
                    "storage": {"root": str(tmp_path / "lake")},
                    "merge": {"max_delay_seconds": 3600, "min_events": 1_000_000},
                    "spark": {"master": "local[1]", "shuffle_partitions": 2, "conf": {"spark.ui.enabled": "false"}},
                    "fresh_views": {"enabled": True, "database": database},
                    "tables": demo_tables(),
                }
            )
        )
        self.config: AppConfig = load_config(self.config_path, env={})
        self.processor = BatchProcessor(self.config)  # lands only
        # Changes of now (source times of the wall clock): a fresh view reads those younger than the
        # tombstone retention only.
        self.generator = ChangeGenerator(DEMO_TABLES[:1], seed=11, live=True)
        self.offsets: Iterator[int] = iter(range(1_000_000))
        self.batch_id = 0

    def land(self, count: int) -> None:
        records = [(c.topic, 0, next(self.offsets), c.key, c.value) for c in self.generator.changes(count)]
        self.processor.process(kafka_frame(self.spark, records), self.batch_id)
        self.batch_id += 1

    def merge(self) -> None:
        Merger(self.spark, self.config).merge_all()

    @property
    def rows(self) -> dict[int, dict[str, Any]]:
        return self.generator.rows[SOURCE]


def business(rows: DataFrame) -> dict[int, tuple[Any, ...]]:
    """id -> (customer, amount, status, order_date, updated_at) of ``rows``."""
    cols = ("customer", "amount", "status", "order_date", "updated_at")
    return {r["id"]: tuple(r[c] for c in cols) for r in rows.collect()}


def expected(rows: dict[int, dict[str, Any]]) -> dict[int, tuple[Any, ...]]:
    cols = ("customer", "amount", "status", "order_date", "updated_at")
    return {k: tuple(r[c] for c in cols) for k, r in rows.items()}


def spark_text(when: dt.datetime) -> str:
    """A timestamp as Spark casts it to a string (no trailing zeros in the fraction, none if zero)."""
    text = when.isoformat(sep=" ")
    return text.rstrip("0").rstrip(".") if "." in text else text


def every_column(rows: DataFrame) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in rows.collect()), key=repr)


def test_a_fresh_view_shows_pending_changes_and_follows_later_landings(spark: Any, tmp_path: Path) -> None:
    source = Source(spark, tmp_path, "fresh_follow")
    source.land(60)
    source.merge()
    merged = dict(source.rows)
    source.land(60)  # inserts, updates, deletes: landed, not merged
    assert source.rows != merged
    raw = spark.read.format("delta").load(changelog_path(source.config)).where("startswith(schema_id, 'x')").count()
    assert raw > 0, "the changes landed as Debezium wrote them: the view's function makes them canonical"

    views = {v.table: v for v in fresh.register(spark, source.config)}
    view = views[ORDERS]
    assert view.view == "fresh_follow.inventory_orders" and view.schemas == 1

    def fresh_rows() -> DataFrame:
        return spark.table(view.view)

    assert business(fresh_rows()) == expected(source.rows)
    table = spark.table(ORDERS_TABLE(source)).where("NOT _cdc_deleted")
    assert business(table) == expected(merged)  # the table itself lags
    # Column for column what cdc-delta sql's live view shows, soft-deleted rows included.
    live = live_rows(spark, source.config, [source.config.table(ORDERS)])[ORDERS]
    assert every_column(spark.table(view.view_all)) == every_column(live)

    source.land(40)  # no registration since: the view reads the changelog as it grows
    assert business(fresh_rows()) == expected(source.rows)
    source.merge()  # the table catches up: the changes the view read are the table's now, and tie
    assert business(fresh_rows()) == expected(source.rows)
    live = live_rows(spark, source.config, [source.config.table(ORDERS)])[ORDERS]
    assert every_column(spark.table(view.view_all)) == every_column(live)


def ORDERS_TABLE(source: Source) -> str:  # noqa: N802
    return f"delta.`{source.config.table_path(ORDERS)}`"


READER = textwrap.dedent(
    """
    import glob, json, sys
    from pyspark.sql import SparkSession

    jars_dir, conf = sys.argv[1], json.loads(sys.argv[2])
    jars = [j for j in sorted(glob.glob(jars_dir + "/*.jar")) if "cdc-delta" not in j]
    builder = (
        SparkSession.builder.master("local[1]")
        .config("spark.jars", ",".join(jars))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        spark.sparkContext._jvm.java.lang.Class.forName("io.cdcdelta.decode.CanonicalImage")
        print("cdc-delta's classes are on this reader's path", file=sys.stderr)
        sys.exit(3)
    except Exception:
        pass
    query = "SELECT id, customer, CAST(amount AS string) AS amount, status, CAST(order_date AS string) AS d, "
    query += "CAST(updated_at AS string) AS t FROM cdc_fresh.inventory_orders"
    for row in spark.sql(query).collect():
        print(json.dumps(row.asDict()))
    spark.stop()
    """
)


def test_a_spark_session_without_cdc_delta_reads_the_fresh_view_through_the_metastore(
    spark: Any, tmp_path: Path
) -> None:
    """Registered by the command, read by a plain Spark session (Delta's jars and the metastore only: not
    cdc_delta, not its jar, which the view's function loads itself): the pending changes are there."""
    from cdc_delta.metastore import metastore_conf
    from cdc_delta.spark_session import jars_dir

    source = Source(spark, tmp_path, "cdc_fresh")
    source.land(50)
    source.merge()
    source.land(50)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CDC_DELTA__")}
    done = subprocess.run(
        [sys.executable, "-m", "cdc_delta.cli", "fresh-views", "--register", "--config", str(source.config_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "inventory.orders: views cdc_fresh.inventory_orders, cdc_fresh.inventory_orders_all" in done.stdout
    source.land(30)  # after the registration: read all the same
    conf = {k: v for k, v in metastore_conf(source.config).items() if k != "spark.driver.extraJavaOptions"}
    read = subprocess.run(
        [sys.executable, "-c", READER, str(jars_dir(source.config.spark).resolve()), json.dumps(conf)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    assert read.returncode == 0, read.stderr[-3000:]
    got = {}
    for line in read.stdout.splitlines():
        row = json.loads(line)
        got[row["id"]] = (row["customer"], decimal.Decimal(row["amount"]), row["status"], row["d"], row["t"])
    want = {
        k: (
            r["customer"],
            r["amount"],
            r["status"],
            r["order_date"].isoformat(),
            spark_text(r["updated_at"]),
        )
        for k, r in source.rows.items()
    }
    assert got == want


def test_a_view_too_long_for_the_embedded_metastore_is_refused_by_name_and_the_others_registered(
    spark: Any, tmp_path: Path
) -> None:
    from cdc_delta.delta.tables import create_if_missing, table_schema

    source = Source(spark, tmp_path, "fresh_wide")
    source.land(10)
    source.merge()
    wide = parse_config(
        {
            **yaml.safe_load(source.config_path.read_text()),
            "tables": [*demo_tables(), {"name": "inventory.wide", "topics": ["w"], "key": ["c0"]}],
        }
    )
    columns = tuple((f"column_number_{i}", "decimal(20,4)") for i in range(400))
    create_if_missing(spark, wide.table_path("inventory.wide"), table_schema((("c0", "bigint"), *columns)))
    views = {v.table: v for v in fresh.register(spark, wide)}
    assert views["inventory.wide"].refused.startswith("its text (")
    assert views["inventory.wide"].refused.endswith(
        "characters) is longer than the embedded Derby metastore keeps (32,700): use a Hive metastore "
        "(snapshot.metastore_uri)"
    )
    assert not spark.catalog.tableExists("fresh_wide.inventory_wide")
    assert views[ORDERS].refused == "" and business(spark.table("fresh_wide.inventory_orders")) == expected(source.rows)
