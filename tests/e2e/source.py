"""Compare what MariaDB holds (``SELECT *`` through pymysql) with a Delta or Hive table, column by column.

Each MySQL column type has the column type the lake must give it (a number stays a number; see
docs/design.md's column types), and each value a canonical form on both sides, so that a mismatch names the
table, the column, the key and both values.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame

NUMERIC_SPARK = ("tinyint", "smallint", "int", "bigint", "float", "double", "decimal")
NUMERIC_SOURCE = ("tinyint", "smallint", "mediumint", "int", "bigint", "float", "double", "year")


@dataclass(frozen=True)
class SourceColumn:
    name: str
    data_type: str
    """information_schema DATA_TYPE: int, decimal, bit, ..."""
    column_type: str
    """information_schema COLUMN_TYPE: int(10) unsigned, bit(10), ..."""
    precision: int | None

    @property
    def unsigned(self) -> bool:
        return "unsigned" in self.column_type

    def expected_type(self) -> str:
        """The column type the lake must give this MySQL column."""
        t = self.data_type
        if t == "tinyint":
            return "smallint"  # Debezium sends TINYINT as int16 (TINYINT UNSIGNED needs it)
        if t == "smallint":
            return "int" if self.unsigned else "smallint"
        if t in ("mediumint",):
            return "int"
        if t == "int":
            return "bigint" if self.unsigned else "int"
        if t == "bigint":
            return "decimal(20,0)" if self.unsigned else "bigint"
        if t == "decimal":
            scale = int(self.column_type.split(",")[1].rstrip(")").split(")")[0])
            return f"decimal({self.precision},{scale})" if (self.precision or 0) <= 38 else "string"
        if t in ("float", "double"):
            return t
        if t == "bit":
            return "boolean" if self.column_type == "bit(1)" else "binary"
        if t in ("datetime", "timestamp"):
            return "timestamp"
        if t == "date":
            return "date"
        if t == "year":
            return "int"
        if t == "time":
            return "string"
        if t == "set":
            return "array<string>"
        if t in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"):
            return "binary"
        return "string"  # char, varchar, text, json (MariaDB: longtext), enum

    def from_lake(self, value: Any) -> Any:
        """A lake value of this column in the compared form (as it is when it does not convert, so that
        a value of the wrong type shows as a mismatch)."""
        if value is None:
            return None
        try:
            if self.data_type == "float":
                return _float32(value)
            if self.data_type == "decimal" or (self.data_type == "bigint" and self.unsigned):
                return decimal.Decimal(str(value))
        except (TypeError, ValueError, struct.error, decimal.InvalidOperation):
            return value
        if isinstance(value, (bytes, bytearray)):
            return bytes(value)
        return list(value) if isinstance(value, list) else value

    def canonical(self, value: Any) -> Any:
        """A MySQL value in the form both sides are compared in."""
        if value is None:
            return None
        t = self.data_type
        if t == "bit":
            as_bytes = bytes(value)
            return as_bytes != b"\x00" if self.column_type == "bit(1)" else as_bytes
        if t == "float":
            return _float32(value)
        if t == "time":
            return _time_text(value)
        if t == "set":
            return [v for v in value.split(",") if v] if isinstance(value, str) else sorted(value)
        if t == "decimal" or (t == "bigint" and self.unsigned):
            return decimal.Decimal(value)
        if t in ("date", "datetime", "timestamp") and isinstance(value, str):
            return None  # a zero date ('0000-00-00'): Debezium sends NULL
        if isinstance(value, (bytes, bytearray)):
            return bytes(value)
        return value


def _float32(value: float) -> float:
    return float(struct.unpack("f", struct.pack("f", value))[0])


def _time_text(value: dt.timedelta) -> str:
    micros = value // dt.timedelta(microseconds=1)
    sign = "-" if micros < 0 else ""
    seconds, frac = divmod(abs(micros), 1_000_000)
    hours, rest = divmod(seconds, 3600)
    return f"{sign}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}.{frac:06d}"


def source_columns(conn: Any, database: str, table: str) -> list[SourceColumn]:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, NUMERIC_PRECISION FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
            (database, table),
        )
        return [SourceColumn(n, d.lower(), c.lower(), p) for n, d, c, p in cur.fetchall()]


def source_rows(conn: Any, database: str, table: str) -> list[dict[str, Any]]:
    """``SELECT *`` as dicts, values canonical; nothing when the table does not exist (dropped)."""
    columns = source_columns(conn, database, table)
    if not columns:
        return []
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM `{database}`.`{table}`")
        names = [d[0] for d in cur.description]
        by_name = {c.name: c for c in columns}
        return [{n: by_name[n].canonical(v) for n, v in zip(names, row, strict=True)} for row in cur.fetchall()]


@dataclass
class Comparison:
    """What differs between the source and the lake for one table."""

    table: str
    type_mismatches: list[str] = field(default_factory=list)
    missing_in_lake: list[tuple[Any, ...]] = field(default_factory=list)
    extra_in_lake: list[tuple[Any, ...]] = field(default_factory=list)
    value_mismatches: dict[str, list[str]] = field(default_factory=dict)

    @property
    def equal(self) -> bool:
        return not (self.type_mismatches or self.missing_in_lake or self.extra_in_lake or self.value_mismatches)

    def describe(self) -> str:
        lines = [f"{self.table}:"]
        lines += [f"  type: {m}" for m in self.type_mismatches]
        if self.missing_in_lake:
            lines.append(f"  {len(self.missing_in_lake)} key(s) missing in the lake: {self.missing_in_lake[:5]}")
        if self.extra_in_lake:
            lines.append(f"  {len(self.extra_in_lake)} live key(s) not in the source: {self.extra_in_lake[:5]}")
        for column, examples in sorted(self.value_mismatches.items()):
            lines.append(f"  column {column}: {len(examples)} row(s) differ, e.g. {examples[0]}")
        return "\n".join(lines)


def compare(
    table: str,
    columns: Sequence[SourceColumn],
    source: Iterable[dict[str, Any]],
    lake: DataFrame | None,
    key: Sequence[str],
    lake_key: Sequence[str] | None = None,
) -> Comparison:
    """Compare source rows with the lake's rows (``lake``: business columns, plus ``lake_key`` columns
    where the key differs, e.g. the shard columns; None: no such table in the lake)."""
    result = Comparison(table)
    lake_key = list(lake_key or key)
    want_rows = {tuple(r[k] for k in key): r for r in source}
    if lake is None:
        result.missing_in_lake = sorted(want_rows, key=repr)
        return result
    types = {f.name: f.dataType.simpleString() for f in lake.schema.fields}
    for c in columns:
        want = c.expected_type()
        got = types.get(c.name)
        if got != want:
            result.type_mismatches.append(f"{c.name} ({c.column_type}): lake has {got}, expected {want}")
        if c.data_type in NUMERIC_SOURCE and not (got or "").startswith(NUMERIC_SPARK):
            result.type_mismatches.append(f"{c.name} ({c.column_type}) is a number at the source, {got} in the lake")
    by_name = {c.name: c for c in columns}
    got_rows = {}
    for row in lake.collect():
        d = row.asDict()
        got_rows[tuple(d[k] for k in lake_key)] = {
            n: by_name[n].from_lake(v) if n in by_name else v for n, v in d.items()
        }
    result.missing_in_lake = sorted(set(want_rows) - set(got_rows), key=repr)
    result.extra_in_lake = sorted(set(got_rows) - set(want_rows), key=repr)
    for k in set(want_rows) & set(got_rows):
        for c in columns:
            want, got = want_rows[k][c.name], got_rows[k].get(c.name)
            if want != got:
                result.value_mismatches.setdefault(c.name, []).append(f"key {k}: source {want!r}, lake {got!r}")
    return result
