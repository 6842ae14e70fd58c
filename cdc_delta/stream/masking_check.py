"""The stream's check at start that masked columns arrive masked: the newest records of each masked
table's topics, decoded as the stream decodes them (:mod:`cdc_delta.events.masking` judges each).

- A column ``mask:`` names that the table's records do not have (misspelt) stops the stream (a pattern
  entry's ``mask:`` names the columns to mask in those of its tables that have them); so does a masked
  column in the record key (Debezium never masks the key), or one no connector setting masks (not text).
- A masked column that arrives unmasked stops it, unless a connector on the Kafka Connect worker masks it
  now (``connectors apply --config`` was run since): the records written before are dead-lettered with
  the column masked, and the log says how to bring the table's rows masked.

Every batch judges its records the same way, so that a record unmasked never lands whatever this check
saw; this check only says so before the stream starts, in one line."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from cdc_delta.config import AppConfig, TableConfig
from cdc_delta.connect.client import ConnectClient
from cdc_delta.connect.http import ConnectHttp
from cdc_delta.decode.batch import decoder_for
from cdc_delta.decode.plan import decode_plan
from cdc_delta.events.envelope import OK, Decoded
from cdc_delta.events.masking import NOT_LANDED, OUT_OF_MASK, missing_columns
from cdc_delta.exceptions import ConfigError, ConnectorError
from cdc_delta.kafka.applied import end_offsets
from cdc_delta.kafka.newest import Newest, newest_decoded

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Unmasked:
    table: str
    entry: TableConfig
    where: str
    """Which record: topic, partition, offset."""
    reason: str


def check_masking(config: AppConfig, config_path: str) -> None:
    """Raise :class:`ConfigError` (one line) where a masked table's newest records show a misspelt column,
    a masked column in the record key, a column no connector setting can mask, or a column the connectors
    do not mask; log a warning where they arrived unmasked but a connector masks them now. Tables whose
    topics hold no record yet are not judged."""
    key_columns = decoder_for(config, decode_plan(config)).key_columns
    unmasked: list[Unmasked] = []
    for entry in (t for t in config.tables if t.mask):
        rules = {c: (r.kind, r.n) for c, r in entry.mask_rules().items()}
        for (topic, partition), newest in sorted(_newest(config, entry).items()):
            decoded = newest.decoded
            table, where = str(decoded.table), f"topic {topic} partition {partition}, offset {newest.offset}"
            keyed = missing_columns({c: dict[str, str]() for c in key_columns(newest.key)}, rules)
            if len(keyed) < len(rules):
                named = sorted(set(rules) - set(keyed))
                raise ConfigError(
                    f"table {table}: mask: {', '.join(named)} is in the record key ({where}), which Debezium never "
                    f"masks: take it out of mask: in {config_path}"
                )
            if decoded.redacted is not None:
                arrived, _, _ = (decoded.reason or "").partition(NOT_LANDED)
                if OUT_OF_MASK in (decoded.reason or ""):
                    raise ConfigError(f"{arrived} ({where}): take it out of mask: in {config_path}")
                unmasked.append(Unmasked(table, entry, where, arrived))
                continue
            names: dict[str, dict[str, str]] = {str(c[0]): {} for c in json.loads(decoded.schema_json or "[]")}
            missing = missing_columns(names, rules)
            if missing and not entry.is_pattern:  # a pattern's mask: the columns of those tables that have them
                raise ConfigError(
                    f"table {table}: mask: names column(s) {', '.join(missing)}, which its records do not have "
                    f"({where}): correct mask: in {config_path}"
                )
    if not unmasked:
        return
    masking = _masked_by_connectors(config)
    for found in unmasked:
        if masking is not None and _masks(config, found.entry, masking):
            logger.warning(
                "%s (%s), and a connector masks it now: the changes that arrived unmasked are dead-lettered "
                "with it masked; `cdc-delta resnapshot --table %s` brings the table's rows masked",
                found.reason,
                found.where,
                found.table,
            )
            continue
        unknown = "" if masking is not None else f" (Kafka Connect at {config.connect.url} did not answer)"
        raise ConfigError(
            f"{found.reason} ({found.where}): no connector masks it{unknown}. Run `cdc-delta connectors apply "
            f"--config {config_path}`, then start the stream again: changes that arrived unmasked are "
            f"dead-lettered with the column masked, and `cdc-delta resnapshot --table {found.table}` brings the "
            "table's rows masked"
        )


def _newest(config: AppConfig, entry: TableConfig) -> dict[tuple[str, int], Newest]:
    def keep(decoded: Decoded) -> bool:
        if decoded.table is None or decoded.op not in ("c", "u", "d", "r"):
            return False
        ours = decoded.table == entry.name or config.pattern_entry(decoded.table) is entry
        return ours and (decoded.status == OK or decoded.redacted is not None)

    return newest_decoded(config, end_offsets(config, entry), keep, f"{config.app_id}-masking-check")


def _masked_by_connectors(config: AppConfig) -> dict[str, set[str]] | None:
    """Per masking setting of the worker's connectors, the column patterns it lists; None where the worker
    does not answer."""
    client = ConnectClient(ConnectHttp(config.connect.model_copy(update={"retry_seconds": 5})))
    found: dict[str, set[str]] = {}
    try:
        for name in client.connectors():
            for key, value in (client.config(name) or {}).items():
                if key.startswith(("column.mask.", "column.truncate.")):
                    found.setdefault(key, set()).update(c.strip() for c in value.split(","))
    except ConnectorError as exc:
        logger.debug("asking Kafka Connect which columns its connectors mask: %s", exc)
        return None
    return found


def _masks(config: AppConfig, entry: TableConfig, masking: dict[str, set[str]]) -> bool:
    """Whether the connectors' ``masking`` settings cover every column of ``entry``'s ``mask:``."""
    salt = config.masking.salt()
    return all(
        set(entry.source_columns(column)) <= masking.get(rule.debezium_key(salt), set())
        for column, rule in entry.mask_rules().items()
    )
