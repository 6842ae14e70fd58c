"""The decode plan of a config: what the decoders need of it, small and picklable for the executors."""

from __future__ import annotations

from cdc_delta.config import AppConfig
from cdc_delta.events.envelope import DecodePlan
from cdc_delta.events.masking import Masks
from cdc_delta.events.routing import Router


def decode_plan(config: AppConfig, with_salt: bool = False) -> DecodePlan:
    """The plan of ``config``. ``with_salt``: the salt of the ``hash`` mask rules is read (the stream, which
    masks the dead letters of records that arrive unmasked); elsewhere such records are refused alike,
    nothing kept of them."""
    rules = {t.name: {c: (r.kind, r.n) for c, r in t.mask_rules().items()} for t in config.tables if t.mask}
    hashed = any(kind == "hash" for table in rules.values() for kind, _ in table.values())
    salt = config.masking.salt() if with_salt and hashed else ""
    return DecodePlan(
        router=Router(config.tables),
        keys={t.name: tuple(t.key) for t in config.tables},
        columns={t.name: dict(t.columns) for t in config.tables},
        truncate_policy=config.truncate_policy,
        signal_table=config.repair.signal_table,
        masks=Masks(rules, salt),
    )
