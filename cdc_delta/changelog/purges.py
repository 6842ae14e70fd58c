"""Purges found where a batch lands (tables with ``archival_deletes``): a source transaction that deletes
at least ``min_rows`` rows of a table. Its deletes land with op ``a`` (archived: :mod:`cdc_delta.rows.archival`).

One transaction is one MariaDB GTID (``seq.gtid``, within its binlog file and its topic: the source table
and the connector that read it). A purge lands over several
batches where it is large, so its deletes are counted over the changelog too (distinct positions: a
record landed twice counts once); where a purge is found only once some of its deletes have landed as
deletes, those land again in this landing with op ``a`` and their own ordering key, which archives them
wherever they are read (:func:`~cdc_delta.rows.archival.replaces`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdc_delta.changelog.table import LAND_SEQ, TABLE, changelog_path
from cdc_delta.columns import ARCHIVE
from cdc_delta.config import AppConfig
from cdc_delta.decode.decoded import field, is_row_event

logger = logging.getLogger(__name__)

_SEP = "\u0000"


def _key(table: Column, seq: Column) -> Column:
    """A transaction's key in a table: (table, topic, binlog file, GTID sequence). The topic names the source
    table and its connector (shards on other servers share file numbers and GTID sequences)."""
    file, gtid = seq.getField("file").cast("string"), seq.getField("gtid").cast("string")
    return F.concat_ws(_SEP, table, F.col("topic"), file, gtid)


def _landed(rows: DataFrame, keys: Iterable[str]) -> DataFrame:
    """The changelog ``rows`` of the transactions ``keys``: filtered first on the raw fields, whose file
    statistics let Delta skip the files of other tables, binlog files and GTID ranges, then on the key."""
    parts = [k.split(_SEP) for k in keys]
    gtids = [int(p[3]) for p in parts]
    near = (
        F.col(TABLE).isin(sorted({p[0] for p in parts}))
        & F.col("topic").isin(sorted({p[1] for p in parts}))
        & F.col("seq.file").isin(sorted({int(p[2]) for p in parts}))
        & F.col("seq.gtid").between(min(gtids), max(gtids))
    )
    return rows.where(near).where(_key(F.col(TABLE), F.col("seq")).isin(sorted(keys)))


@dataclass(frozen=True)
class Purges:
    """The purges among a batch's deletes: their keys (:func:`_key`), and those found in this batch with
    deletes landed before (landed again, archived)."""

    keys: tuple[str, ...]
    found_late: tuple[str, ...]
    archived: dict[str, int]
    """Per table, the changes this landing lands archived (the batch's deletes of purges, and those landed
    again)."""

    def relabeled(
        self, rows: DataFrame, changelog: str, land_seq: int, batch_id: int | None, epoch: str | None, at: object
    ) -> DataFrame:
        """A landing's changelog ``rows`` with the purges' deletes archived, and the deletes of
        :attr:`found_late` landed before in the ``changelog`` (its path) added, archived, as part of this
        landing."""
        purge = (F.col("op") == "d") & _key(F.col(TABLE), F.col("seq")).isin(list(self.keys))
        rows = rows.withColumn("op", F.when(purge, F.lit(ARCHIVE)).otherwise(F.col("op")))
        if not self.found_late:
            return rows
        landed = rows.sparkSession.read.format("delta").load(changelog)
        earlier = _landed(landed.where(F.col("op") == "d"), self.found_late)
        landing = {
            LAND_SEQ: F.lit(land_seq).cast("bigint"),
            "batch_id": F.lit(batch_id).cast("bigint"),
            "epoch": F.lit(epoch).cast("string"),
            "landed_at": F.lit(at).cast("timestamp"),
            "op": F.lit(ARCHIVE),
        }
        again = earlier.select(*[landing.get(c, F.col(c)).alias(c) for c in rows.columns])
        return rows.unionByName(again)


def find_purges(config: AppConfig, frame: DataFrame, tables: Iterable[str]) -> Purges | None:
    """The purges among the deletes of ``frame`` (a decoded batch) of ``tables`` (the batch's), counted with
    the changelog's; None where there are none (no table of the batch keeps archival deletes: no job)."""
    archival = {t: e.archival_deletes for t in tables if (e := config.owner(t)) is not None and e.archival_deletes}
    if not archival:
        return None
    seq = field("seq")
    deletes = frame.where(
        is_row_event() & (field("op") == "d") & (seq.getField("gtid") > 0) & field("table").isin(sorted(archival))
    )
    here = deletes.select(
        _key(field("table"), seq).alias("k"),
        seq.getField("pos").alias("pos"),
        seq.getField("row").alias("row"),
        F.lit(False).alias("archived"),
        F.lit(False).alias("earlier"),
    )
    keys = sorted(r["k"] for r in here.select("k").distinct().collect())
    if not keys:
        return None
    spark = frame.sparkSession
    landed = spark.read.format("delta").load(changelog_path(config))
    earlier = _landed(landed.where(F.col("op").isin("d", ARCHIVE)), keys).select(
        _key(F.col(TABLE), F.col("seq")).alias("k"),
        F.col("seq.pos").alias("pos"),
        F.col("seq.row").alias("row"),
        (F.col("op") == ARCHIVE).alias("archived"),
        F.lit(True).alias("earlier"),
    )
    counted = (
        here.unionByName(earlier)
        .groupBy("k")
        .agg(
            F.count_distinct("pos", "row").alias("rows"),
            F.max("archived").alias("archived_before"),
            F.count_if(F.col("earlier") & ~F.col("archived")).alias("deleted_before"),
            F.count_if(~F.col("earlier")).alias("here"),
        )
        .collect()
    )
    purges: list[str] = []
    late: list[str] = []
    archived: dict[str, int] = {}
    for row in counted:
        table, topic, file, gtid = row["k"].split(_SEP)
        settings = archival[table]
        if row["rows"] < settings.min_rows:
            continue
        purges.append(row["k"])
        logger.info(
            "table %s: transaction %s (binlog file %s, topic %s) deletes %d rows: a purge, kept archived",
            table,
            gtid,
            file,
            topic,
            row["rows"],
        )
        again = row["deleted_before"] and not row["archived_before"]
        if again:
            late.append(row["k"])
        archived[table] = archived.get(table, 0) + row["here"] + (row["deleted_before"] if again else 0)
    if not purges:
        return None
    return Purges(tuple(sorted(purges)), tuple(sorted(late)), archived)
