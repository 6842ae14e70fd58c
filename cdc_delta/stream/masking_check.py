"""The stream's check at start that masked columns arrive masked: the newest records of each masked
table's topics, decoded as the stream decodes them (:mod:`cdc_delta.events.masking` judges each).

- A column ``mask:`` names that the table's records do not have (misspelt) stops the stream (a pattern
  entry's ``mask:`` names the columns to mask in those of its tables that have them).
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
from cdc_delta.events.envelope import OK, Decoded
from cdc_delta.exceptions import ConfigError, ConnectorError
from cdc_delta.kafka.applied import end_offsets
from cdc_delta.kafka.newest import newest_decoded

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Unmasked:
    table: str
    entry: TableConfig
    where: str
    """Which record: topic, partition, offset."""
    reason: str


def check_masking(config: AppConfig, config_path: str) -> None:
    """Raise :class:`ConfigError` (one line) where a masked table's newest records show a misspelt column
    or a column the connectors do not mask; log a warning where they arrived unmasked but a connector
    masks them now. Tables whose topics hold no record yet are not judged."""
    unmasked: list[Unmasked] = []
    for entry in (t for t in config.tables if t.mask):
        for (topic, partition), (offset, decoded) in sorted(_newest(config, entry).items()):
            table, where = str(decoded.table), f"topic {topic} partition {partition}, offset {offset}"
            if decoded.redacted is not None:
                unmasked.append(Unmasked(table, entry, where, (decoded.reason or "").split(", so the connector")[0]))
                continue
            names = {str(c[0]).lower() for c in json.loads(decoded.schema_json or "[]")}
            missing = [c for c in entry.mask if c.lower() not in names]
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


def _newest(config: AppConfig, entry: TableConfig) -> dict[tuple[str, int], tuple[int, Decoded]]:
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
    salt = (config.masking.password() or "").strip()
    return all(
        set(entry.source_columns(column)) <= masking.get(rule.debezium_key(salt), set())
        for column, rule in entry.mask_rules().items()
    )
