"""A re-snapshot that ``accept-gap`` started and ``resnapshot`` finishes.

``accept-gap`` moves the stream past a gap, then (where the connector takes signals) has Debezium read the
tables the lost records fed at once, while the stream is started again. What the finish needs of that
start is recorded in the repair log (:mod:`cdc_delta.delta.repair_log`, kind ``resnapshot-started``, this
as its note): the newest ordering key the table held before the signal and where its topics ended then
(the rows the source lacks are found from them, :mod:`.missing`), and what Debezium reported of the read.
``cdc-delta resnapshot --table T`` then follows that re-snapshot (it does not read the table again): it
waits until the stream has merged the rows read, names the rows the source lacks, and records the repair.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from cdc_delta.delta import repair_log
from cdc_delta.events.ordering import Seq
from cdc_delta.kafka.applied import Partition


@dataclass(frozen=True)
class StartedRead:
    """What a finish needs of a re-snapshot started earlier."""

    signal_id: str
    held: Seq | None
    """The newest ordering key the table held before the signal (None: it held nothing)."""
    before: dict[Partition, int]
    """The end offsets of the table's topics before the signal."""
    rows_read: int | None
    status: str
    """Debezium's status of the table's scan (SUCCEEDED, EMPTY)."""

    def note(self) -> str:
        return json.dumps(
            {
                "signal_id": self.signal_id,
                "held": list(self.held) if self.held is not None else None,
                "before": [[topic, partition, offset] for (topic, partition), offset in sorted(self.before.items())],
                "rows_read": self.rows_read,
                "status": self.status,
            }
        )

    @classmethod
    def of_note(cls, note: str) -> StartedRead:
        data = json.loads(note)
        return cls(
            data["signal_id"],
            Seq(*data["held"]) if data["held"] is not None else None,
            {(str(t), int(p)): int(o) for t, p, o in data["before"]},
            data["rows_read"],
            data["status"],
        )


def unfinished(log: list[repair_log.Entry]) -> dict[str, tuple[repair_log.Entry, StartedRead]]:
    """The tables whose started re-snapshot no repair followed since (a later gap voids one too)."""
    out: dict[str, tuple[repair_log.Entry, StartedRead]] = {}
    for entry in log:
        if entry.table is None:
            continue
        if entry.kind == repair_log.STARTED and entry.note:
            out[entry.table] = (entry, StartedRead.of_note(entry.note))
        elif entry.kind in (repair_log.GAP, repair_log.RESNAPSHOT):
            out.pop(entry.table, None)
    return out
