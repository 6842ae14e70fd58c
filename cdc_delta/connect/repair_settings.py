"""The connector settings ``cdc-delta resnapshot`` needs, added by ``connectors apply`` where a file lacks
them (a setting the file gives is kept as it is): a Kafka signal channel that cdc-delta sends Debezium's
``execute-snapshot`` signal on, the signal table that watermarks incremental snapshots (named where the
connector captures one database), and a notification topic that reports the snapshot's progress. The
topics are named ``<topic.prefix>-signal`` and ``<topic.prefix>-notifications``: outside the tables'
``<topic.prefix>.<db>.<table>``, so a pattern over those does not take them in. And Debezium's transaction
metadata (``provide.transaction.metadata``): every change with its source transaction, and the transactions'
ENDs on ``<topic.prefix>.transaction``, which the changelog lands (:mod:`cdc_delta.events.transactions`)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from cdc_delta.connect.files import ConnectorFile

_PLAIN_NAME = re.compile(r"[A-Za-z0-9_$]+")


def _channels(text: str) -> list[str]:
    return [part.strip().lower() for part in text.split(",") if part.strip()]


def repair_settings(name: str, config: Mapping[str, str], signal_table: str) -> dict[str, str]:
    """The settings to add to connector ``name``'s ``config`` (none where it has them, or has no
    ``topic.prefix`` to name its topics by). The Kafka channel is added only where the brokers are known
    (the schema history's), with the security settings of the schema history's consumer."""
    prefix = config.get("topic.prefix")
    if not prefix:
        return {}
    add: dict[str, str] = {}

    def default(key: str, value: str | None) -> None:
        if key not in config and value:
            add[key] = value

    history = "schema.history.internal."
    bootstrap = config.get("signal.kafka.bootstrap.servers") or config.get(f"{history}kafka.bootstrap.servers")
    default("signal.enabled.channels", "source,kafka" if bootstrap else "source")
    channels = _channels(config.get("signal.enabled.channels", add.get("signal.enabled.channels", "")))
    if "kafka" in channels:
        default("signal.kafka.topic", f"{prefix}-signal")
        default("signal.kafka.bootstrap.servers", bootstrap)
        default("signal.kafka.groupId", f"{name}-signal")  # a group of its own: a new one reads old signals again
        for key, value in config.items():  # the brokers' security, as the schema history's consumer has it
            if key.startswith(f"{history}consumer."):
                default("signal.consumer." + key.removeprefix(f"{history}consumer."), value)
    databases = config.get("database.include.list", "")
    if config.get("read.only", "false").lower() != "true" and _PLAIN_NAME.fullmatch(databases):
        default("signal.data.collection", f"{databases}.{signal_table}")
    if "signal.data.collection" in config or "signal.data.collection" in add:
        default("incremental.snapshot.watermarking.strategy", "insert_delete")  # the table stays empty
    default("provide.transaction.metadata", "true")
    default("notification.enabled.channels", "sink")
    notifications = _channels(config.get("notification.enabled.channels", add.get("notification.enabled.channels", "")))
    if "sink" in notifications:
        default("notification.sink.topic.name", f"{prefix}-notifications")
    return add


def with_repair_settings(file: ConnectorFile, signal_table: str) -> tuple[ConnectorFile, dict[str, str]]:
    """``file`` with :func:`repair_settings` added, and what was added."""
    add = repair_settings(file.name, file.config, signal_table)
    return ConnectorFile(file.name, {**file.config, **add}, file.source), add
