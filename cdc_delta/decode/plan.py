"""The decode plan of a config: what the decoders need of it, small and picklable for the executors."""

from __future__ import annotations

from cdc_delta.config import AppConfig
from cdc_delta.events.envelope import DecodePlan
from cdc_delta.events.routing import Router


def decode_plan(config: AppConfig) -> DecodePlan:
    return DecodePlan(
        router=Router(config.tables),
        keys={t.name: tuple(t.key) for t in config.tables},
        columns={t.name: dict(t.columns) for t in config.tables},
        truncate_policy=config.truncate_policy,
        signal_table=config.repair.signal_table,
    )
