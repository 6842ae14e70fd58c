"""The SQL the end-to-end tests run on MariaDB: tables covering every MySQL/MariaDB column type with edge
values, ordinary, sharded and same-named tables, and a binlog workload in steps (DML, a primary-key
update, a multi-statement transaction, TRUNCATE, ALTER ADD COLUMN with defaults, ALTER MODIFY INT ->
BIGINT on a key, a table created and dropped, FLUSH LOGS). ``{db}`` names the test's own databases."""

from __future__ import annotations

from dataclasses import dataclass

WIDE_COLUMNS = """
  id INT PRIMARY KEY,
  c_tinyint TINYINT, c_tinyint_u TINYINT UNSIGNED, c_bool BOOLEAN,
  c_smallint SMALLINT, c_smallint_u SMALLINT UNSIGNED,
  c_mediumint MEDIUMINT, c_mediumint_u MEDIUMINT UNSIGNED,
  c_int INT, c_int_u INT UNSIGNED,
  c_bigint BIGINT, c_bigint_u BIGINT UNSIGNED,
  c_decimal DECIMAL(38,10), c_decimal_small DECIMAL(10,2), c_decimal65 DECIMAL(65,30),
  c_float FLOAT, c_double DOUBLE,
  c_bit1 BIT(1), c_bit10 BIT(10), c_bit64 BIT(64),
  c_date DATE, c_time TIME, c_time6 TIME(6),
  c_datetime DATETIME, c_datetime3 DATETIME(3), c_datetime6 DATETIME(6),
  c_timestamp TIMESTAMP NULL, c_timestamp6 TIMESTAMP(6) NULL, c_year YEAR,
  c_char CHAR(10), c_varchar VARCHAR(100), c_text TEXT,
  c_binary BINARY(4), c_varbinary VARBINARY(16), c_blob BLOB,
  c_json JSON, c_enum ENUM('a','b','c'), c_set SET('x','y','z')
"""

# Minimums, maximums and awkward values of every type; row 1 is all NULLs.
WIDE_ROWS = (
    "(1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " NULL, NULL, NULL, NULL)",
    "(2, -128, 255, 1, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295,"
    " -9223372036854775808, 18446744073709551615, 9999999999999999999999999999.9999999999, -12345678.90,"
    " 12345678901234567890123456789012345.123456789012345678901234567890,"
    " 3.14, 2.718281828459045, b'1', b'1000000001',"
    " b'1111111111111111111111111111111111111111111111111111111111111111',"
    " '1000-01-01', '-838:59:59', '838:59:59.000000', '1000-01-01 00:00:00', '2024-02-29 12:34:56.789',"
    " '9999-12-31 23:59:59.999999', '1970-01-01 00:00:01', '2038-01-19 03:14:07.999999', 1901,"
    " 'abc', 'héllo wörld 😀', 'long text 🎉 with ünïcode', x'00010203', x'DEADBEEF', x'00FF00FF',"
    " '{\"a\": [1, 2, {\"b\": null}]}', 'b', 'x,z')",
    "(3, 127, 0, 0, 32767, 0, 8388607, 0, 2147483647, 0,"
    " 9223372036854775807, 0, -9999999999999999999999999999.9999999999, 0.01, -0.000000000000000000000000000001,"
    " -1.5e-10, -1.7976931348623157e308, b'0', b'0000000000',"
    " b'0000000000000000000000000000000000000000000000000000000000000001',"
    " '9999-12-31', '00:00:00', '-00:00:00.000001', '9999-12-31 23:59:59', '1970-01-01 00:00:00.000',"
    " '2000-01-01 00:00:00.5', '2020-06-01 12:00:00', '2020-06-01 12:00:00.123400', 2155,"
    " '', '', '', x'00000000', x'', x'', '[]', 'c', '')",
)


