"""The stock export reader on its own: typed rows and rejects, for a text and a Parquet export."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pytest

from cdc_delta.config import TableConfig, parse_config
from cdc_delta.snapshot.stock_export import read_stock

pytestmark = pytest.mark.spark

# "content" and "line" are business columns here: the reader's own working columns must not clash.
COLUMNS = {"id": "bigint", "amount": "decimal(10,2)", "content": "string", "line": "date"}


def table(export: Path, fmt: str) -> TableConfig:
    config = parse_config(
        {
            "app_id": "stock",
            "storage": {"root": str(export.parent)},
            "tables": [
                {
                    "name": "shop.orders",
                    "topics": ["t"],
                    "key": ["id"],
                    "columns": COLUMNS,
                    "stock": {"path": str(export), "format": fmt, "delimiter": "|"},
                }
            ],
        }
    )
    return config.tables[0]


def read(spark: Any, config: TableConfig) -> tuple[list[tuple], list[tuple]]:
    stock = read_stock(spark, config)
    try:
        rows = sorted(tuple(r) for r in stock.rows.collect())
        rejects = sorted((Path(r["file"]).name, r["line"], r["reason"], r["content"]) for r in stock.rejects.collect())
    finally:
        stock.release()
    return rows, rejects


def test_parquet_export_typed_columns_pass_checked_columns_reject(spark, tmp_path: Path) -> None:
    export = tmp_path / "export"
    # id is a Parquet int (fits bigint: cast without a check); amount is text (checked cast).
    frame = spark.createDataFrame(
        [
            (1, "12.50", "first", dt.date(2026, 1, 1)),
            (2, "lots", "bad amount", dt.date(2026, 1, 2)),
            (None, "1.00", "no key", dt.date(2026, 1, 3)),
            (3, "3.00", "kept once", dt.date(2026, 1, 4)),
            (3, "4.00", "repeated", dt.date(2026, 1, 5)),
        ],
        "order_id int, amount_text string, body string, day date",
    )
    frame.coalesce(1).write.parquet(str(export))
    rows, rejects = read(spark, table(export, "parquet"))
    ids = [r[0] for r in rows]
    assert ids == [1, 3]
    assert rows[0] == (1, decimal.Decimal("12.50"), "first", dt.date(2026, 1, 1))
    reasons = [(r[2], r[3]) for r in rejects]
    assert ("column amount: cannot read 'lots' as decimal(10,2)", "2|lots|bad amount|2026-01-02") in reasons
    assert ("key column id is NULL", "\\N|1.00|no key|2026-01-03") in reasons
    duplicates = [r for r in rejects if r[2] == "duplicate key: an earlier line holds the same key"]
    assert len(duplicates) == 1 and '"id":3' in duplicates[0][3]
    assert len(rejects) == 3
    assert all(r[0].endswith(".parquet") and r[1] is None for r in rejects)


def test_text_export_keeps_the_first_line_of_a_repeated_key(spark, tmp_path: Path) -> None:
    export = tmp_path / "export"
    export.mkdir()
    (export / "orders__a").write_text("1|1.50|one|2026-01-01\n2|2.50|two|2026-01-02\n1|9.99|again|2026-01-09\n")
    (export / "orders__b").write_text("3|3.50|\\N|\\N\n")
    rows, rejects = read(spark, table(export, "text"))
    assert rows == [
        (1, decimal.Decimal("1.50"), "one", dt.date(2026, 1, 1)),
        (2, decimal.Decimal("2.50"), "two", dt.date(2026, 1, 2)),
        (3, decimal.Decimal("3.50"), None, None),
    ]
    assert [(r[0], r[1], r[2]) for r in rejects] == [
        ("orders__a", 3, "duplicate key: an earlier line holds the same key")
    ]


def test_clean_parquet_export_reads_every_row(spark, tmp_path: Path) -> None:
    export = tmp_path / "export"
    spark.range(1000).selectExpr(
        "id", "CAST(id / 100 AS decimal(10,2)) AS amount", "CAST(id AS string) AS content", "DATE'2026-01-01' AS line"
    ).write.parquet(str(export))
    stock = read_stock(spark, table(export, "parquet"))
    assert stock.rejects.count() == 0
    assert stock.rows.count() == 1000
    assert stock.rows.select("id").distinct().count() == 1000
