"""The ordering key: numeric binlog file comparison, snapshot first, Kafka offset last."""

from __future__ import annotations

from cdc_delta.events.ordering import SEQ_DDL, Seq, binlog_file_number, event_seq, gtid_sequence


def test_binlog_file_numbers_compare_numerically_not_as_strings() -> None:
    assert binlog_file_number("mysql-bin.999999") == 999_999
    assert binlog_file_number("mysql-bin.1000000") == 1_000_000
    assert "mysql-bin.999999" > "mysql-bin.1000000"  # the bug string comparison has
    a = event_seq("u", {"file": "mysql-bin.999999", "pos": 900}, 0, 0, 1)
    b = event_seq("u", {"file": "mysql-bin.1000000", "pos": 4}, 0, 0, 0)
    assert a < b


def test_missing_or_odd_file_names_are_zero() -> None:
    assert binlog_file_number(None) == 0
    assert binlog_file_number("binlog") == 0
    assert binlog_file_number("mariadb-bin.000042") == 42


def test_snapshot_reads_sort_before_every_binlog_event() -> None:
    snapshot = event_seq("r", {"file": "mysql-bin.000009", "pos": 10_000, "snapshot": "true"}, 0, 0, 99)
    binlog = event_seq("c", {"file": "mysql-bin.000001", "pos": 4}, 0, 0, 0)
    assert snapshot < binlog


def test_position_then_row_then_kafka_offset() -> None:
    base = {"file": "mysql-bin.000003", "pos": 100}
    assert event_seq("u", {**base, "row": 0}, 0, 0, 5) < event_seq("u", {**base, "row": 1}, 0, 0, 4)
    assert event_seq("u", {**base, "row": 1}, 0, 0, 4) < event_seq("u", {**base, "row": 1}, 0, 0, 5)
    assert event_seq("u", {**base, "pos": 99}, 0, 3, 9) < event_seq("u", base, 0, 0, 0)


def test_mariadb_gtid_leads_but_mysql_gtid_is_ignored() -> None:
    assert gtid_sequence("0-1-42") == 42
    assert gtid_sequence("3E11FA47-71CA-11E1-9E33-C80AA9429562:23") == 0
    after_failover = event_seq("u", {"gtid": "0-2-101", "file": "mysql-bin.000001", "pos": 4}, 0, 0, 0)
    before = event_seq("u", {"gtid": "0-1-100", "file": "mysql-bin.000077", "pos": 9000}, 0, 0, 0)
    assert before < after_failover


def test_source_timestamp_orders_events_without_position() -> None:
    assert event_seq("u", {"ts_ms": 1000}, None, 0, 7) < event_seq("u", {"ts_ms": 1001}, None, 0, 3)
    assert event_seq("u", {}, 500, 0, 0).ts_ms == 500


def test_struct_ddl_matches_tuple_fields() -> None:
    names = [part.split(":")[0] for part in SEQ_DDL.removeprefix("struct<").removesuffix(">").split(",")]
    assert names == list(Seq._fields)
