"""Which Debezium connector captures a source table, and how it takes signals and reports snapshots: what
``resnapshot`` needs of its config on the Kafka Connect worker.

Debezium 3.5's settings (debezium/debezium, tag v3.5.0.Final): ``signal.enabled.channels`` (default
``source``; ``CommonConnectorConfig.SIGNAL_ENABLED_CHANNELS``), ``signal.kafka.topic`` (default
``<topic.prefix>-signal``; ``KafkaSignalChannel``, which reads partition 0 and takes a signal whose key is
``topic.prefix``), ``signal.data.collection`` (the signal table, which also gives incremental snapshots
their watermarks: without it and without ``read.only``, the MariaDB/MySQL connectors run no incremental
snapshot, ``MariaDbChangeEventSourceFactory``), ``notification.enabled.channels`` with ``sink`` and
``notification.sink.topic.name`` (``SinkNotificationChannel``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from cdc_delta.exceptions import RepairError

APPLY_ADDS = "`cdc-delta connectors apply <its file>` adds it"


@dataclass(frozen=True)
class SignalRoute:
    """A connector as ``resnapshot`` uses it."""

    connector: str
    prefix: str
    """``topic.prefix``: a signal's key on the Kafka channel, and the start of its topics' names."""
    kafka_topic: str | None
    """The Kafka channel's topic (None: the channel is not enabled)."""
    signal_table: str | None
    """``signal.data.collection`` (``db.table``)."""
    source_channel: bool
    """Whether the connector reads signals from its signal table."""
    read_only: bool
    """``read.only``: incremental snapshots watermarked by GTIDs instead of the signal table."""
    notification_topic: str | None
    """Where the connector reports its snapshots' progress (None: not enabled)."""

    @classmethod
    def of(cls, name: str, config: Mapping[str, str]) -> SignalRoute:
        prefix = config.get("topic.prefix", "")
        channels = _listed(config.get("signal.enabled.channels", "source"))
        notifications = _listed(config.get("notification.enabled.channels", ""))
        return cls(
            connector=name,
            prefix=prefix,
            kafka_topic=config.get("signal.kafka.topic", f"{prefix}-signal") if "kafka" in channels else None,
            signal_table=config.get("signal.data.collection") or None,
            source_channel="source" in channels,
            read_only=config.get("read.only", "false").strip().lower() == "true",
            notification_topic=config.get("notification.sink.topic.name") if "sink" in notifications else None,
        )

    def refusal(self, blocking: bool) -> str | None:
        """Why this connector cannot run the snapshot asked for, with the fix; None where it can."""
        name = self.connector
        if self.kafka_topic is None and not (self.source_channel and self.signal_table):
            return (
                f"connector {name} has no signal channel: set signal.enabled.channels: source,kafka and "
                f"signal.kafka.topic ({APPLY_ADDS})"
            )
        if not blocking and self.signal_table is None and not self.read_only:
            return (
                f"connector {name} cannot run an incremental snapshot: it has no signal table for its watermarks "
                f"(signal.data.collection: <database>.debezium_signal; {APPLY_ADDS} where it captures one "
                "database, then create the table); or re-read with --blocking"
            )
        if self.notification_topic is None:
            return (
                f"connector {name} does not report its snapshots, which resnapshot follows: set "
                f"notification.enabled.channels: sink and notification.sink.topic.name ({APPLY_ADDS})"
            )
        return None


def _listed(text: str) -> set[str]:
    return {part.strip().lower() for part in text.split(",") if part.strip()}


def _full_match(patterns: str | None, text: str) -> bool | None:
    """Whether ``text`` fully matches one of Debezium's comma-separated, case-insensitive regexes (None:
    no list)."""
    if not patterns:
        return None
    return any(re.fullmatch(p.strip(), text, re.IGNORECASE) for p in patterns.split(",") if p.strip())


def captures(config: Mapping[str, str], source: str, topics: list[str]) -> bool:
    """Whether a connector with ``config`` captures the source table ``db.table`` whose topics are
    ``topics`` (empty: not known): its include and exclude lists take the table, and its topic prefix
    starts the table's topics."""
    db = source.split(".", 1)[0]
    prefix = config.get("topic.prefix")
    if not prefix or (topics and not any(t.startswith(f"{prefix}.") for t in topics)):
        return False
    if _full_match(config.get("database.include.list"), db) is False:
        return False
    if _full_match(config.get("database.exclude.list"), db):
        return False
    if _full_match(config.get("table.include.list"), source) is False:
        return False
    return not _full_match(config.get("table.exclude.list"), source)


def connector_for(configs: Mapping[str, Mapping[str, str]], source: str, topics: list[str], url: str) -> str:
    """The one connector among ``configs`` (by name) that captures ``source``; :class:`RepairError` where
    none or several do."""
    found = sorted(name for name, config in configs.items() if captures(config, source, topics))
    if len(found) == 1:
        return found[0]
    if not found:
        known = ", ".join(sorted(configs)) or "none"
        raise RepairError(
            f"no connector on {url} captures {source} (connectors: {known}): is it in a connector's "
            "database.include.list? Name the connector with --connector"
        )
    raise RepairError(f"connectors {', '.join(found)} all capture {source}: name one with --connector")
