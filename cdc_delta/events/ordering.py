"""The ordering key: a total order of the change events of one key, stable across restarts and replays.

Fields, compared in this order (the Delta column ``_cdc_seq`` is a struct of them, and Spark compares
structs field by field, exactly as Python compares these tuples):

1. ``phase``: 0 for the reads of the connector's initial snapshot, 1 for binlog events and for the
   reads of a snapshot taken while the binlog is captured (incremental or blocking), which are placed
   at the binlog position they were read at (:func:`placed_read`). An initial snapshot's reads all sit
   at the position streaming starts from, so phase 0 puts them below every binlog change, as they are;
   a later snapshot's read replaces every older change of its key and never a newer one;
2. ``gtid``: the sequence number of a MariaDB GTID (``domain-server-seq``), monotonic across
   failovers within a domain; 0 where absent. MySQL GTIDs (``uuid:n``) are per-server counters and
   are not used for ordering;
3. ``file``, ``pos``, ``row``: the binlog file *number* (``mysql-bin.000123`` -> 123, compared as a
   number: string comparison breaks at ``.999999`` -> ``.1000000``), the position, the row in the event;
4. ``ts_ms``: the source timestamp, for sources without a binlog position;
5. ``partition``, ``offset``: the Kafka coordinates, the last tie-breaker.

A placed read takes ``row`` -1: at the same (``gtid``, ``file``, ``pos``) the binlog event there wins
(the read was taken before that event was handled, see :func:`placed_read`).
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


INCREMENTAL = "incremental"
"""``source.snapshot`` of an incremental snapshot's read (Debezium's ``SnapshotRecord.INCREMENTAL``)."""
READ_ROW = -1
"""The ``row`` of a placed read: below every row of the binlog event at its position."""


def placed_read(source: dict[str, Any], file: int, pos: int) -> bool:
    """Whether a read (op ``r``) is placed at its binlog position (phase 1) rather than below the binlog
    (phase 0, an initial snapshot's read). Debezium 3.5 (tag v3.5.0.Final, commit f6f63d61):

    - an incremental snapshot's read has ``snapshot: "incremental"`` (``CommonOffsetContext
      .incrementalSnapshotEvents``) and the source position of the binlog event that closed its chunk's
      window (``AbstractIncrementalSnapshotChangeEventSource.sendWindowEvents``, called by
      ``CloseIncrementalSnapshotWindow`` with the streaming offset context). A change of the key logged
      before the window opened is in the read; one logged inside the window drops the read
      (``deduplicateWindow``); one logged after it comes after the read in Kafka. So the read is newer
      than every change at a smaller position and older than every change at a larger one;
    - a blocking snapshot's read carries the streaming position where streaming paused
      (``ChangeEventSourceCoordinator.doBlockingSnapshot`` reuses the live offset context): ``pos`` of
      the next event not yet handled and the ``gtid`` of the last transaction started, and the same
      ``snapshot`` markers as the initial snapshot (``true``, ``first``, ``last``...);
    - an initial snapshot's read has no ``gtid``: its position comes from ``SHOW MASTER STATUS``, and
      no GTID is set while it runs (``MariaDbSnapshotChangeEventSource.determineSnapshotOffset``).

    So a read is placed where it is an incremental snapshot's, or has a ``gtid`` (a blocking snapshot's),
    and names a binlog file and position; a read with neither (an initial snapshot's, or a blocking
    snapshot's taken before any transaction was streamed since the connector started) stays below the
    binlog: it fills a missing key and never overwrites one."""
    if file <= 0 or pos <= 0:
        return False
    gtid = source.get("gtid")
    return source.get("snapshot") == INCREMENTAL or (isinstance(gtid, str) and gtid != "")


def event_seq(op: str, source: dict[str, Any], payload_ts_ms: Any, partition: int, offset: int) -> Seq:
    """The ordering key of one event from its op, Debezium ``source`` block and Kafka coordinates;
    ValueError where a field does not fit its column (a position no binlog holds: the event could not
    be ordered, and is dead-lettered)."""
    file = binlog_file_number(source.get("file"))
    pos = _int(source.get("pos"))
    row = _int(source.get("row"))
    ts_ms = _int(source.get("ts_ms", payload_ts_ms))
    phase = 1
    if op == "r":
        if placed_read(source, file, pos):
            row = READ_ROW
        else:
            phase = 0
    seq = Seq(
        phase=phase,
        gtid=gtid_sequence(source.get("gtid")),
        file=file,
        pos=pos,
        row=row,
        ts_ms=ts_ms,
        partition=partition,
        offset=offset,
    )
    for (name, type_name), value in zip(SEQ_FIELDS, seq, strict=True):
        if not -_BOUND[type_name] <= value < _BOUND[type_name]:
            raise ValueError(f"source position out of range: {name} {value} does not fit a {type_name}")
    return seq
