"""The stream's checkpoint, checked at start against what the lake and Kafka recorded, so that a lost,
replaced or older checkpoint loses nothing.

Landings are idempotent per batch id (a batch the newest landing holds lands nothing), as are the dead
letters' appends (a Delta transaction id, the batch id its version); a new checkpoint starts batch ids at
0 again, and a copy restored from a backup repeats ids already used, so those batches would be skipped as
done. Each checkpoint therefore carries an *epoch* (a file of cdc-delta's beside Spark's,
:data:`EPOCH_FILE`), recorded with every landing and part of those transaction ids: batches of a new
epoch are never mistaken for those of an old one, and re-applying old events is harmless (the ordering
guard). At start (:func:`prepare_start`):

- no checkpoint, and no stream has written the lake: a first start, from ``kafka.starting_offsets``;
- no checkpoint, but a stream has written the lake (the checkpoint was lost or moved): a new epoch,
  resuming from the consumer group's committed offsets (committed after every batch; earliest where
  none);
- a checkpoint behind the consumer group (restored from an older copy): a new epoch, so that its
  batches are applied again rather than skipped;
- a checkpoint with a batch done but a lake no stream has written: refused (the tables were deleted;
  the stream would re-create them holding only later changes);
- a checkpoint Spark cannot read: refused, naming the file and the recovery;
- a position (the checkpoint's, or the consumer group's where the checkpoint is new) below the earliest
  offset Kafka still holds: records were deleted before the stream read them, refused with the ranges
  and the tables they feed (:mod:`cdc_delta.kafka.gaps`), until the gap is accepted.

Checkpoints from before epochs have none: their epoch is the empty one, whose transaction ids are the
ones those stream commits used.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import uuid
from dataclasses import dataclass, field

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from cdc_delta import hadoop_fs
from cdc_delta.changelog.table import changelog_path
from cdc_delta.changelog.table_index import discovered, tables_of_topics
from cdc_delta.config import AppConfig
from cdc_delta.delta.registry import registry_path
from cdc_delta.exceptions import CheckpointMismatch, KafkaUnavailable, one_line
from cdc_delta.kafka.applied import Partition
from cdc_delta.kafka.client import brokers
from cdc_delta.kafka.gaps import KafkaGap, describe, gaps_at
from cdc_delta.kafka.offsets import PartitionLag, partition_lag

logger = logging.getLogger(__name__)

EPOCH_FILE = "cdc_delta_epoch.json"


def checkpoint_location(config: AppConfig) -> str:
    """The stream's checkpoint folder: ``<storage.checkpoint_root>/<app_id>``."""
    root = config.storage.checkpoint_root or f"{config.storage.root.rstrip('/')}/_cdc_checkpoints"
    return f"{root.rstrip('/')}/{config.app_id}"


@dataclass(frozen=True)
class Checkpoint:
    """What a Spark checkpoint folder holds, as far as the start needs it."""

    location: str
    batch: int | None
    """The latest batch planned (its offsets written); None: the checkpoint is new."""
    committed: int | None
    """The latest batch done (Spark's commit written); None: none yet."""
    offsets: dict[str, dict[str, int]]
    """The end offsets (exclusive) of that batch, per topic and partition."""
    epoch: str | None
    """cdc-delta's epoch of this checkpoint; None: no epoch file (new, or from before epochs)."""
    resume: dict[str, dict[str, int]] = field(default_factory=dict)
    """Where Spark reads next: the end offsets of the latest batch done."""


def _corrupt(location: str, what: str) -> CheckpointMismatch:
    return CheckpointMismatch(
        f"checkpoint {location} is corrupt ({what}): Spark cannot resume from it. Move it aside "
        f"(mv {location} {location}.corrupt) and start the stream again: it resumes from the consumer "
        "group's committed offsets, and what it re-applies is harmless (the ordering guard)"
    )


def _read(spark: SparkSession, location: str, name: str) -> str | None:
    try:
        return hadoop_fs.read_text(spark, f"{location}/{name}")
    except Exception as exc:  # noqa: BLE001 (a file that cannot be read, say by its checksum, is corrupt)
        raise _corrupt(location, f"{name} cannot be read: {one_line(exc)}") from None


