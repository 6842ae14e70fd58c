"""Read a table's full export as DataX writes it: typed rows, and rejects with file, line and reason.

Text exports are headerless delimited lines (gzip, bzip2 or plain; several files per table) whose
fields follow the table's configured ``columns`` in order; a field equal to the null marker is NULL.
ORC and Parquet exports hold the same columns in the same order. A line with the wrong number of
fields, bytes that do not decode, a value that does not cast to its column's type, a NULL key or a
key seen before becomes a reject; it is never dropped silently and never stops the read.
"""

from __future__ import annotations

import bz2
import gzip
import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.config import StockExportConfig, TableConfig
from cdc_delta.exceptions import SnapshotError

FILE = "_stock_file"
LINE = "_stock_line"
REJECT_COLUMNS = ("file", "line", "reason", "content")
_PARSED_SCHEMA = "file string, line bigint, fields array<string>, reason string, content string"
_GZIP_MAGIC = b"\x1f\x8b"
_BZIP2_MAGIC = b"BZh"


@dataclass(frozen=True)
class StockRead:
    """The export as typed rows (business columns in config order) and its rejects."""

    rows: DataFrame
    rejects: DataFrame
    """Columns file, line (NULL for ORC/Parquet), reason, content (the line as read)."""


def _open(content: bytes, compression: str) -> IO[bytes] | gzip.GzipFile | bz2.BZ2File:
    raw = io.BytesIO(content)
    if compression == "gzip" or (compression == "auto" and content.startswith(_GZIP_MAGIC)):
        return gzip.GzipFile(fileobj=raw)
    if compression == "bzip2" or (compression == "auto" and content.startswith(_BZIP2_MAGIC)):
        return bz2.BZ2File(raw)
    return raw


def parse_file(path: str, content: bytes, stock: StockExportConfig, width: int) -> Iterator[tuple]:
    """(file, line, fields, reason, content) per line of one export file; fields is None for a reject."""
    line = 0
    try:
        for line, raw in enumerate(_open(content, stock.compression), start=1):
            raw = raw.removesuffix(b"\n").removesuffix(b"\r")
            try:
                text = raw.decode(stock.encoding)
            except UnicodeDecodeError as exc:
                shown = raw.decode(stock.encoding, errors="replace")
                yield (path, line, None, f"not valid {stock.encoding} at byte {exc.start}", shown)
                continue
            fields = text.split(stock.delimiter)
            if len(fields) != width:
                yield (path, line, None, f"{len(fields)} fields, expected {width}", text)
                continue
            yield (path, line, [None if f == stock.null_marker else f for f in fields], None, None)
    except (OSError, EOFError, ValueError) as exc:  # a corrupt or truncated compressed file
        yield (path, line + 1, None, f"cannot decompress ({stock.compression}): {exc}; lines after it unread", None)


def _text_fields(spark: SparkSession, stock: StockExportConfig, width: int) -> DataFrame:
    files = spark.read.format("binaryFile").load(stock.path).select("path", "content")
    settings = stock

    def per_file(row: object) -> Iterator[tuple]:
        return parse_file(row["path"], bytes(row["content"]), settings, width)  # type: ignore[index]

    return spark.createDataFrame(files.rdd.flatMap(per_file), _PARSED_SCHEMA)


def _columnar_fields(spark: SparkSession, stock: StockExportConfig, table: TableConfig) -> DataFrame:
    df = spark.read.format(stock.format).load(stock.path)
    if len(df.columns) != len(table.columns):
        raise SnapshotError(
            f"stock export {stock.path} of {table.name} has {len(df.columns)} columns, the config lists "
            f"{len(table.columns)} ({', '.join(table.columns)}): list every exported column, in order"
        )
    fields = F.array(*[F.col(C.quote(name)).cast("string") for name in df.columns])
    return df.select(
        F.col("_metadata.file_path").alias("file"),
        F.lit(None).cast("bigint").alias("line"),
        fields.alias("fields"),
        F.lit(None).cast("string").alias("reason"),
        F.lit(None).cast("string").alias("content"),
    )


def _cast_reason(table: TableConfig) -> Column:
    """Why a structurally sound row is rejected (NULL when it is fine)."""
    checks = []
    for i, (name, type_name) in enumerate(table.columns.items()):
        raw = F.col("fields")[i]
        if name in table.key:
            checks.append(F.when(raw.isNull(), F.lit(f"key column {name} is NULL")))
        typed = F.expr(f"try_cast(fields[{i}] AS {type_name})")
        message = F.concat(F.lit(f"column {name}: cannot read '"), raw, F.lit(f"' as {type_name}"))
        checks.append(F.when(raw.isNotNull() & typed.isNull(), message))
    return F.coalesce(*checks)


def read_stock(spark: SparkSession, table: TableConfig) -> StockRead:
    """The table's stock export, typed by its ``columns``; rejects alongside. Nothing is cached:
    callers that use both frames persist ``rows`` and ``rejects`` themselves."""
    stock = table.stock
    if stock is None:
        raise SnapshotError(f"table {table.name} has no stock export configured (tables[].stock)")
    width = len(table.columns)
    text = stock.format == "text"
    parsed = _text_fields(spark, stock, width) if text else _columnar_fields(spark, stock, table)
    content = F.coalesce(
        F.col("content"),
        F.array_join(F.transform("fields", lambda x: F.coalesce(x, F.lit(stock.null_marker))), stock.delimiter),
    )
    checked = parsed.withColumn("reason", F.coalesce(F.col("reason"), _cast_reason(table))).withColumn(
        "content", content
    )
    typed = checked.where(F.col("reason").isNull()).select(
        *[F.expr(f"try_cast(fields[{i}] AS {t})").alias(n) for i, (n, t) in enumerate(table.columns.items())],
        F.col("file").alias(FILE),
        F.col("line").alias(LINE),
    )
    first = Window.partitionBy(*[C.quote(k) for k in table.key]).orderBy(FILE, LINE)
    ranked = typed.withColumn("_stock_rank", F.row_number().over(first))
    duplicates = ranked.where("_stock_rank > 1").select(
        F.col(FILE).alias("file"),
        F.col(LINE).alias("line"),
        F.lit("duplicate key: an earlier line holds the same key").alias("reason"),
        F.to_json(F.struct(*[C.quote(n) for n in table.columns])).alias("content"),
    )
    rows = ranked.where("_stock_rank = 1").select(*[C.quote(n) for n in table.columns])
    rejects = checked.where(F.col("reason").isNotNull()).select(*REJECT_COLUMNS).unionByName(duplicates)
    return StockRead(rows, rejects)
