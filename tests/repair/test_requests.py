"""What resnapshot makes of a connector's config, the signal it sends, the notifications it reads, and what
``connectors apply`` adds for it: no Spark, no services."""

from __future__ import annotations

import json

import pytest

from cdc_delta.connect.files import ConnectorFile
from cdc_delta.connect.repair_settings import repair_settings, with_repair_settings
from cdc_delta.exceptions import RepairError
from cdc_delta.repair.connector import SignalRoute, captures, connector_for
from cdc_delta.repair.notifications import Notification
from cdc_delta.repair.signals import snapshot_signal

BASE = {
    "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
    "topic.prefix": "dbserver1",
    "database.include.list": "inventory",
    "schema.history.internal.kafka.bootstrap.servers": "kafka:9092",
}


def test_apply_adds_what_resnapshot_needs_and_keeps_what_the_file_gives() -> None:
    assert repair_settings("inv", BASE, "debezium_signal") == {
        "signal.enabled.channels": "source,kafka",
        "signal.kafka.topic": "dbserver1-signal",
        "signal.kafka.bootstrap.servers": "kafka:9092",
        "signal.kafka.groupId": "inv-signal",
        "signal.data.collection": "inventory.debezium_signal",
        "incremental.snapshot.watermarking.strategy": "insert_delete",
        "provide.transaction.metadata": "true",
        "notification.enabled.channels": "sink",
        "notification.sink.topic.name": "dbserver1-notifications",
    }
    own = {
        **BASE,
        "signal.enabled.channels": "source",
        "notification.enabled.channels": "log",
        "provide.transaction.metadata": "false",  # the file's own choice is kept
    }
    assert repair_settings("inv", own, "debezium_signal") == {
        "signal.data.collection": "inventory.debezium_signal",
        "incremental.snapshot.watermarking.strategy": "insert_delete",
    }
    many = {**BASE, "database.include.list": "inventory,sales"}
    assert "signal.data.collection" not in repair_settings("inv", many, "debezium_signal")  # which database's?
    assert repair_settings("inv", {"connector.class": "x"}, "debezium_signal") == {}  # no topic.prefix
    no_brokers = {k: v for k, v in BASE.items() if "bootstrap" not in k}
    assert repair_settings("inv", no_brokers, "debezium_signal")["signal.enabled.channels"] == "source"
    secured = {**BASE, "schema.history.internal.consumer.security.protocol": "SASL_SSL"}
    assert repair_settings("inv", secured, "debezium_signal")["signal.consumer.security.protocol"] == "SASL_SSL"
    file, added = with_repair_settings(ConnectorFile("inv", dict(BASE), "f.yaml"), "sig")
    assert file.config == {**BASE, **added} and added["signal.data.collection"] == "inventory.sig"
    again, more = with_repair_settings(file, "sig")
    assert (again.config, more) == (file.config, {})  # applied twice: the same config


def route(**settings: str) -> SignalRoute:
    return SignalRoute.of("inv", {**BASE, **repair_settings("inv", BASE, "debezium_signal"), **settings})


def test_a_connector_without_a_way_to_take_or_report_the_snapshot_is_refused_with_the_fix() -> None:
    assert route().refusal(blocking=False) is None
    assert route().kafka_topic == "dbserver1-signal" and route().notification_topic == "dbserver1-notifications"
    none = route(**{"signal.enabled.channels": "source", "signal.data.collection": ""})
    assert "has no signal channel" in (none.refusal(blocking=True) or "")
    no_table = route(**{"signal.data.collection": ""})
    assert "cannot run an incremental snapshot" in (no_table.refusal(blocking=False) or "")
    assert no_table.refusal(blocking=True) is None  # a blocking snapshot needs no watermarks
    assert route(**{"signal.data.collection": "", "read.only": "true"}).refusal(blocking=False) is None
    quiet = route(**{"notification.enabled.channels": "log"})
    assert "does not report its snapshots" in (quiet.refusal(blocking=False) or "")
    by_table = route(**{"signal.enabled.channels": "source"})
    assert by_table.kafka_topic is None and by_table.refusal(blocking=False) is None  # the signal table takes it


