"""The column masking settings ``connectors apply`` adds to every connector it applies with ``--config``:
per mask rule, Debezium's setting listing the source columns (``db.table.column`` regular expressions)
masked that way. A column named for a table another connector captures matches nothing there, so every
connector gets every rule (masking more is the safe side). Where the file has the setting already, the
columns are added to its list.

The salt of ``hash`` is part of the setting's *name* (``column.mask.hash.v2.SHA-256.with.salt.<salt>``),
which no config provider can hide: cdc-delta never prints it (:func:`~cdc_delta.connect.files.shown_key`),
and Kafka Connect keeps it in its config topic, which its ACLs must guard like any connector secret."""

from __future__ import annotations

from cdc_delta.config import AppConfig
from cdc_delta.connect.files import ConnectorFile


def masking_settings(config: AppConfig) -> dict[str, str]:
    """Debezium's settings for every ``mask:`` of ``config``'s tables (the salt read now, where needed)."""
    columns: dict[str, list[str]] = {}
    salt: str | None = None
    for table in config.tables:
        for column, rule in table.mask_rules().items():
            if rule.kind == "hash" and salt is None:
                salt = config.masking.salt()
            key = rule.debezium_key(salt or "")
            columns.setdefault(key, []).extend(table.source_columns(column))
    return {key: ",".join(dict.fromkeys(regexes)) for key, regexes in columns.items()}


def dropped_masking(removed: dict[str, str]) -> list[str]:
    """The column masking settings among those a new config would remove from a connector."""
    return sorted(k for k in removed if k.startswith(("column.mask.", "column.truncate.")))


def with_masking(file: ConnectorFile, config: AppConfig) -> tuple[ConnectorFile, list[str]]:
    """``file`` with :func:`masking_settings` added (to a list the file has, deduplicated), and the keys
    added or extended."""
    merged = dict(file.config)
    touched = []
    for key, value in masking_settings(config).items():
        have = [c for c in merged.get(key, "").split(",") if c.strip()]
        wanted = list(dict.fromkeys([*have, *value.split(",")]))
        if wanted != have:
            merged[key] = ",".join(wanted)
            touched.append(key)
    return ConnectorFile(file.name, merged, file.source), touched
