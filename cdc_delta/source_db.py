"""What the source database holds now, read in one consistent snapshot (PyMySQL; MariaDB or MySQL)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cdc_delta.config import SourceConfig
from cdc_delta.exceptions import Unavailable


class SourceUnavailable(Unavailable):
    """The source database cannot be reached or refuses the login."""


@dataclass(frozen=True)
class SourceState:
    """One table of the source at one moment (``at_ms``, the server's clock)."""

    at_ms: int
    rows: int
    low: Any
    """The smallest and largest value of the first key column (None: the table is empty)."""
    high: Any
    newest_key: tuple[Any, ...] | None
    """The largest key (key columns in order), None for an empty table."""
    range_width: int | None = None
    """Keys per range of ``range_rows`` (None: not counted by range)."""
    range_rows: dict[int, int] = field(default_factory=dict)
    """Rows per range of the first key column: range ``(key - low) // range_width``."""


def connect(config: SourceConfig) -> Any:
    """A PyMySQL connection, or :class:`SourceUnavailable` naming host and port (never the password)."""
    import pymysql

    where = f"{config.user}@{config.host}:{config.port}"
    try:
        return pymysql.connect(
            host=config.host,
            port=config.port,
            user=config.user,
            password=config.password() or "",
            connect_timeout=config.connect_timeout_seconds,
            read_timeout=600,
            charset="utf8mb4",
            autocommit=True,
        )
    except pymysql.err.OperationalError as exc:
        code, message = (exc.args + ("",))[:2]
        hint = (
            "check source.user and its password (source.password_env / password_file)"
            if code in (1044, 1045)
            else "is the database running? Check source.host and source.port"
        )
        raise SourceUnavailable(f"cannot connect to the source database {where} ({message}): {hint}") from None


def quoted(name: str) -> str:
    """A MySQL identifier in backticks."""
    return "`" + name.replace("`", "``") + "`"


def probe(
    conn: Any, source: str, key: list[str], width_of: Callable[[Any, Any], int | None] | None = None
) -> SourceState:
    """Row count, key range and newest key of ``source`` (``db.table``), with the server time, all of
    one consistent snapshot; with ``width_of`` (keys per range over the first key column's low and high,
    None where it does not apply), the rows per range too."""
    db, table = source.split(".")
    name = f"{quoted(db)}.{quoted(table)}"
    first = quoted(key[0])
    newest_order = ", ".join(f"{quoted(k)} DESC" for k in key)
    with conn.cursor() as cur:
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        try:
            cur.execute("SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)")
            at_ms = int(cur.fetchone()[0])
            cur.execute(f"SELECT MIN({first}), MAX({first}), COUNT(*) FROM {name}")
            low, high, rows = cur.fetchone()
            cur.execute(f"SELECT {', '.join(quoted(k) for k in key)} FROM {name} ORDER BY {newest_order} LIMIT 1")
            newest = cur.fetchone()
            size = width_of(low, high) if width_of is not None and low is not None else None
            by_range: dict[int, int] = {}
            if size is not None:
                cur.execute(f"SELECT ({first} - %s) DIV %s, COUNT(*) FROM {name} GROUP BY 1", (low, size))
                by_range = {int(b): int(n) for b, n in cur.fetchall()}
        finally:
            cur.execute("COMMIT")
    return SourceState(at_ms, int(rows), low, high, tuple(newest) if newest else None, size, by_range)


def primary_key(conn: Any, source: str) -> list[str] | None:
    """The primary-key columns of ``source`` (``db.table``) in order; [] for a table without one, None
    for a table the server does not have."""
    db, table = source.split(".", 1)
    with conn.cursor() as cur:
        cur.execute(
            "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s", (db, table)
        )
        if not cur.fetchone()[0]:
            return None
        cur.execute(
            "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
            "AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION",
            (db, table),
        )
        return [str(r[0]) for r in cur.fetchall()]


def filter_problem(conn: Any, source: str, where: str) -> str | None:
    """Why the server refuses ``where`` as a condition on ``source`` (its own words), or None: the
    statement is explained, not run."""
    import pymysql

    db, table = source.split(".", 1)
    try:
        with conn.cursor() as cur:
            cur.execute(f"EXPLAIN SELECT 1 FROM {quoted(db)}.{quoted(table)} WHERE ({where})")
    except pymysql.err.MySQLError as exc:
        return str(exc.args[-1])
    return None
