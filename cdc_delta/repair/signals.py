"""Debezium's ``execute-snapshot`` signal, sent on the connector's Kafka signal topic or as a row of its
signal table.

The signal (debezium/debezium, tag v3.5.0.Final, ``ExecuteSnapshot``, ``AbstractSnapshotSignal``): ``{"id",
"type": "execute-snapshot", "data": {"data-collections": [...], "type": "INCREMENTAL" | "BLOCKING",
"additional-conditions": [{"data-collection", "filter"}]}}``. An incremental snapshot matches a
condition's ``data-collection`` as a regular expression (``AbstractIncrementalSnapshotContext``) and
pastes its filter after its own condition with ``AND`` and no parentheses
(``JdbcConnection.buildSelectWithRowLimits``), so the filter is sent in parentheses; a blocking snapshot
parses ``data-collection`` as a table id and takes the filter as the whole SELECT of the table, as a
``snapshot.select.statement.overrides`` (``RelationalSnapshotChangeEventSource
.getBlockingSnapshottingTask``). On Kafka the key must be the connector's ``topic.prefix``
(``KafkaSignalChannel``); in the signal table the row is (id, type, data), read by position.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from cdc_delta.config import AppConfig
from cdc_delta.exceptions import RepairError
from cdc_delta.kafka.client import brokers
from cdc_delta.repair.connector import SignalRoute


def new_signal_id() -> str:
    """Debezium's incremental notifications carry the signal's id: ``resnapshot`` follows its own."""
    return f"cdc-delta-{uuid.uuid4().hex[:20]}"


def snapshot_signal(signal_id: str, collections: list[str], blocking: bool, where: str | None) -> dict[str, Any]:
    """The ``execute-snapshot`` signal for ``collections`` (``db.table`` each)."""
    data: dict[str, Any] = {"data-collections": collections, "type": "BLOCKING" if blocking else "INCREMENTAL"}
    if where:
        data["additional-conditions"] = [
            {"data-collection": c, "filter": f"SELECT * FROM {_quoted(c)} WHERE ({where})"}
            if blocking
            else {"data-collection": re.escape(c), "filter": f"({where})"}
            for c in collections
        ]
    return {"id": signal_id, "type": "execute-snapshot", "data": data}


def _quoted(collection: str) -> str:
    db, table = collection.split(".", 1)
    return ".".join("`" + part.replace("`", "``") + "`" for part in (db, table))


def send(config: AppConfig, route: SignalRoute, signal: dict[str, Any]) -> str:
    """Send ``signal`` through the connector's Kafka channel, else its signal table; returns where it went."""
    if route.kafka_topic is not None:
        _produce(config, route.kafka_topic, route.prefix, json.dumps(signal))
        return f"Kafka topic {route.kafka_topic}"
    assert route.signal_table is not None  # SignalRoute.refusal names the fix where neither is there
    _insert(config, route.signal_table, signal)
    return f"signal table {route.signal_table}"


def _produce(config: AppConfig, topic: str, key: str, value: str) -> None:
    from confluent_kafka import KafkaException, Producer

    target = brokers(config.kafka)
    _ensure_topic(target.settings, target.bootstrap, topic)
    producer = Producer({**target.settings, "bootstrap.servers": target.bootstrap, "log_level": 0, "acks": "all"})
    failed: list[str] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failed.append(str(error))

    try:
        producer.produce(topic, value=value.encode(), key=key.encode(), partition=0, on_delivery=delivered)
    except KafkaException as exc:
        raise RepairError(f"cannot send the signal to Kafka topic {topic}: {exc}") from None
    if producer.flush(30) or failed:
        reason = failed[0] if failed else "not delivered within 30 s"
        raise RepairError(
            f"cannot send the signal to Kafka topic {topic} at {target.bootstrap}: {reason} (kafka.bootstrap_servers)"
        )


def _ensure_topic(settings: dict[str, str], bootstrap: str, topic: str) -> None:
    """Make the signal topic, one partition (Debezium reads partition 0 only), where it is missing: brokers
    that create topics on first use would make it with their default partition count."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({**settings, "bootstrap.servers": bootstrap, "log_level": 0})
    try:
        if topic in admin.list_topics(timeout=10).topics:
            return
        admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(30)
    except KafkaException as exc:
        if "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise RepairError(f"cannot make the signal topic {topic} at {bootstrap}: {exc}") from None


def _insert(config: AppConfig, table: str, signal: dict[str, Any]) -> None:
    import pymysql

    from cdc_delta.source_db import connect, quoted

    db, name = table.split(".", 1)
    conn = connect(config.source)
    try:
        with conn.cursor() as cur:
            cur.execute(
                f"INSERT INTO {quoted(db)}.{quoted(name)} VALUES (%s, %s, %s)",
                (signal["id"], signal["type"], json.dumps(signal["data"])),
            )
    except pymysql.err.MySQLError as exc:
        raise RepairError(
            f"cannot insert the signal into {table} as {config.source.user}: {exc.args[-1]} (the source user needs "
            "INSERT on the signal table; or enable the connector's Kafka signal channel)"
        ) from None
    finally:
        conn.close()
