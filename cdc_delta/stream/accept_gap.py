"""Moving the stream past a gap in Kafka, explicitly and on the record (``cdc-delta accept-gap``).

With the stream stopped (the command holds the stream's lease, :mod:`cdc_delta.lease`): the gaps are
found where the stream would read next (its checkpoint's position, else its consumer group's), recorded
in the repair log (:mod:`cdc_delta.delta.repair_log`: the offsets lost, the tables they fed, when), the
consumer group is set to where the stream stood on every other partition and to the first offset Kafka
holds on a gapped one, and the checkpoint is moved aside, so that the next start takes the group's
offsets under a new epoch (:mod:`.checkpoint`). Nothing but the recorded ranges is skipped; the tables
they fed need a re-snapshot, which ``status`` shows until one is recorded."""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from pyspark.sql import SparkSession

from cdc_delta import hadoop_fs
from cdc_delta.changelog.table_index import discovered, tables_of_topics
from cdc_delta.config import AppConfig
from cdc_delta.delta import repair_log
from cdc_delta.kafka.client import brokers
from cdc_delta.kafka.gaps import Gap, KafkaGap, gaps_at
from cdc_delta.kafka.offsets import commit_group_offsets, partition_lag
from cdc_delta.stream.checkpoint import checkpoint_location, read_checkpoint

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AcceptedGap:
    gaps: list[Gap]
    tables: list[str]
    """The tables the lost records fed: a re-snapshot of each is needed."""
    checkpoint_moved_to: str | None


def accept_gap(spark: SparkSession, config: AppConfig) -> AcceptedGap | None:
    """Move past the gaps where the stream would read next; None where there is none. Run holding the
    stream's lease (``cdc-delta accept-gap`` takes it): a running stream holds the checkpoint this moves
    aside."""
    kafka = config.kafka
    lags = partition_lag(brokers(kafka), config.app_id, list(kafka.topics), kafka.topic_pattern)
    location = checkpoint_location(config)
    checkpoint = read_checkpoint(spark, location)
    if checkpoint.batch is None or checkpoint.committed is None:
        positions = {(g.topic, g.partition): g.committed for g in lags if g.committed is not None}
    else:
        positions = {(t, int(p)): o for t, ps in checkpoint.resume.items() for p, o in ps.items()}
    gaps = gaps_at(lags, positions)
    if not gaps:
        return None
    fed = tables_of_topics(config, discovered(spark, config), sorted({g.topic for g in gaps}))
    now = dt.datetime.now(dt.timezone.utc)
    entries = [
        repair_log.Entry(repair_log.GAP, now, table, g.topic, g.partition, g.first_lost, g.first_kept)
        for g in gaps
        for table in fed.get(g.topic) or [None]  # type: ignore[list-item]
    ]
    repair_log.record(spark, config, entries)
    # Every partition's group offset: where the stream stood (what it read is never read twice: harmless if
    # it were), and the first offset Kafka holds past a gap. Committed as "the last offset processed".
    start = {**{(g.topic, g.partition): g.committed for g in lags if g.committed is not None}, **positions}
    start |= {(g.topic, g.partition): g.first_kept for g in gaps}
    offsets: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in start.items():
        if offset is not None and offset > 0:
            offsets.setdefault(topic, {})[str(partition)] = offset - 1
    if not commit_group_offsets(brokers(kafka), config.app_id, offsets):
        raise KafkaGap(
            f"could not set consumer group {config.app_id}'s offsets past the gap (the warning above says why): "
            "the checkpoint was not moved; run accept-gap again"
        )
    moved = None
    if checkpoint.batch is not None:
        moved = f"{location}.gap-{now:%Y%m%dT%H%M%SZ}"
        hadoop_fs.rename(spark, location, moved)
    tables = sorted({t for ts in fed.values() for t in ts})
    logger.info("accepted the gap: %s", "; ".join(g.range() for g in gaps))
    return AcceptedGap(gaps, tables, moved)
