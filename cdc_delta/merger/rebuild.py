"""Rebuild one table from the changelog, without Kafka: every change the changelog holds for it merged
into a new Delta table beside it (as the merger would: truncates segment by segment, schema changes
landing by landing), which then takes the table's place; the table it replaces is kept beside it for
the operator to delete.

Only while the changelog holds all the table's changes: the retention records how far it may have
deleted each table's (:func:`~cdc_delta.changelog.table.deleted_through`), and a rebuild past that is
refused, naming the way out (reading the table from the source again)."""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from cdc_delta import hadoop_fs
from cdc_delta.changelog.pending import changes, table_summaries
from cdc_delta.changelog.table import changelog_path, deleted_through, landings
from cdc_delta.changelog.table_index import indexed
from cdc_delta.config import AppConfig
from cdc_delta.delta.registry import KnownTable, TableRegistry, registry_path
from cdc_delta.exceptions import CdcDeltaError
from cdc_delta.merger.apply import TableApplier, TableRound
from cdc_delta.merger.run import table_work
from cdc_delta.rows.target import table_state

logger = logging.getLogger(__name__)


class RebuildError(CdcDeltaError):
    """The table cannot be rebuilt from the changelog; nothing was changed."""


@dataclass(frozen=True)
class Rebuilt:
    """What a rebuild did."""

    table: str
    path: str
    through_seq: int
    """The newest landing the rebuilt table holds."""
    changes: int
    rows: int
    replaced: str | None
    """Where the table it replaced was moved (None: there was none)."""
    duration_s: float

    def summary(self) -> str:
        kept = f"; the table it replaced is at {self.replaced} (delete it once satisfied)" if self.replaced else ""
        return (
            f"table {self.table} rebuilt from the changelog: {self.changes} changes through landing "
            f"{self.through_seq}, {self.rows} rows, in {self.duration_s:.1f}s{kept}"
        )


def newest_landing(spark: SparkSession, config: AppConfig) -> int | None:
    """The newest landing in the changelog (None: nothing has landed)."""
    newest = next(iter(landings(spark, config, limit=1000)), None)
    return newest.record.land_seq if newest is not None else None


def rebuild_table(spark: SparkSession, config: AppConfig, name: str) -> Rebuilt:
    """Rebuild table ``name`` from every change the changelog holds for it (raises :class:`RebuildError`
    when it no longer holds them all). Run it with the stream's merges stopped: a merger that kept the
    old table's state would stop the table as replaced under it (`cdc-delta resume-table` then accepts
    the rebuilt one)."""
    started = time.monotonic()
    table = indexed(spark, config).table(name)
    path = config.storage.table_path(table)
    gone = deleted_through(spark, config).get(name, -1)
    if gone >= 0:
        raise RebuildError(
            f"cannot rebuild {name} from the changelog: its retention (changelog.retention_hours "
            f"{config.changelog.retention_hours:g}) may have deleted its changes up to landing {gone}. Read the "
            f"table from the source again instead: cdc-delta resnapshot --table {name} --delete-missing"
        )
    through = newest_landing(spark, config)
    if through is None:
        raise RebuildError(f"cannot rebuild {name}: the changelog at {changelog_path(config)} holds no landing")
    staging = f"{path.rstrip('/')}.rebuilding"
    hadoop_fs.delete(spark, staging)  # what a rebuild that did not finish left
    others = [t for t in config.tables if t.name != name]
    staged = config.model_copy(update={"tables": [table.model_copy(update={"path": staging}), *others]})
    registry = TableRegistry(spark, registry_path(config))
    before = registry.get(name)
    registry.replace(name, path, None)  # the staged table is registered as it is created
    pending = changes(spark, config, {name: (-1, through)})
    frame = pending.frame
    try:
        work = table_work(config.app_id, [name], table_summaries(frame), through)[0]
        if not work.events:
            raise RebuildError(f"cannot rebuild {name}: the changelog holds none of its changes")
        result = TableApplier(spark, staged).apply(spark, TableRound(frame, through), work)
    except BaseException:
        _forget(spark, registry, name, before, staging)
        raise
    finally:
        pending.release()
    if result.error:
        _forget(spark, registry, name, before, staging)
        if result.merged_through is None:
            raise RebuildError(f"cannot rebuild {name}: {result.error}")
        raise RebuildError(
            f"cannot rebuild {name}: its changes after landing {result.merged_through} cannot be merged. "
            f"The rebuilt table was discarded and {name} is as it was; the stream stops it at the same change, "
            f"where the merge said: {result.refused}"
        )
    replaced = _swap(spark, path, staging)
    state = table_state(spark, path)
    assert state.table_id is not None
    registry.replace(name, path, state.table_id)
    if config.live_tables.enabled:
        DeltaTable.forPath(spark, path).generate("symlink_format_manifest")  # its files' paths moved with it
    rows = spark.read.format("delta").load(path).count()
    rebuilt = Rebuilt(name, path, through, work.events, rows, replaced, round(time.monotonic() - started, 2))
    logger.info("%s", rebuilt.summary())
    return rebuilt


def _swap(spark: SparkSession, path: str, staging: str) -> str | None:
    """Put the staged table in the table's place; the table there (if any) is moved beside it."""
    replaced = None
    if hadoop_fs.exists(spark, path):
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        replaced = f"{path.rstrip('/')}.replaced-{stamp}"
        hadoop_fs.rename(spark, path, replaced)
    hadoop_fs.rename(spark, staging, path)
    # Delta keeps each path's log state in the process: the table at the path is another one now.
    spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # type: ignore[union-attr]
    return replaced


def _forget(spark: SparkSession, registry: TableRegistry, name: str, before: KnownTable | None, staging: str) -> None:
    """Undo a rebuild that did not finish: the staged table goes, the registration is as it was."""
    hadoop_fs.delete(spark, staging)
    registry.replace(name, staging, None)
    if before is not None:
        registry.register(name, before.path, before.table_id)
