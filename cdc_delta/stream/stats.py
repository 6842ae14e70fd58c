"""What a micro-batch holds, learnt in one small Spark job: counts per status, offsets and source times
per partition, events, schema descriptors and truncate markers per table. Nothing else of the batch
comes back to the driver."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from dataclasses import field as dc_field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_delta.changelog.table_index import Origin
from cdc_delta.decode.decoded import field, is_row_event, is_truncate
from cdc_delta.events.envelope import OK, SKIP
from cdc_delta.events.ordering import Seq


@dataclass
class BatchStats:
    rows_in: int = 0
    by_status: dict[str, int] = dc_field(default_factory=lambda: defaultdict(int))
    skips: dict[str, int] = dc_field(default_factory=lambda: defaultdict(int))
    """Skipped records by reason: tombstone, schema change, transaction marker, heartbeat, ..."""
    events_by_table: dict[str, int] = dc_field(default_factory=lambda: defaultdict(int))
    origins: dict[str, set[Origin]] = dc_field(default_factory=lambda: defaultdict(set))
    """Where each table's changes come from: topic, source db and table, and whether they are
    truncates (a DROP TABLE comes on the connector's schema-change topic)."""
    status_by_table: dict[str | None, dict[str, int]] = dc_field(default_factory=lambda: defaultdict(dict))
    """Records per routed table (None: not routed to one) and status (ok, dead, skip)."""
    offsets: dict[str, dict[str, int]] = dc_field(default_factory=lambda: defaultdict(dict))
    max_ts_by_table: dict[str, int] = dc_field(default_factory=dict)
    max_ts_by_partition: dict[str, dict[str, int]] = dc_field(default_factory=lambda: defaultdict(dict))
    descriptors: dict[str, dict[str, Seq]] = dc_field(default_factory=lambda: defaultdict(dict))
    """Per table, its row events' distinct ``schema_json`` (or, for images landed as Debezium wrote them,
    ``schema_ref``) and the earliest event of each."""
    truncates: dict[str, list[tuple[str | None, str | None, Seq]]] = dc_field(default_factory=lambda: defaultdict(list))
    key_samples: dict[tuple[str, str], set[bytes | None]] = dc_field(default_factory=lambda: defaultdict(set))
    """Per (table, topic), Kafka keys of its row events (where asked for, :func:`collect_stats`): of each
    partition and column descriptor, the first record's and the last's."""

    @property
    def max_source_ts_ms(self) -> int | None:
        return max(self.max_ts_by_table.values(), default=None)


def collect_stats(decoded: DataFrame, key_samples: bool = False) -> BatchStats:
    """Counts, offsets, schema descriptors and truncate markers of a batch, in one small Spark job; and
    samples of the record keys (``key_samples``), where a table's key is read from them."""
    sampled = [F.min_by("key", "offset"), F.max_by("key", "offset")] if key_samples else [F.lit(None)] * 2
    truncate = F.when(is_truncate(), F.struct(field("source_db"), field("source_table"), field("seq")))
    rows = (
        decoded.groupBy(
            "topic",
            "partition",
            field("status").alias("status"),
            field("table").alias("table"),
            F.when(field("status") == SKIP, field("reason")).alias("skip_reason"),
            F.when(is_row_event(), F.coalesce(field("schema_json"), field("schema_ref"))).alias("descriptor"),
            field("source_db").alias("source_db"),
            field("source_table").alias("source_table"),
            is_truncate().alias("truncate"),
        )
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.max("offset").alias("max_offset"),
            F.max(field("source_ts_ms")).alias("max_ts"),
            F.min(field("seq")).alias("min_seq"),
            F.collect_set(truncate).alias("truncates"),
            sampled[0].alias("first_key"),
            sampled[1].alias("last_key"),
        )
        .collect()
    )
    stats = BatchStats()
    for r in rows:
        stats.rows_in += r["n"]
        stats.by_status[r["status"]] += r["n"]
        counts = stats.status_by_table[r["table"]]
        counts[r["status"]] = counts.get(r["status"], 0) + r["n"]
        if r["skip_reason"] is not None:
            stats.skips[r["skip_reason"]] += r["n"]
        partition = str(r["partition"])
        stats.offsets[r["topic"]][partition] = max(stats.offsets[r["topic"]].get(partition, -1), r["max_offset"])
        if r["max_ts"] is not None:
            seen = stats.max_ts_by_partition[r["topic"]]
            seen[partition] = max(seen.get(partition, 0), r["max_ts"])
        if r["status"] == OK and r["table"] is not None:
            table = r["table"]
            stats.events_by_table[table] += r["n"]
            stats.origins[table].add(Origin(r["topic"], r["source_db"], r["source_table"], r["truncate"]))
            if r["descriptor"] is not None:
                if key_samples:
                    stats.key_samples[(table, r["topic"])] |= {_bytes(r["first_key"]), _bytes(r["last_key"])}
                earliest, known = Seq(*r["min_seq"]), stats.descriptors[table]
                known[r["descriptor"]] = min(known.get(r["descriptor"], earliest), earliest)
            stats.truncates[table] += [(t[0], t[1], Seq(*t[2])) for t in r["truncates"]]
            if r["max_ts"] is not None:
                stats.max_ts_by_table[table] = max(stats.max_ts_by_table.get(table, 0), r["max_ts"])
    return stats


def _bytes(key: bytearray | None) -> bytes | None:
    return None if key is None else bytes(key)
