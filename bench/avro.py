"""Benchmark: Avro envelopes (Confluent wire format, fastavro over Arrow batches) against JSON envelopes
with the Connect schema in every record (the JVM path), on the same change stream (issue 16's figure).

The generator's changes over --tables tables are produced twice to a native broker: as JsonConverter
writes them, and re-encoded as Confluent's AvroConverter writes them through the stand-in registry
(tests/registry.py; the stream reads schemas from it over HTTP as from a real one). Then:
- decode: the batch's decoding and its stats job over all --events records, per format, best of two;
- stream: the stream as a process (`cdc-delta stream --until-caught-up`, batches of --batch events),
  events/s = events / batch seconds with the first batch (table creation, JIT) left out, per format.
``avro_to_json_ratio`` is the stream's Avro events/s over its JSON events/s (target >= 1). Writes
bench/results/avro.json. Not a test: nothing fails on a time.

    python bench/avro.py
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from broker import native_broker
from results_file import write_results
from throughput import (
    BATCH_LINE,
    ROOT,
    SPARK_CONF,
    bench_config,
    kafka_batch,
    source_tables,
    stream,
    timed,
    write_yaml,
)

sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results" / "avro.json"


def produce_both(bootstrap: str, registry: Any, tables: tuple[Any, ...], events: int) -> dict[str, Any]:
    """The same changes under server ``bj`` (JSON) and ``ba`` (Avro); returns the mean record sizes."""
    from cdc_delta.demo.avro_encoding import AvroEncoder
    from cdc_delta.demo.generator import Change, ChangeGenerator, topic_of
    from cdc_delta.demo.producer import ensure_topics, produce

    changes = list(ChangeGenerator(tables, seed=3, server="bj").changes(events))
    encoder = AvroEncoder(registry.register)
    avro = [Change("ba" + c.topic[2:], c.key, encoder.encode("ba" + c.topic[2:], c.value)) for c in changes]
    for server in ("bj", "ba"):
        ensure_topics(bootstrap, [topic_of(t, server) for t in tables], 3)
    produce(bootstrap, changes)
    produce(bootstrap, avro)
    size = {
        "json": sum(len(c.value or b"") for c in changes) / len(changes),
        "avro": sum(len(c.value or b"") for c in avro) / len(avro),
    }
    return {k: round(v) for k, v in size.items()}


def config_for(folder: Path, bootstrap: str, server: str, tables: tuple[Any, ...], registry_url: str) -> dict[str, Any]:
    from cdc_delta.demo.generator import topic_of

    config = bench_config(folder, bootstrap, server, tables)
    # Topics and routes by server: the Avro records' envelopes still name the JSON server.
    for table, source in zip(config["tables"], tables, strict=True):
        table["topics"] = [topic_of(source, server)]
    if server == "ba":
        config["kafka"]["value_format"] = "avro"
        config["schema_registry"] = {"url": registry_url}
    return config


def part_decode(spark: Any, bootstrap: str, folder: Path, tables: tuple[Any, ...], registry_url: str) -> dict[str, Any]:
    from pyspark import StorageLevel

    from cdc_delta.config import parse_config
    from cdc_delta.decode.batch import decoder_for
    from cdc_delta.decode.plan import decode_plan
    from cdc_delta.stream.stats import collect_stats

    out: dict[str, Any] = {}
    for server, name in (("bj", "json"), ("ba", "avro")):
        config = parse_config(config_for(folder, bootstrap, server, tables, registry_url))
        records = kafka_batch(spark, bootstrap, server).persist(StorageLevel.MEMORY_AND_DISK)
        count = records.count()
        decode = decoder_for(config, decode_plan(config))

        def run(decode: Any = decode, records: Any = records) -> None:
            batch = decode(records)
            stats = collect_stats(batch.frame)
            assert stats.by_status["dead"] == 0, stats
            batch.release()

        seconds = min(timed(run) for _ in range(2))
        out[name] = {"events": count, "seconds": round(seconds, 2), "events_per_s": round(count / seconds)}
        records.unpersist()
    out["avro_to_json_decode_ratio"] = round(out["avro"]["events_per_s"] / out["json"]["events_per_s"], 2)
    return out


def part_stream(bootstrap: str, folder: Path, tables: tuple[Any, ...], registry_url: str, batch: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for server, name in (("bj", "json"), ("ba", "avro")):
        config = {**config_for(folder, bootstrap, server, tables, registry_url), "trigger_interval": "10 seconds"}
        config["kafka"]["max_offsets_per_trigger"] = batch
        log = folder / f"{server}.log"
        stream(write_yaml(folder, server, config), log, "--until-caught-up")
        rows = [(int(m.group(1)), float(m.group(2))) for m in map(BATCH_LINE.search, log.read_text().splitlines()) if m]
        steady = rows[1:] or rows
        out[name] = {
            "events": sum(n for n, _ in rows),
            "batch_seconds": [round(s, 1) for _, s in rows],
            "events_per_s": round(sum(n for n, _ in steady) / sum(s for _, s in steady)),
        }
    out["avro_to_json_ratio"] = round(out["avro"]["events_per_s"] / out["json"]["events_per_s"], 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--tables", type=int, default=1)
    parser.add_argument("--batch", type=int, default=50_000, help="max records per stream batch")
    parser.add_argument("--port", type=int, default=19392)
    args = parser.parse_args()
    from tests.registry import StandInRegistry

    figures: dict[str, Any] = {"tables": args.tables}
    from cdc_delta.config import SparkConfig
    from cdc_delta.spark_session import build_session

    with native_broker(args.port, "cdc-avro-bench-") as (folder, bootstrap):
        registry = StandInRegistry()
        tables = source_tables(args.tables, "av")
        figures["record_bytes"] = produce_both(bootstrap, registry, tables, args.events)
        print(json.dumps(figures), flush=True)
        spark = build_session(SparkConfig(master="local[2]", shuffle_partitions=2, conf=SPARK_CONF))
        figures["decode"] = part_decode(spark, bootstrap, folder, tables, registry.url)
        print(json.dumps(figures["decode"]), flush=True)
        spark.stop()
        figures["stream"] = part_stream(bootstrap, folder, tables, registry.url, args.batch)
        print(json.dumps(figures["stream"]), flush=True)
        registry.close()
    write_results(
        RESULTS,
        "avro",
        figures,
        avro_to_json_ratio=figures["stream"]["avro_to_json_ratio"],
        avro_to_json_decode_ratio=figures["decode"]["avro_to_json_decode_ratio"],
    )


if __name__ == "__main__":
    main()