def setup_sql(db: str) -> list[str]:
    """Databases, tables and the rows present before the connector starts (its snapshot reads them)."""
    plain_rows = ", ".join(
        f"({i}, 'name {i}', {i * 10}.{i % 100:02d}, '2026-01-{1 + i % 28:02d} 10:{i % 60:02d}:00.{i:03d}', NULL)"
        for i in range(1, 31)
    )
    shard = "id INT PRIMARY KEY, customer VARCHAR(20), total DECIMAL(10,2)"
    return [
        f"CREATE DATABASE {db}",
        f"CREATE DATABASE {db}_archive",
        f"CREATE DATABASE {db}_s0",
        f"CREATE DATABASE {db}_s1",
        f"CREATE TABLE {db}.wide ({WIDE_COLUMNS})",
        f"INSERT INTO {db}.wide VALUES {', '.join(WIDE_ROWS)}",
        f"CREATE TABLE {db}.plain (id INT PRIMARY KEY, name VARCHAR(50) NOT NULL, amount DECIMAL(12,2),"
        " updated_at DATETIME(3), note TEXT)",
        f"INSERT INTO {db}.plain VALUES {plain_rows}",
        f"CREATE TABLE {db}.items (id INT PRIMARY KEY, label VARCHAR(20), qty INT)",
        f"CREATE TABLE {db}_archive.items (id INT, label VARCHAR(20), qty INT, PRIMARY KEY (id, label))",
        f"INSERT INTO {db}.items VALUES (1, 'live 1', 1), (2, 'live 2', 2), (3, 'live 3', 3)",
        f"INSERT INTO {db}_archive.items VALUES (1, 'archived 1', 10), (2, 'archived 2', 20)",
        f"CREATE TABLE {db}_s0.orders_000 ({shard})",
        f"CREATE TABLE {db}_s1.orders_001 ({shard})",
        f"INSERT INTO {db}_s0.orders_000 VALUES " + ", ".join(f"({i}, 's0 c{i}', {i}.50)" for i in range(1, 11)),
        f"INSERT INTO {db}_s1.orders_001 VALUES " + ", ".join(f"({i}, 's1 c{i}', {i}.25)" for i in range(1, 11)),
        f"CREATE TABLE {db}.odd (id INT PRIMARY KEY, `weird name` INT)",
        f"INSERT INTO {db}.odd VALUES (1, 1)",
        f"CREATE TABLE {db}.marker (id INT PRIMARY KEY)",
    ]


def binlog_steps(db: str) -> list[list[str]]:
    """The changes after the connector's snapshot, in steps (a test may act between them)."""
    return [
        [  # DML, a primary-key update on two tables, a multi-statement transaction, shards
            f"INSERT INTO {db}.wide (id, c_date, c_datetime, c_varchar, c_bit10, c_time)"
            " VALUES (4, '0000-00-00', '2026-03-01 08:00:00', 'zero date', b'11', '25:00:00')",
            f"UPDATE {db}.wide SET c_varchar = 'updated 😀', c_decimal = -1.5, c_double = NULL, c_set = 'y'"
            " WHERE id = 1",
            f"UPDATE {db}.plain SET amount = amount * 2 WHERE id <= 10",
            f"DELETE FROM {db}.plain WHERE id BETWEEN 11 AND 15",
            f"UPDATE {db}.plain SET id = 100 WHERE id = 16",
            f"UPDATE {db}.wide SET id = 10 WHERE id = 2",
            "START TRANSACTION",
            f"INSERT INTO {db}.plain VALUES (200, 'tx a', 1.00, NULL, NULL), (201, 'tx b', 2.00, NULL, 'two')",
            f"UPDATE {db}.plain SET name = 'tx a updated' WHERE id = 200",
            f"DELETE FROM {db}.plain WHERE id = 17",
            "COMMIT",
            f"UPDATE {db}_s0.orders_000 SET total = total + 1 WHERE id < 5",
            f"DELETE FROM {db}_s1.orders_001 WHERE id = 3",
            f"INSERT INTO {db}_s1.orders_001 VALUES (11, 's1 new', 11.11)",
            f"UPDATE {db}.items SET qty = qty + 100",
            f"UPDATE {db}_archive.items SET label = 'archive edited' WHERE id = 2",
        ],
        [  # binlog rollover, columns added with defaults, a key widened, a table created and dropped
            "FLUSH LOGS",
            f"ALTER TABLE {db}.plain ADD COLUMN score INT NOT NULL DEFAULT 7,"
            " ADD COLUMN tag VARCHAR(10) DEFAULT 'dflt', ADD COLUMN price DECIMAL(8,2) DEFAULT 1.25",
            f"INSERT INTO {db}.plain (id, name, amount) VALUES (300, 'after alter', 3.50)",
            f"INSERT INTO {db}.plain (id, name, amount, score, tag, price) VALUES (301, 'explicit', 1, 9, NULL, NULL)",
            f"UPDATE {db}.plain SET note = 'touched after alter' WHERE id = 1",
            f"ALTER TABLE {db}.items MODIFY id BIGINT",
            f"INSERT INTO {db}.items VALUES (5000000000, 'big key', 5)",
            f"CREATE TABLE {db}.temp (id INT PRIMARY KEY, v VARCHAR(10))",
            f"INSERT INTO {db}.temp VALUES (1, 'a'), (2, 'b')",
            f"UPDATE {db}.temp SET v = 'c' WHERE id = 2",
            f"DROP TABLE {db}.temp",
        ],
        [  # TRUNCATE of one shard, more updates, deletes
            f"TRUNCATE TABLE {db}_s0.orders_000",
            f"INSERT INTO {db}_s0.orders_000 VALUES (1, 'after truncate', 5.00)",
            f"INSERT INTO {db}.odd VALUES (2, 5)",
            f"UPDATE {db}.wide SET c_bit10 = b'1000000000', c_time = '-01:02:03.5', c_year = 2000 WHERE id = 10",
            f"DELETE FROM {db}.wide WHERE id = 3",
            f"UPDATE {db}.plain SET amount = NULL, updated_at = '2026-11-23 23:59:59.999' WHERE id = 2",
            # A purge (one DELETE of PURGED rows), beside an update before it, a re-insert of one of its keys
            # after it and a single delete: with archival_deletes, the purged rows stay, archived.
            f"INSERT INTO {db}.items VALUES " + ", ".join(f"({i}, 'p{i}', {i})" for i in PURGED),
            f"UPDATE {db}.items SET qty = 99 WHERE id = {PURGED[0]}",
            f"DELETE FROM {db}.items WHERE id BETWEEN {PURGED[0]} AND {PURGED[-1]}",
            f"INSERT INTO {db}.items VALUES ({PURGED[1]}, 'back again', 1)",
            f"DELETE FROM {db}.items WHERE id = 1",
        ],
    ]


