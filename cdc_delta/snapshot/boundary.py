"""The nightly snapshot's transaction boundary: with Debezium's transaction metadata, every table is cut at
the consistent point at or before the cut-off (:func:`cdc_delta.consistency.read.point_before`), the source's
last transaction committed before it, never half of one, and never a change committed after it.

Once the stream has passed the cut-off on every partition (:mod:`.readiness`), every transaction committed
before it has its changes and its END landed, unless a change is missing (a dead letter): readiness then
waits, naming the transaction and what it lacks. Without transaction metadata the snapshot is as of the
landing that passed the cut-off, as it always was; where the point cannot be had (ENDs on several
partitions), too, with a warning."""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from cdc_delta.config import AppConfig
from cdc_delta.consistency.point import Point
from cdc_delta.consistency.read import NO_METADATA, point_before

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Boundary:
    """Where the snapshot cuts the tables."""

    point: Point | None
    """The consistent point at or before the cut-off; None: as of the landing (no transaction metadata, or
    ``--at-landing``)."""
    waiting: str | None = None
    """Not ready: the transaction committed before the cut-off that has not landed whole."""

    def describe(self) -> str:
        point = self.point
        if self.waiting is not None:
            return f"{self.waiting}, committed before the cut-off"
        if point is None:
            return "the tables as of that landing (no transaction metadata, or --at-landing)"
        if point.txn_id is None:
            return "no source transaction committed before the cut-off: the tables before the first"
        return f"the tables at the source's last transaction before the cut-off, {point.txn_id}{_when(point)}"


def _when(point: Point) -> str:
    if point.source_ts_ms is None:
        return ""
    at = dt.datetime.fromtimestamp(point.source_ts_ms / 1000, dt.timezone.utc)
    return f" (committed {at:%Y-%m-%d %H:%M:%S} UTC)"


def boundary_at(config: AppConfig, cutoff: dt.datetime, land_seq: int) -> Boundary:
    """The boundary of a snapshot whose cut-off the stream passed at landing ``land_seq``."""
    found = point_before(config, round(cutoff.timestamp() * 1000), land_seq)
    if found.unavailable is not None:
        if found.unavailable != NO_METADATA:
            logger.warning(
                "the snapshot is cut at landing %d, not at a source transaction: %s", land_seq, found.unavailable
            )
        return Boundary(None)
    if found.waiting is not None:
        return Boundary(found.point, waiting=found.waiting.line())
    return Boundary(found.point)
