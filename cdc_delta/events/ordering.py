"""The ordering key: a total order of the change events of one key, stable across restarts and replays.

Fields, compared in this order (the Delta column ``_cdc_seq`` is a struct of them, and Spark compares
structs field by field, exactly as Python compares these tuples):

1. ``phase``: 0 for snapshot reads (op ``r``), 1 for binlog events, so a snapshot row never
   overwrites a change captured from the binlog;
2. ``gtid``: the sequence number of a MariaDB GTID (``domain-server-seq``), monotonic across
   failovers within a domain; 0 where absent. MySQL GTIDs (``uuid:n``) are per-server counters and
   are not used for ordering;
3. ``file``, ``pos``, ``row``: the binlog file *number* (``mysql-bin.000123`` -> 123, compared as a
   number: string comparison breaks at ``.999999`` -> ``.1000000``), the position, the row in the event;
4. ``ts_ms``: the source timestamp, for sources without a binlog position;
5. ``partition``, ``offset``: the Kafka coordinates, the last tie-breaker.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

_TRAILING_DIGITS = re.compile(r"(\d+)\D*$")
_MARIADB_GTID = re.compile(r"\s*\d+-\d+-(\d+)\s*")

SEQ_FIELDS = (
    ("phase", "int"),
    ("gtid", "bigint"),
    ("file", "bigint"),
    ("pos", "bigint"),
    ("row", "int"),
    ("ts_ms", "bigint"),
    ("partition", "int"),
    ("offset", "bigint"),
)
SEQ_DDL = "struct<" + ",".join(f"{name}:{type_name}" for name, type_name in SEQ_FIELDS) + ">"


class Seq(NamedTuple):
    """One event's place in the order; compares as the tuple it is."""

    phase: int
    gtid: int
    file: int
    pos: int
    row: int
    ts_ms: int
    partition: int
    offset: int


def binlog_file_number(name: Any) -> int:
    """``mysql-bin.000123`` -> 123; 0 when there is no file name or no number in it."""
    if not isinstance(name, str):
        return 0
    m = _TRAILING_DIGITS.search(name)
    return int(m.group(1)) if m else 0


def gtid_sequence(gtid: Any) -> int:
    """The sequence number of a MariaDB GTID ``domain-server-seq``; 0 for MySQL GTIDs or none."""
    if not isinstance(gtid, str):
        return 0
    m = _MARIADB_GTID.fullmatch(gtid)
    return int(m.group(1)) if m else 0


def _int(value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return 0


_BOUND = {"int": 2**31, "bigint": 2**63}


def event_seq(op: str, source: dict[str, Any], payload_ts_ms: Any, partition: int, offset: int) -> Seq:
    """The ordering key of one event from its op, Debezium ``source`` block and Kafka coordinates;
    ValueError where a field does not fit its column (a position no binlog holds: the event could not
    be ordered, and is dead-lettered)."""
    seq = Seq(
        phase=0 if op == "r" else 1,
        gtid=gtid_sequence(source.get("gtid")),
        file=binlog_file_number(source.get("file")),
        pos=_int(source.get("pos")),
        row=_int(source.get("row")),
        ts_ms=_int(source.get("ts_ms", payload_ts_ms)),
        partition=partition,
        offset=offset,
    )
    for (name, type_name), value in zip(SEQ_FIELDS, seq, strict=True):
        if not -_BOUND[type_name] <= value < _BOUND[type_name]:
            raise ValueError(f"source position out of range: {name} {value} does not fit a {type_name}")
    return seq