def read_checkpoint(spark: SparkSession, location: str) -> Checkpoint:
    """The checkpoint at ``location``; :class:`CheckpointMismatch` when a file of it cannot be read."""
    names = hadoop_fs.list_names(spark, f"{location}/offsets")
    batches = sorted(int(n) for n in names if n.isdigit())
    epoch = None
    text = _read(spark, location, EPOCH_FILE)
    if text is not None:
        try:
            epoch = str(json.loads(text)["epoch"])
        except (ValueError, KeyError, TypeError) as exc:
            raise _corrupt(location, f"{EPOCH_FILE}: {exc}") from None
    done = [int(n) for n in hadoop_fs.list_names(spark, f"{location}/commits") if n.isdigit()]
    committed = max(done) if done else None
    if not batches:
        return Checkpoint(location, None, None, {}, epoch)
    latest = batches[-1]
    text = _read(spark, location, f"offsets/{latest}") or ""
    lines = text.splitlines()
    try:
        if len(lines) < 3 or not lines[0].startswith("v"):
            raise ValueError(f"{len(lines)} lines, expected a version, the batch metadata and the source offsets")
        offsets = json.loads(lines[2])
        parsed = {t: {str(p): int(o) for p, o in ps.items()} for t, ps in offsets.items()}
    except (ValueError, AttributeError, TypeError) as exc:
        raise _corrupt(location, f"offsets/{latest}: {exc}") from None
    resume = parsed if committed == latest else _batch_offsets(spark, location, committed)
    return Checkpoint(location, latest, committed, parsed, epoch, resume)


def _batch_offsets(spark: SparkSession, location: str, batch: int | None) -> dict[str, dict[str, int]]:
    """The end offsets of ``batch`` (none where there is none, or its file cannot be read as offsets)."""
    if batch is None:
        return {}
    lines = (_read(spark, location, f"offsets/{batch}") or "").splitlines()
    try:
        return {t: {str(p): int(o) for p, o in ps.items()} for t, ps in json.loads(lines[2]).items()}
    except (IndexError, ValueError, AttributeError, TypeError):
        return {}


def write_epoch(spark: SparkSession, location: str, epoch: str) -> None:
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    hadoop_fs.write_text(spark, f"{location}/{EPOCH_FILE}", json.dumps({"epoch": epoch, "since": now}) + "\n")


@dataclass(frozen=True)
class StreamStart:
    """How the stream starts: its epoch, and where it reads from where its checkpoint is new."""

    epoch: str
    starting_offsets: str | None = None
    """Spark's ``startingOffsets`` JSON where the stream resumes from the consumer group; None: the
    checkpoint's offsets, or ``kafka.starting_offsets`` for a first start."""
    note: str | None = None
    """One line for the log where the start is not the usual one."""


def _some(names: list[str], shown: int = 3) -> str:
    names = sorted(names)
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def _lake_written(spark: SparkSession, config: AppConfig) -> bool:
    """Whether a stream has written this lake: its changelog, table registry or dead letters exist, or a
    configured table's path holds a Delta table (a lake from before the registry)."""
    if hadoop_fs.exists(spark, registry_path(config)) or DeltaTable.isDeltaTable(spark, config.storage.dead_letters):
        return True
    if DeltaTable.isDeltaTable(spark, changelog_path(config)):
        return True
    return any(DeltaTable.isDeltaTable(spark, config.storage.table_path(t)) for t in config.listed_tables)


def prepare_start(spark: SparkSession, config: AppConfig) -> StreamStart:
    """Check the checkpoint against the lake and the consumer group; write the epoch it runs with.
    :class:`CheckpointMismatch` where the stream must not start (a corrupt checkpoint, deleted tables)."""
    location = checkpoint_location(config)
    checkpoint = read_checkpoint(spark, location)
    if checkpoint.batch is None:
        start = _new_checkpoint(spark, config, location)
    else:
        start = _existing_checkpoint(spark, config, checkpoint)
    if start.epoch != checkpoint.epoch:
        write_epoch(spark, location, start.epoch)
    if start.note:
        logger.warning("%s", start.note)
    return start


def _new_epoch() -> str:
    return uuid.uuid4().hex[:12]