def test_the_connector_of_a_table_is_the_one_that_captures_it() -> None:
    other = {**BASE, "topic.prefix": "crm", "database.include.list": "crm"}
    configs = {"inv": BASE, "crm": other}
    assert connector_for(configs, "inventory.orders", ["dbserver1.inventory.orders"], "http://c") == "inv"
    assert connector_for(configs, "crm.people", [], "http://c") == "crm"
    assert captures({**BASE, "table.exclude.list": r"inventory\.orders"}, "inventory.orders", []) is False
    assert captures({**BASE, "database.include.list": "INV.*"}, "inventory.x", []) is True  # case-insensitive
    with pytest.raises(RepairError, match=r"no connector on http://c captures sales.x \(connectors: crm, inv\)"):
        connector_for(configs, "sales.x", [], "http://c")
    with pytest.raises(RepairError, match="connectors crm, inv all capture"):
        connector_for({"inv": BASE, "crm": {**BASE, "topic.prefix": "dbserver1"}}, "inventory.x", [], "http://c")


def test_the_signal_is_debeziums_execute_snapshot_with_the_condition_in_parentheses() -> None:
    incremental = snapshot_signal("s1", ["inventory.orders"], blocking=False, where="id > 5 OR id < 2")
    assert incremental == {
        "id": "s1",
        "type": "execute-snapshot",
        "data": {
            "data-collections": ["inventory.orders"],
            "type": "INCREMENTAL",
            "additional-conditions": [{"data-collection": r"inventory\.orders", "filter": "(id > 5 OR id < 2)"}],
        },
    }
    blocking = snapshot_signal("s2", ["inventory.orders"], blocking=True, where="id > 5")
    assert blocking["data"]["type"] == "BLOCKING"
    assert blocking["data"]["additional-conditions"] == [
        {"data-collection": "inventory.orders", "filter": "SELECT * FROM `inventory`.`orders` WHERE (id > 5)"}
    ]
    assert "additional-conditions" not in snapshot_signal("s3", ["a.b"], blocking=False, where=None)["data"]


def test_notifications_are_read_from_the_connectors_json_with_or_without_schema() -> None:
    payload = {
        "id": "s1",
        "aggregate_type": "Incremental Snapshot",
        "type": "TABLE_SCAN_COMPLETED",
        "additional_data": {
            "scanned_collection": "inventory.orders",
            "total_rows_scanned": "300",
            "status": "SUCCEEDED",
        },
        "timestamp": 1,
    }
    for value in (json.dumps(payload), json.dumps({"schema": {"type": "struct"}, "payload": payload})):
        note = Notification.parse(value.encode())
        assert note == Notification("s1", "Incremental Snapshot", "TABLE_SCAN_COMPLETED", payload["additional_data"])
        assert note is not None and note.progress() == "inventory.orders: read 300 rows (SUCCEEDED)"
    assert Notification.parse(b"not json") is None and Notification.parse(b'{"id": 1}') is None
    started = Notification.parse(json.dumps({**payload, "type": "STARTED", "additional_data": None}).encode())
    assert started is not None and started.progress() == "started"


def test_a_started_resnapshot_is_recorded_whole_and_finished_once() -> None:
    """What accept-gap records of a re-snapshot it started is what resnapshot reads back to finish it; a
    repair recorded after it, or a later gap, ends it."""
    import datetime as dt

    from cdc_delta.delta.repair_log import GAP, RESNAPSHOT, STARTED, Entry, resnapshot_needed
    from cdc_delta.events.ordering import Seq
    from cdc_delta.repair.started import StartedRead, unfinished

    read = StartedRead(
        "sig-1", Seq(1, 0, 3, 4, 0, 5, 0, 9), {("t.orders", 0): 12, ("t.orders", 1): 0}, 300, "SUCCEEDED"
    )
    assert StartedRead.of_note(read.note()) == read
    empty = StartedRead("sig-2", None, {}, 0, "EMPTY")
    assert StartedRead.of_note(empty.note()) == empty

    t = [dt.datetime(2026, 12, 6, 1, m, tzinfo=dt.timezone.utc) for m in range(6)]
    log = [
        Entry(GAP, t[0], "db.orders", "t.orders", 0, 3, 12),
        Entry(GAP, t[0], "db.lines", "t.lines", 0, 3, 12),
        Entry(STARTED, t[1], "db.orders", note=read.note()),
        Entry(STARTED, t[1], "db.lines", note=empty.note()),
    ]
    assert {name: r for name, (_, r) in unfinished(log).items()} == {"db.orders": read, "db.lines": empty}
    assert set(resnapshot_needed(log)) == {"db.orders", "db.lines"}  # started is not repaired
    later = [*log, Entry(RESNAPSHOT, t[2], "db.orders"), Entry(GAP, t[3], "db.lines", "t.lines", 0, 20, 25)]
    assert unfinished(later) == {} and set(resnapshot_needed(later)) == {"db.lines"}
