"""What the source database holds now, read in one consistent snapshot (PyMySQL; MariaDB or MySQL)."""

from __future__ import annotations

from dataclasses import dataclass
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


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def probe(conn: Any, source: str, key: list[str]) -> SourceState:
    """Row count, key range and newest key of ``source`` (``db.table``), with the server time, all of
    one consistent snapshot."""
    db, table = source.split(".")
    name = f"{_q(db)}.{_q(table)}"
    first = _q(key[0])
    newest_order = ", ".join(f"{_q(k)} DESC" for k in key)
    with conn.cursor() as cur:
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        try:
            cur.execute("SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)")
            at_ms = int(cur.fetchone()[0])
            cur.execute(f"SELECT MIN({first}), MAX({first}), COUNT(*) FROM {name}")
            low, high, rows = cur.fetchone()
            cur.execute(f"SELECT {', '.join(_q(k) for k in key)} FROM {name} ORDER BY {newest_order} LIMIT 1")
            newest = cur.fetchone()
        finally:
            cur.execute("COMMIT")
    return SourceState(at_ms, int(rows), low, high, tuple(newest) if newest else None)