def _group_lags(config: AppConfig) -> list[PartitionLag] | None:
    """Per subscribed topic partition, the consumer group's committed offset and what Kafka holds; None
    where the group cannot be read (the brokers' security set in ``kafka.options``, which cdc-delta's own
    clients cannot follow: :attr:`~cdc_delta.config.KafkaConfig.raw_security`)."""
    kafka = config.kafka
    if kafka.raw_security:
        return None
    try:
        return partition_lag(brokers(kafka), config.app_id, list(kafka.topics), kafka.topic_pattern)
    except KafkaUnavailable as exc:
        logger.warning(
            "the consumer group's offsets cannot be read, the checkpoint is not checked against them: %s", exc
        )
        return None


def _group_offsets(lags: list[PartitionLag]) -> dict[str, dict[str, int | None]]:
    found: dict[str, dict[str, int | None]] = {}
    for lag in lags:
        found.setdefault(lag.topic, {})[str(lag.partition)] = lag.committed
    return found


def _refuse_gaps(
    spark: SparkSession, config: AppConfig, lags: list[PartitionLag], positions: dict[Partition, int]
) -> None:
    """:class:`KafkaGap` where the stream would read below what Kafka holds."""
    gaps = gaps_at(lags, positions)
    if gaps:
        tables = tables_of_topics(config, discovered(spark, config), sorted({g.topic for g in gaps}))
        raise KafkaGap(describe(gaps, tables))


def _new_checkpoint(spark: SparkSession, config: AppConfig, location: str) -> StreamStart:
    if not _lake_written(spark, config):
        return StreamStart(_new_epoch())
    lags = _group_lags(config) or []
    _refuse_gaps(spark, config, lags, {(g.topic, g.partition): g.committed for g in lags if g.committed is not None})
    group = _group_offsets(lags)
    known = sum(o is not None for ps in group.values() for o in ps.values())
    # Spark wants every partition named: -2 is the earliest offset.
    offsets = {t: {p: (o if o is not None else -2) for p, o in ps.items()} for t, ps in group.items()}
    where = (
        f"consumer group {config.app_id}'s committed offsets ({known} partitions; earliest for the others)"
        if known
        else f"the earliest offsets (consumer group {config.app_id} holds none)"
    )
    note = (
        f"checkpoint {location} is new but a stream has written the lake at {config.storage.root} (the "
        f"checkpoint was lost or moved): resuming from {where}, under a new epoch, not from "
        "kafka.starting_offsets; changes applied again are harmless (the ordering guard)"
    )
    return StreamStart(_new_epoch(), json.dumps(offsets, sort_keys=True) if offsets else "earliest", note)


def _existing_checkpoint(spark: SparkSession, config: AppConfig, checkpoint: Checkpoint) -> StreamStart:
    epoch = checkpoint.epoch if checkpoint.epoch is not None else ""  # "": from before epochs
    if checkpoint.committed is not None and not _lake_written(spark, config):
        raise CheckpointMismatch(
            f"checkpoint {checkpoint.location} has read up to batch {checkpoint.committed}, but the lake at "
            f"{config.storage.root} holds none of this stream's tables: they were deleted, or storage.root "
            "changed. Started now, the stream would re-create them holding only later changes. If storage.root "
            f"is wrong, correct it; to rebuild the tables from Kafka, move the checkpoint aside (mv "
            f"{checkpoint.location} {checkpoint.location}.old) and start again (from kafka.starting_offsets)"
        )
    lags = _group_lags(config) or []
    resume = {(t, int(p)): o for t, ps in checkpoint.resume.items() for p, o in ps.items()}
    if checkpoint.committed is None:  # no batch done: Spark's first one starts where the group stood
        resume = {(g.topic, g.partition): g.committed for g in lags if g.committed is not None}
    _refuse_gaps(spark, config, lags, resume)
    group = _group_offsets(lags)
    ahead = [
        f"{t}-{p}"
        for t, ps in group.items()
        for p, committed in ps.items()
        if committed is not None and p in checkpoint.offsets.get(t, {}) and committed > checkpoint.offsets[t][p]
    ]
    if not ahead:
        return StreamStart(epoch)
    note = (
        f"checkpoint {checkpoint.location} is older than what the stream applied (consumer group "
        f"{config.app_id} is ahead of it on {len(ahead)} partitions: {_some(ahead)}): it was "
        "restored from a copy; its batches are applied again under a new epoch rather than skipped as done "
        "(harmless: the ordering guard)"
    )
    return StreamStart(_new_epoch(), None, note)
