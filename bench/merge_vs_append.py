"""Benchmark: the guarded MERGE against a plain Delta append of the same rows, in the same run.

For each target size and batch size, three workloads go through the whole batch function
(decode -> type -> dedupe -> MERGE, as the stream runs it) and, as the baseline, through
decode -> type -> dedupe -> plain append to an empty table:
  insert  - new keys only;
  upsert  - updates of existing keys in one contiguous key range (touching few files);
  delete  - deletes of existing keys in one contiguous key range.
Ratio = MERGE rows/s divided by append rows/s (1.0 = as fast as an append). Results go to
bench/results/merge_vs_append.json with the machine's core count. Not a test: nothing here fails
on a time.

    python bench/merge_vs_append.py                       # full matrix (long on 2 cores)
    python bench/merge_vs_append.py --targets 1000000 --batches 10000 100000
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from results_file import write_results

from cdc_delta import columns as C
from cdc_delta.config import AppConfig, SparkConfig, parse_config
from cdc_delta.decode.batch import decode_batch
from cdc_delta.decode.decoded import is_row_event
from cdc_delta.decode.plan import decode_plan
from cdc_delta.merger import Merger
from cdc_delta.merger.with_stream import MergeAfterLandings
from cdc_delta.rows.dedupe import latest_per_key
from cdc_delta.rows.typed_rows import typed_rows
from cdc_delta.spark_session import build_session
from cdc_delta.stream.batch import BatchProcessor

TOPIC = "bench.shop.orders"
COLUMNS = {
    "customer": "string",
    "amount": "decimal(10,2)",
    "status": "string",
    "order_date": "date",
    "updated_at": "timestamp",
}
RESULTS = Path(__file__).parent / "results" / "merge_vs_append.json"


def bench_config(root: str) -> AppConfig:
    return parse_config(
        {
            "app_id": "bench",
            "storage": {"root": root},
            "merge": {"max_delay_seconds": 0},
            "tables": [
                {"name": "shop.orders", "topics": [TOPIC], "key": ["id"], "columns": {"id": "bigint", **COLUMNS}}
            ],
        }
    )


def write_target(spark: SparkSession, path: str, rows: int, files: int) -> None:
    """A target of ``rows`` live rows, clustered by id into ``files`` files, as the merge writes them."""
    seq = F.struct(
        F.lit(1).alias("phase"),
        F.lit(0).cast("bigint").alias("gtid"),
        F.lit(1).cast("bigint").alias("file"),
        F.col("id").alias("pos"),
        F.lit(0).alias("row"),
        F.lit(0).cast("bigint").alias("ts_ms"),
        F.lit(0).alias("partition"),
        F.col("id").alias("offset"),
    )
    df = spark.range(rows).select(
        F.col("id"),
        F.concat(F.lit("customer-"), (F.col("id") % 1000).cast("string")).alias("customer"),
        ((F.col("id") % 100000) / 100).cast("decimal(10,2)").alias("amount"),
        F.lit("new").alias("status"),
        F.date_add(F.lit(dt.date(2026, 1, 1)), (F.col("id") % 365).cast("int")).alias("order_date"),
        F.timestamp_micros(F.lit(1_767_225_600_000_000) + F.col("id")).alias("updated_at"),
        F.lit("c").alias(C.OP),
        F.lit(False).alias(C.DELETED),
        seq.alias(C.SEQ),
        F.timestamp_millis(F.lit(1_767_225_600_000)).alias(C.SOURCE_TS),
        F.current_timestamp().alias(C.INGESTED_AT),
        F.lit("shop").alias(C.SOURCE_DB),
        F.lit("orders").alias(C.SOURCE_TABLE),
        F.lit(TOPIC).alias(C.TOPIC),
        F.lit(0).alias(C.PARTITION),
        F.col("id").alias(C.OFFSET),
    )
    df.repartitionByRange(files, "id").sortWithinPartitions("id").write.format("delta").save(path)


def kafka_batch(spark: SparkSession, op: str, first_id: int, count: int, pos_base: int) -> DataFrame:
    """``count`` schemaless Debezium envelopes made in Spark (not on the driver), ids from ``first_id``."""
    return kafka_records(spark.range(first_id, first_id + count, numPartitions=4), op, pos_base)


def kafka_records(ids: DataFrame, op: str, pos_base: int) -> DataFrame:
    """One schemaless Debezium envelope of operation ``op`` per row of ``ids`` (a bigint column ``id``),
    shaped like Spark's Kafka source output."""
    image = F.struct(
        F.col("id"),
        F.concat(F.lit("updated-"), (F.col("id") % 777).cast("string")).alias("customer"),
        ((F.col("id") % 50000) / 100).cast("decimal(10,2)").cast("string").alias("amount"),
        F.lit("paid").alias("status"),
        F.lit("2026-02-01").alias("order_date"),
        F.lit("2026-02-01T00:00:00Z").alias("updated_at"),
    )
    source = F.struct(
        F.lit("shop").alias("db"),
        F.lit("orders").alias("table"),
        F.lit("mysql-bin.000002").alias("file"),
        (F.lit(pos_base) + F.col("id")).alias("pos"),
        F.lit(0).alias("row"),
        F.lit(1_769_904_000_000).alias("ts_ms"),
    )
    absent = F.lit(None).cast("string")  # to_json leaves null fields out, as a schemaless envelope may
    before, after = (image, absent) if op == "d" else (absent, image)
    envelope = F.struct(
        before.alias("before"),
        after.alias("after"),
        source.alias("source"),
        F.lit(op).alias("op"),
        F.lit(1_769_904_000_005).alias("ts_ms"),
    )
    return ids.select(
        F.lit(TOPIC).alias("topic"),
        (F.col("id") % 4).cast("int").alias("partition"),
        F.col("id").alias("offset"),
        F.current_timestamp().alias("timestamp"),
        F.col("id").cast("string").cast("binary").alias("key"),
        F.to_json(envelope).cast("binary").alias("value"),
    ).localCheckpoint()


