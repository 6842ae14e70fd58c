"""Kafka's side of a probe: the newest row event of each of the table's partitions (which records the
stream must have applied, and whether it has: :mod:`cdc_delta.kafka.applied`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from cdc_delta.config import AppConfig, TableConfig
from cdc_delta.events.envelope import OK, Decoded
from cdc_delta.kafka.applied import Partition
from cdc_delta.kafka.newest import newest_decoded


@dataclass(frozen=True)
class NewestEvent:
    """The newest row event of one partition for the table, below the end offset the stream passed."""

    topic: str
    partition: int
    offset: int
    key: dict[str, Any]


def newest_events(
    config: AppConfig, table: TableConfig, ends: dict[Partition, int], look_back: int = 20
) -> list[NewestEvent]:
    """Per partition, the newest of its last ``look_back`` records that is a row event of ``table``."""

    def keep(decoded: Decoded) -> bool:
        return decoded.status == OK and decoded.table == table.name and decoded.row_json is not None

    found = newest_decoded(config, ends, keep, f"{config.app_id}-check", look_back)
    out = []
    for (topic, partition), newest in sorted(found.items()):
        values = json.loads(newest.decoded.row_json or "{}")
        out.append(NewestEvent(topic, partition, newest.offset, {k: values[k] for k in table.key}))
    return out
