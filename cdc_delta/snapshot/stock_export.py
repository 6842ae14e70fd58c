"""Read a table's full export as DataX writes it: typed rows, and rejects with file, line and reason.

Text exports are headerless delimited lines (gzip, bzip2 or plain; several files per table) whose
fields follow the table's configured ``columns`` in order; a field equal to the null marker is NULL.
ORC and Parquet exports hold the same columns in the same order; a column whose type already fits
the configured one is cast directly, any other goes through the same checked cast as text. A line
with the wrong number of fields, bytes that do not decode, a value that does not cast to its
column's type, a NULL key or a key seen before becomes a reject; it is never dropped silently and
never stops the read.
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
from pyspark.storagelevel import StorageLevel

from cdc_delta import columns as C
from cdc_delta.config import StockExportConfig, TableConfig
from cdc_delta.events.column_types import fits_in, normalize
from cdc_delta.exceptions import SnapshotError

# Working columns beside the business columns (whose names are the user's: a table may have a
# column named "file" or "content").
FILE = "_stock_file"
LINE = "_stock_line"
FIELDS = "_stock_fields"
REASON = "_stock_reason"
CONTENT = "_stock_content"
REJECT_COLUMNS = ("file", "line", "reason", "content")
_PARSED_SCHEMA = f"{FILE} string, {LINE} bigint, {FIELDS} array<string>, {REASON} string, {CONTENT} string"
_GZIP_MAGIC = b"\x1f\x8b"
_BZIP2_MAGIC = b"BZh"


@dataclass(frozen=True)
class StockRead:
    """The export as typed rows (business columns in config order) and its rejects."""

    rows: DataFrame
    rejects: DataFrame
    """Columns file, line (NULL for ORC/Parquet), reason, content (the line as read)."""
    cached: DataFrame | None = None
    """The parsed text export, cached while ``rows`` and ``rejects`` are in use."""

    def release(self) -> None:
        """Drop the cached parse (once the rows are written)."""
        if self.cached is not None:
            self.cached.unpersist()


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
    """The export's own columns, renamed to the config's, beside the working columns."""
    df = spark.read.format(stock.format).load(stock.path)
    if len(df.columns) != len(table.columns):
        raise SnapshotError(
            f"stock export {stock.path} of {table.name} has {len(df.columns)} columns, the config lists "
            f"{len(table.columns)} ({', '.join(table.columns)}): list every exported column, in order"
        )
    as_text = [F.coalesce(F.col(C.quote(n)).cast("string"), F.lit(stock.null_marker)) for n in df.columns]
    return df.select(
        *[F.col(C.quote(src)).alias(name) for src, name in zip(df.columns, table.columns, strict=True)],
        F.col("_metadata.file_path").alias(FILE),
        F.lit(None).cast("bigint").alias(LINE),
        F.lit(None).cast("string").alias(REASON),
        F.concat_ws(stock.delimiter, *as_text).alias(CONTENT),
    )


def _typed_column(value: Column, source_type: str, name: str, type_name: str) -> tuple[Column, Column | None]:
    """The value as ``type_name``, and why it does not cast (None where it always does: an ORC or
    Parquet column whose type fits the configured one is cast without a check; a float is not, so
    that 1.1 stays 1.1 in a double column, as in a text export)."""
    try:
        source = normalize(source_type)
        fits = source != "float" and fits_in(source, type_name)
    except ValueError:  # a type a replicated table never has (timestamp_ntz, map, ...)
        fits = False
    if fits:
        return value.cast(type_name), None
    typed = value.try_cast(type_name)
    message = F.concat(F.lit(f"column {name}: cannot read '"), value.cast("string"), F.lit(f"' as {type_name}"))
    return typed, F.when(value.isNotNull() & typed.isNull(), message)


def _has_repeated_keys(rows: DataFrame, key: list[str]) -> bool:
    """Whether any key occurs twice: a hash aggregate of the key columns alone (no sort)."""
    return bool(rows.groupBy(*key).count().where("count > 1").limit(1).count())


def read_stock(spark: SparkSession, table: TableConfig) -> StockRead:
    """The table's stock export, typed by its ``columns``; rejects alongside.

    A text export is parsed (in Python) once and cached until :meth:`StockRead.release`; an ORC or
    Parquet export is read again by each action, column-pruned. Repeated keys are looked for with one
    aggregate of the key columns; only when there are some are the rows ranked to keep each key's
    first line and reject the others.
    """
    stock = table.stock
    if stock is None:
        raise SnapshotError(f"table {table.name} has no stock export configured (tables[].stock)")
    width = len(table.columns)
    cached: DataFrame | None = None
    if stock.format == "text":
        parsed = _text_fields(spark, stock, width).persist(StorageLevel.MEMORY_AND_DISK)
        cached = parsed
        values = [(F.col(FIELDS)[i], "string") for i in range(width)]
        content = F.coalesce(
            F.col(CONTENT),
            F.array_join(F.transform(FIELDS, lambda x: F.coalesce(x, F.lit(stock.null_marker))), stock.delimiter),
        )
    else:
        parsed = _columnar_fields(spark, stock, table)
        types = {f.name: f.dataType.simpleString() for f in parsed.schema.fields}
        values = [(F.col(C.quote(name)), types[name]) for name in table.columns]
        content = F.col(CONTENT)
    typed, checks = [], []
    for (name, type_name), (value, source_type) in zip(table.columns.items(), values, strict=True):
        if name in table.key:
            checks.append(F.when(value.isNull(), F.lit(f"key column {name} is NULL")))
        column, reason = _typed_column(value, source_type, name, type_name)
        typed.append(column.alias(name))
        if reason is not None:
            checks.append(reason)
    reason = F.coalesce(F.col(REASON), *checks)
    good = parsed.where(reason.isNull()).select(*typed, FILE, LINE)
    rejects = parsed.where(reason.isNotNull()).select(
        *[F.col(c).alias(out) for c, out in ((FILE, "file"), (LINE, "line"))],
        reason.alias("reason"),
        content.alias("content"),
    )
    rows, duplicates = _first_of_each_key(good, table)
    return StockRead(rows, rejects if duplicates is None else rejects.unionByName(duplicates), cached)


def _first_of_each_key(good: DataFrame, table: TableConfig) -> tuple[DataFrame, DataFrame | None]:
    """The rows with each key's first line only, and the later lines as rejects (None: no key repeats;
    found with one key-only aggregate, and only then the rows are ranked)."""
    names = [C.quote(n) for n in table.columns]
    keys = [C.quote(k) for k in table.key]
    if not _has_repeated_keys(good, keys):
        return good.select(*names), None
    first = Window.partitionBy(*keys).orderBy(FILE, LINE)
    ranked = good.withColumn("_stock_rank", F.row_number().over(first))
    duplicates = ranked.where("_stock_rank > 1").select(
        F.col(FILE).alias("file"),
        F.col(LINE).alias("line"),
        F.lit("duplicate key: an earlier line holds the same key").alias("reason"),
        F.to_json(F.struct(*names)).alias("content"),
    )
    return ranked.where("_stock_rank = 1").select(*names), duplicates