HISTORY_ROW = 20
"""The plain row :func:`history_steps` updates (no other step touches it)."""
HISTORY_AT = tuple(1_795_000_000 + 60 * k for k in range(1, 6))
"""The source times (epoch seconds, 2026-11-18) of its five updates."""


def history_steps(db: str) -> list[str]:
    """Five updates of one plain row, each a transaction of its own at a source time of its own
    (:data:`HISTORY_AT`: the session's timestamp, which MariaDB writes into each binlog event)."""
    out = []
    for k, at in enumerate(HISTORY_AT, start=1):
        out += [f"SET timestamp = {at}", f"UPDATE {db}.plain SET amount = {k} WHERE id = {HISTORY_ROW}"]
    return [*out, "SET timestamp = DEFAULT"]


PURGED = tuple(range(10, 17))
"""The items one DELETE purges (seven: a purge where ``archival_deletes.min_rows`` is 6)."""


def archived_rows(db: str) -> dict[str, list[dict[str, object]]]:
    """The rows a purge deleted, as an archive keeps them (``archival_deletes``): their last values; not the
    one inserted again after the purge."""
    kept = [{"id": i, "label": f"p{i}", "qty": 99 if i == PURGED[0] else i} for i in PURGED if i != PURGED[1]]
    return {f"{db}.items": kept}


@dataclass(frozen=True)
class Expected:
    """Keys the workload deleted at the source: soft-deleted rows in Delta."""

    deleted: dict[str, set[tuple[object, ...]]]


def deleted_keys(db: str, archival: bool = False) -> Expected:
    """``archival``: the purge is kept (``archival_deletes``), its rows not deleted."""
    purged = set() if archival else {(i,) for i in PURGED if i != PURGED[1]}
    return Expected(
        {
            f"{db}.plain": {(11,), (12,), (13,), (14,), (15,), (16,), (17,)},
            f"{db}.items": {(1,)} | purged,
            f"{db}.wide": {(2,), (3,)},
            f"{db}.temp": {(1,), (2,)},
            f"{db}_archive.items": {(2, "archived 2")},  # its label is part of its primary key
            f"{db}.orders": {(f"{db}_s1", "orders_001", 3)} | {(f"{db}_s0", "orders_000", i) for i in range(2, 11)},
        }
    )
