"""Print bench/results/*.json as the Markdown tables docs/performance.md shows (the README keeps the headlines)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def merge_vs_append(data: dict) -> str:
    lines = [
        f"Measured {data['measured_at']} on {data['cores']} cores (Spark {data['spark']}); rows/s of the whole batch",
        "function vs decode + dedupe + append; `files` = share of target files the MERGE rewrote.",
        "",
        "| target rows | batch rows | workload | append rows/s | MERGE rows/s | ratio | files |",
        "|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in data["results"]:
        lines.append(
            f"| {r['target_rows']:,} | {r['batch_rows']:,} | {r['workload']} | {r['append_rows_per_s']:,} "
            f"| {r['merge_rows_per_s']:,} | {r['ratio_merge_to_append']:.2f} | {r['files_rewritten_fraction']:.1%} |"
        )
    return "\n".join(lines)


def stream_latency(data: dict) -> str:
    return "\n".join(
        [
            f"Measured {data['measured_at']} on {data['cores']} cores, trigger {data['trigger_s']} s:",
            "",
            "| max sustained events/s | steady rate events/s | rows sampled | p50 latency | p99 latency | targets |",
            "|---:|---:|---:|---:|---:|---|",
            f"| {data['max_sustained_events_per_s']:,} | {data['steady_rate_events_per_s']:,} "
            f"| {data['rows_sampled']:,} "
            f"| {data['latency_p50_s']} s | {data['latency_p99_s']} s "
            f"| p50 <= {data['target_p50_s']} s, p99 <= {data['target_p99_s']} s |",
        ]
    )


def snapshot(data: dict) -> str:
    lines = [
        f"Measured {data['measured_at']} on {data['cores']} cores; seconds (nightly and read + write: medians of",
        f"{data['results'][0].get('repeats', 1)} alternating runs), ratio to a plain Parquet read + write of the",
        "same rows in the same run (target <= 1.5):",
        "",
        "| stock rows | 1% changes | nightly | first (from stock) | read + write | ratio | first ratio |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in data["results"]:
        lines.append(
            f"| {r['rows']:,} | {r['changes']:,} | {r['nightly_s']} s | {r['from_stock_s']} s "
            f"| {r['baseline_read_write_s']} s | {r['ratio']:.2f} | {r['from_stock_ratio']:.2f} |"
        )
    return "\n".join(lines)


def maintenance(data: dict) -> str:
    r = data["results"]
    before, after, beside = r["before_optimize"], r["after_optimize"], r["beside_maintenance"]
    steps = r["merge_steps"]
    return "\n".join(
        [
            f"Measured {data['measured_at']} on {data['cores']} cores; {r['target_rows']:,}-row table after "
            f"{r['small_merges']} merges of {r['batch_rows']} new keys; timed batches: {r['batch_rows']} new keys "
            f"+ {r['updates_per_batch']} updates, {before['batches']} before and after OPTIMIZE:",
            "",
            "| files | merge p50 fragmented / compacted | speed-up | file-scan step of the MERGE | speed-up "
            "| full-table aggregate | speed-up | batch p99 without / beside `maintain` | p99 ratio |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
            f"| {r['files_fragmented']} -> {r['files_after_optimize']} | {before['p50_s']} s / {after['p50_s']} s "
            f"| {r['ratio_merge_before_to_after']:.2f} (target >= {r['target_merge_speedup']}) "
            f"| {steps['before']['scan_p50_s']} s / {steps['after']['scan_p50_s']} s "
            f"| {steps['ratio_scan_before_to_after']} "
            f"| {r['aggregate_before_s']} s / {r['aggregate_after_s']} s | {r['ratio_aggregate_before_to_after']:.2f} "
            f"| {before['p99_s']} s / {beside['p99_s']} s ({beside['batches']} batches) "
            f"| {r['ratio_p99_during_to_without']:.2f} (target <= {r['target_p99_ratio']}) |",
        ]
    )


THROUGHPUT_ROWS = (
    ("ingest events/s, 100 tables", "ingest_events_per_s_100_tables", ">= 10,000"),
    ("ingest events/s, 1 table", "ingest_events_per_s_1_table", ">= 20,000"),
    ("ingest, 100 tables / 1 table", "tables_ingest_ratio", ">= 0.5"),
    ("batch time, 1 table: 48 partitions / 1 partition", "partitions_batch_ratio", "<= 1.2"),
    ("batch time: 100 tables x 100 events / 1 table x 10,000", "tables_batch_ratio", "<= 3"),
    ("ingest events/s, 1,000 tables, the ingest alone", "ingest_events_per_s_1000_tables", ">= 5,000"),
    ("ingest / Spark reading and counting the same 200k events", "ingest_to_kafka_read_ratio", ">= 0.3"),
    ("landed (what a live view can show): p50 at half the 100-table rate, 10 s trigger", "landed_p50_s", "<= 15 s"),
    ("landed p99, same", "landed_p99_s", "<= 30 s"),
    ("merged table lag p99, same run, max_delay_seconds 60", "merged_lag_p99_s", "<= 180 s"),
    ("decode alone, JVM path vs the Python UDF, same events", "decode_speedup", ">= 5x"),
    ("nightly snapshot: 100 tables / 1 table of 10k rows", "snapshot_tables_ratio", "<= 5"),
)


def throughput(data: dict) -> str:
    now = data.get("results") or {}
    details = now.get("details", {})
    every = details.get("sustained", {}).get("100_tables_every_batch", {})
    lines = [
        f"Measured {now.get('measured_at', data['measured_at'])[:19]}Z on {data['cores']} cores (parts run on other "
        "days are dated below):",
        "",
        "| figure | now | target |",
        "|---|---:|---|",
    ]
    for label, key, target in THROUGHPUT_ROWS:
        lines.append(f"| {label} | {_figure(now.get(key))} | {target} |")
    if every:
        lines += [
            "",
            f"In the same run, before the two phases (`merge.max_delay_seconds: 0`: every table merged after every "
            f"batch): 100 tables ingest {_figure(every.get('events_per_s'))} events/s; the two phases "
            f"{_figure(now.get('two_phase_speedup_100_tables'))}x that.",
        ]
    merge = details.get("merge")
    if merge:
        lines += [
            "",
            f"One table's MERGE of {merge['batch_rows']} rows into {merge['table_rows']:,} (median of "
            f"{merge['merges']}): {merge['spark_merge_s_median']} s and {merge['spark_merge_jvm_cpu_s_median']} "
            f"CPU-s of the JVM through Delta on Spark (the stream's merge_rows); {merge['delta_rs_merge_s_median']} s "
            f"through delta-rs on the same table, Arrow handover included ({merge['spark_vs_delta_rs']}x).",
        ]
    return "\n".join(lines)


def avro(data: dict) -> str:
    r = data["results"]
    lines = [
        f"Measured {data['measured_at'][:19]}Z on {data['cores']} cores, {r['decode']['json']['events']:,} events of "
        f"{r['tables']} table(s); mean record {r['record_bytes']['json']:,} bytes as JSON (schema included), "
        f"{r['record_bytes']['avro']:,} as Avro:",
        "",
        "| figure | JSON | Avro | Avro / JSON |",
        "|---|---:|---:|---:|",
    ]
    for label, part, key in (
        ("decode + stats, events/s", "decode", "avro_to_json_decode_ratio"),
        ("stream (--until-caught-up), events/s", "stream", "avro_to_json_ratio"),
    ):
        fig = r[part]
        lines.append(f"| {label} | {fig['json']['events_per_s']:,} | {fig['avro']['events_per_s']:,} | {fig[key]} |")
    return "\n".join(lines)


def operations(data: dict) -> str:
    status, manifest = data["results"]["status"], data["results"]["manifest"]
    return "\n".join(
        [
            f"Measured {data['measured_at'][:19]}Z on {data['cores']} cores:",
            "",
            "| figure | measured | baseline (same run) | ratio | target |",
            "|---|---:|---:|---:|---|",
            f"| `cdc-delta status`, {status['tables']} tables (process wall time) | {status['status_s']} s | "
            f"{status['spark_status_s']} s (a Spark session reading the same) | {status['status_speedup']}x faster "
            f"| < 3 s |",
            f"| one batch, {manifest['tables']} tables x {manifest['events'] // manifest['tables']} events, "
            f"live_tables.enabled | {manifest['batch_with_manifests_s']} s | {manifest['batch_s']} s (without) | "
            f"{manifest['manifest_batch_ratio']} ({manifest['manifest_s_per_table']} s per table) | - |",
        ]
    )


def merge_cost(data: dict) -> str:
    lines = [
        f"Measured {data['measured_at']} on {data['cores']} cores; medians of a 100-row guarded MERGE into a",
        "10,000-row table and of a 100-row append; ratios to the project's settings on the first engines:",
        "",
        "| engines | Spark | setting | MERGE | MERGE CPU | ratio | append | append CPU | ratio |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in data["results"]:
        lines.append(
            f"| {r['engine']} | {r['spark']} | {r['setting']} | {r['merge_s']:.2f} s | {r['merge_cpu_s']:.2f} s "
            f"| {r['merge_ratio']:.2f} | {r['append_s']:.2f} s | {r['append_cpu_s']:.2f} s | {r['append_ratio']:.2f} |"
        )
    return "\n".join(lines)


def merge_rounds(data: dict) -> str:
    r = data["results"]
    lines = [
        f"Measured {data['measured_at']} on {data['cores']} cores; rounds merging {data['tables']} tables,",
        f"{data['events_per_round']:,} changes a round; medians of the rounds after the first:",
        "",
        "| merger's sessions | round | JVM CPU | rounds |",
        "|---|---:|---:|---|",
    ]
    for label in ("interpreted", "generated"):
        f = r[label]
        rounds = ", ".join(map(str, f["round_seconds"]))
        lines.append(f"| {label} | {f['median_round_s']} s | {f['median_jvm_cpu_s']} s | {rounds} s |")
    lines += [
        "",
        f"interpreted / generated: round {r['interpreted_to_generated_round_ratio']}, "
        f"CPU {r['interpreted_to_generated_cpu_ratio']}",
    ]
    return "\n".join(lines)


def cold_start(data: dict) -> str:
    r = data["results"]
    lines = [
        f"Measured {data['measured_at'][:16]}Z on {data['cores']} cores (archive {data['archive_mib']} MiB):",
        "",
        "| JVM options | with the archive | without | ratio |",
        "|---|---:|---:|---:|",
    ]
    for key, label in (("tests", "the tests' (`-XX:TieredStopAtLevel=1`)"), ("defaults", "the defaults")):
        f = r[f"{key}_jvm"]
        lines.append(f"| {label} | {f['archive_s']} s | {f['none_s']} s | **{r[f'{key}_jvm_ratio']}** |")
    return "\n".join(lines)


def maintenance_tables(data: dict) -> str:
    lines = [
        f"Measured {data['measured_at'][:16]}Z on {data['cores']} cores, {data['tables']} tables (maintenance"
        " concurrency 2); step seconds summed over the tables:",
        "",
        "| run | wall | per table (median) | compacted / purged / files vacuumed / VACUUMs / checkpoints | steps |",
        "|---|---:|---:|---|---|",
    ]
    for r in data["results"]:
        steps = ", ".join(f"{k} {v}" for k, v in r["step_seconds_summed"].items())
        lines.append(
            f"| {r['run']} | {r['wall_s']} s | {r['per_table_median_s']} s | {r['files_compacted']} / "
            f"{r['rows_purged']} / {r['files_vacuumed']} / {r.get('vacuums', '-')} / {r['checkpoints']} | {steps} |"
        )
    return "\n".join(lines)


def _figure(value: object) -> str:
    if value is None:
        return "-"
    return f"{value:,}" if isinstance(value, int) else str(value)


if __name__ == "__main__":
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "results"
    print(merge_vs_append(json.loads((folder / "merge_vs_append.json").read_text())))
    cost = folder / "merge_cost.json"
    if cost.exists():
        print("\n" + merge_cost(json.loads(cost.read_text())))
    rounds = folder / "merge_rounds.json"
    if rounds.exists():
        print("\n" + merge_rounds(json.loads(rounds.read_text())))
    latency = folder / "stream_latency.json"
    if latency.exists():
        print("\n" + stream_latency(json.loads(latency.read_text())))
    snapshot_results = folder / "snapshot.json"
    if snapshot_results.exists():
        print("\n" + snapshot(json.loads(snapshot_results.read_text())))
    throughput_results = folder / "throughput.json"
    if throughput_results.exists():
        print("\n" + throughput(json.loads(throughput_results.read_text())))
    avro_results = folder / "avro.json"
    if avro_results.exists():
        print("\n" + avro(json.loads(avro_results.read_text())))
    operations_results = folder / "operations.json"
    if operations_results.exists():
        print("\n" + operations(json.loads(operations_results.read_text())))
    maintenance_results = folder / "maintenance.json"
    if maintenance_results.exists():
        print("\n" + maintenance(json.loads(maintenance_results.read_text())))
    tables_results = folder / "maintenance_tables.json"
    if tables_results.exists():
        print("\n" + maintenance_tables(json.loads(tables_results.read_text())))
    cold = folder / "cold_start.json"
    if cold.exists():
        print("\n" + cold_start(json.loads(cold.read_text())))