def append_baseline(spark: SparkSession, config: AppConfig, batch: DataFrame, path: str) -> float:
    """Seconds for decode + type + dedupe + plain Delta append of the same batch."""
    business = [("id", "bigint"), *COLUMNS.items()]
    started = time.perf_counter()
    decoding = decode_batch(batch, decode_plan(config))
    decoded = decoding.frame.where(is_row_event())
    rows = latest_per_key(typed_rows(decoded, business, dt.datetime.now(dt.timezone.utc)), ["id"])
    rows.write.format("delta").mode("append").save(path)
    decoding.release()
    return time.perf_counter() - started


def run_case(spark: SparkSession, root: str, target_rows: int, batch_rows: int, files: int) -> list[dict]:
    config = bench_config(root)
    target = config.storage.table_path(config.tables[0])
    write_target(spark, target, target_rows, files)
    processor = BatchProcessor(config, listener=MergeAfterLandings(Merger(spark, config)))
    # Warm-up: the stream is long-running, so measure steady state (JIT, table state read once).
    processor.process(kafka_batch(spark, "c", target_rows + 10**8, 100, pos_base=1), 0)
    append_baseline(spark, config, kafka_batch(spark, "c", 0, 100, pos_base=1), os.path.join(root, "_append_warmup"))
    workloads = [("insert", "c", target_rows + 1), ("upsert", "u", target_rows // 3), ("delete", "d", target_rows // 2)]
    out = []
    for batch_id, (name, op, first) in enumerate(workloads, start=1):
        batch = kafka_batch(spark, op, first, min(batch_rows, target_rows), pos_base=10**9 * (batch_id + 1))
        scratch = os.path.join(root, f"_append_{name}")
        append_s = append_baseline(spark, config, batch, scratch)
        started = time.perf_counter()
        result = processor.process(batch, batch_id)
        merge_s = time.perf_counter() - started
        m = result.merge.tables[0].merge if result.merge and result.merge.tables else None
        metrics = DeltaTable.forPath(spark, target).history(1).first()["operationMetrics"]
        out.append(
            {
                "workload": name,
                "target_rows": target_rows,
                "batch_rows": batch_rows,
                "target_files": files,
                "append_s": round(append_s, 2),
                "merge_s": round(merge_s, 2),
                "append_rows_per_s": round(batch_rows / append_s),
                "merge_rows_per_s": round(batch_rows / merge_s),
                "ratio_merge_to_append": round(append_s / merge_s, 3),
                "inserted": m.inserted if m else None,
                "updated": m.updated if m else None,
                "files_rewritten_fraction": round(int(metrics.get("numTargetFilesRemoved", 0)) / files, 3),
            }
        )
        print(json.dumps(out[-1]), flush=True)
        shutil.rmtree(scratch, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--batches", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--rows-per-file", type=int, default=50_000, help="target clustering (default 50k)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    spark = build_session(
        SparkConfig(
            master="local[2]",
            shuffle_partitions=4,
            app_name="bench-merge",
            conf={"spark.driver.memory": "8g", "spark.ui.enabled": "false"},
        )
    )
    results = []
    for target in args.targets:
        for batch in args.batches:
            root = tempfile.mkdtemp(prefix="cdc-bench-")
            try:
                results += run_case(spark, root, target, batch, max(1, target // args.rows_per_file))
            finally:
                shutil.rmtree(root, ignore_errors=True)
    write_results(args.out, "merge_vs_append", results, spark=spark.version)


if __name__ == "__main__":
    main()
