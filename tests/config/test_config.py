"""Config validation: bad input fails at start with the field and the fix in the message."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from cdc_delta.catalog import TableCatalog
from cdc_delta.config import load_config, parse_config
from cdc_delta.exceptions import ConfigError

GOOD = {
    "app_id": "inventory-cdc",
    "storage": {"root": "/data/lake"},
    "tables": [{"name": "inventory.orders", "topics": ["srv.inventory.orders"], "key": ["id"]}],
}


def with_table(**table: object) -> dict:
    return {**GOOD, "tables": [{**GOOD["tables"][0], **table}]}


def test_a_good_config_resolves_paths() -> None:
    config = parse_config(GOOD)
    assert config.storage.table_path(config.tables[0]) == "/data/lake/inventory/orders"
    assert config.storage.dead_letters == "/data/lake/_cdc_dead_letters"
    assert config.kafka.bootstrap_servers == "127.0.0.1:9092"
    assert config.spark.shuffle_partitions == 4


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({k: v for k, v in GOOD.items() if k != "storage"}, r"storage: is required but missing"),
        ({**GOOD, "tabels": []}, r"tabels: is not a known setting"),
        ({**GOOD, "tables": []}, r"list at least one table"),
        (with_table(key=[]), r"tables\[inventory\.orders\]\.key: key must name at least one primary-key column"),
        (with_table(key=["_cdc_op"]), r"must be a plain identifier not starting with _cdc_"),
        (with_table(name="inventory.orders.x"), r"must look like db\.table"),
        (with_table(topics=[], topic_pattern=None), r"has no route: set topics, topic_pattern or source_table"),
        (with_table(source_table="orders_("), r"source_table 'orders_\(' is not a valid regular expression"),
        (with_table(columns={"amount": "money"}), r"unsupported column type 'money'"),
        (with_table(columns={"amount": "decimal(40,2)"}), r"decimal\(40,2\) is out of range"),
        (
            {**GOOD, "truncate_policy": "drop"},
            r"truncate_policy: is one of 'soft_delete', 'skip' or 'dead_letter', not 'drop'",
        ),
        ({**GOOD, "app_id": "my app"}, r"app_id 'my app' must be letters"),
        ({**GOOD, "merge_concurrency": 4}, r"merge_concurrency is now merge\.concurrency"),
        ({**GOOD, "merge": {"max_delay_seconds": -1}}, r"merge\.max_delay_seconds: must be a number of seconds >= 0"),
        ({**GOOD, "changelog": {"retention": 7}}, r"changelog\.retention"),
        ({**GOOD, "fresh_views": {"database": "cdc fresh"}}, r"fresh_views\.database 'cdc fresh' must be a plain"),
        (
            {**GOOD, "fresh_views": {"function_jar": "s3a://b/f.zip"}},
            r"function_jar 's3a://b/f\.zip' must name a \.jar",
        ),
        (
            {**GOOD, "fresh_views": {"function_jar": "s3a://b/jars/cdc-delta-decoder.jar"}},
            r"copy the jar under another file name \(say cdc-delta-functions\.jar\)",
        ),
        ({**GOOD, "tables": GOOD["tables"] * 2}, r"is listed twice"),
        ({**GOOD, "kafka": {"topics": ["a"], "topic_pattern": "b.*"}}, r"either kafka\.topics or kafka\.topic_pattern"),
        ({**GOOD, "spark": {"shuffle_partitions": 0}}, r"shuffle_partitions: must be > 0, not 0: write e\.g\. s"),
        (with_table(stock={"path": "/x"}), r"has a stock export but no columns: list them in export order"),
        (with_table(columns={"qty": "int"}, stock={"path": "/x"}), r"key column\(s\) \['id'\] missing from columns"),
        (with_table(columns={"id": "int"}, stock={"path": "/x", "delimiter": "\n"}), r"stock\.delimiter must be"),
        (with_table(columns={"id": "int"}, stock={"path": "/x", "encoding": "klingon"}), r"not an encoding Python"),
        ({**GOOD, "snapshot": {"time_zone": "Mars/Olympus"}}, r"snapshot\.time_zone 'Mars/Olympus' is not an IANA"),
        ({**GOOD, "snapshot": {"tables": ["inventory.order"]}}, r"snapshot\.tables names unknown table"),
        (
            {**with_table(key_includes_source=True), "snapshot": {"tables": ["inventory.orders"]}},
            r"whose key includes the shard",
        ),
        (
            {
                **GOOD,
                "tables": [GOOD["tables"][0], {**GOOD["tables"][0], "name": "shop.orders"}],
                "snapshot": {"tables": ["inventory.orders", "shop.orders"]},
            },
            r"would share Hive names",
        ),
        (
            with_table(source_count_jdbc={"url": "jdbc:mariadb://db/shop?password=x", "query": "SELECT 1"}),
            r"must not hold the password: set password_env or password_file",
        ),
        (
            with_table(source_count_jdbc={"url": "db:3306", "query": "SELECT 1"}),
            r"source_count_jdbc\.url 'db:3306' must be a JDBC URL",
        ),
        (
            with_table(
                source_count_path="/c",
                source_count_jdbc={"url": "jdbc:mariadb://db/shop", "query": "SELECT 1"},
            ),
            r"set source_count_path or source_count_jdbc, not both",
        ),
    ],
)
def test_bad_configs_name_the_field_and_the_fix(data: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(data, "cdc.yaml")


def test_relative_paths_in_a_file_are_taken_from_its_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "etc"
    folder.mkdir()
    (folder / "secret").write_text("pw\n")
    config = folder / "cdc.yaml"
    data = {**GOOD, "storage": {"root": "../lake"}, "source": {"host": "db", "user": "u", "password_file": "secret"}}
    config.write_text(json.dumps(data))
    monkeypatch.chdir(tmp_path / "..")  # started from elsewhere: the file's folder counts, not this one
    loaded = load_config(config, env={})
    assert loaded.storage.root == str(tmp_path / "lake") and loaded.source.password() == "pw"
    assert loaded.storage.dead_letters == str(tmp_path / "lake" / "_cdc_dead_letters")


def test_local_paths_become_absolute_and_uris_stay() -> None:
    local = parse_config({**GOOD, "storage": {"root": "var/lake", "checkpoint_root": "./ckpt"}})
    assert local.storage.root == str(Path.cwd() / "var" / "lake")
    assert local.storage.checkpoint_root == str(Path.cwd() / "ckpt")
    remote = parse_config(
        {**GOOD, **LOCAL_PARTS, "storage": {"root": "s3a://bucket/lake", "dead_letter_path": "file:/dl"}}
    )
    assert remote.storage.root == "s3a://bucket/lake" and remote.storage.dead_letters == "file:/dl"


LOCAL_PARTS = {
    "maintenance": {"lock_path": "/var/lib/cdc/maintenance.lock"},
    "snapshot": {"lock_path": "/var/lib/cdc/snapshot.lock", "metastore_dir": "/var/lib/cdc/metastore"},
}


def test_a_lake_on_an_object_store_needs_local_locks_and_metastore() -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config({**GOOD, "storage": {"root": "s3a://bucket/lake"}}, "cdc.yaml")
    assert (
        "storage.root 's3a://bucket/lake' is on an object store, where a lock or an embedded metastore cannot live: "
        "set maintenance.lock_path, snapshot.lock_path, snapshot.metastore_dir (or snapshot.metastore_uri, a Hive "
        "metastore) to local paths"
    ) in str(refused.value)
    thrift = {**LOCAL_PARTS, "snapshot": {"lock_path": "/l", "metastore_uri": "thrift://hms:9083"}}
    assert parse_config({**GOOD, **thrift, "storage": {"root": "s3a://bucket/lake"}}).snapshot.metastore_dir is None
    assert parse_config({**GOOD, "storage": {"root": "file:/var/lake"}}).storage.root == "file:/var/lake"


def test_column_types_are_normalized() -> None:
    config = parse_config(with_table(columns={"a": "LONG", "b": "Decimal(10, 2)", "c": "integer"}))
    assert config.tables[0].columns == {"a": "bigint", "b": "decimal(10,2)", "c": "int"}


def test_environment_overrides_nested_fields() -> None:
    env = {
        "CDC_DELTA__KAFKA__BOOTSTRAP_SERVERS": "broker:29092",
        "CDC_DELTA__SPARK__SHUFFLE_PARTITIONS": "8",
        "OTHER": "x",
    }
    config = parse_config(GOOD, env=env)
    assert config.kafka.bootstrap_servers == "broker:29092"
    assert config.spark.shuffle_partitions == 8


def test_environment_override_of_a_non_section_is_refused() -> None:
    with pytest.raises(ConfigError, match="CDC_DELTA__APP_ID__X: 'app_id' is not a section"):
        parse_config(GOOD, env={"CDC_DELTA__APP_ID__X": "1"})


def test_load_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist; pass --config"):
        load_config(tmp_path / "missing.yaml", env={})
    bad = tmp_path / "bad.yaml"
    bad.write_text("app_id: [unclosed\n")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_config(bad, env={})
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("just a string\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_config(scalar, env={})


def test_example_config_is_valid() -> None:
    example = Path(__file__).parents[2] / "streaming" / "example-config.yaml"
    config = load_config(example, env={"SOURCE_PASSWORD": "x"})  # source.password_env names it
    assert {t.name for t in config.tables} >= {"inventory.orders"}


def test_demo_config_file_and_in_code_demo_agree() -> None:
    from cdc_delta.demo.batches import demo_config

    from_file = load_config(Path(__file__).parents[2] / "streaming" / "demo-config.yaml", env={})
    assert from_file.tables == demo_config(Path("/x")).tables


def test_short_vacuum_retention_needs_an_explicit_choice() -> None:
    with pytest.raises(
        ConfigError,
        match=r"vacuum_retention_hours 2 is below Delta's 168 h safety check: set "
        r"maintenance.allow_short_retention: true",
    ):
        parse_config({**GOOD, "maintenance": {"vacuum_retention_hours": 2}})
    config = parse_config({**GOOD, "maintenance": {"vacuum_retention_hours": 2, "allow_short_retention": True}})
    assert config.maintenance.vacuum_retention_hours == 2


def test_snapshot_defaults_and_stock_settings() -> None:
    config = parse_config(
        {
            **GOOD,
            "tables": [
                {**GOOD["tables"][0], "columns": {"id": "bigint"}, "stock": {"path": "exports/orders"}},
                {"name": "shop.items", "topics": ["t"], "key": ["id"], "key_includes_source": True},
            ],
        }
    )
    stock = config.tables[0].stock
    assert stock is not None and stock.delimiter == "\t" and stock.null_marker == "\\N" and stock.format == "text"
    assert stock.path == str(Path.cwd() / "exports/orders")
    assert config.snapshot.database == "ods" and config.snapshot.time_zone == "UTC"
    # Tables whose key includes the shard are left out by default (a stock export has no shard).
    assert [t.name for t in TableCatalog(config).snapshot_tables()] == ["inventory.orders"]


def test_the_jdbc_password_comes_from_the_environment_or_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jdbc = {"url": "jdbc:mariadb://db:3306/shop", "query": "SELECT COUNT(*) FROM orders", "user": "ro"}
    from_env = parse_config(with_table(source_count_jdbc={**jdbc, "password_env": "SHOP_DB_PASSWORD"}))
    source = from_env.tables[0].source_count_jdbc
    assert source is not None
    with pytest.raises(ConfigError, match="names SHOP_DB_PASSWORD, which is not set in the environment"):
        source.password()
    monkeypatch.setenv("SHOP_DB_PASSWORD", "pw1")
    assert source.password() == "pw1"
    secret = tmp_path / "pw"
    secret.write_text("pw2\n")
    from_file = parse_config(with_table(source_count_jdbc={**jdbc, "password_file": str(secret)}))
    assert from_file.tables[0].source_count_jdbc.password() == "pw2"  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="not both"):
        parse_config(with_table(source_count_jdbc={**jdbc, "password_env": "A", "password_file": "/b"}))


def test_tables_sharing_a_name_in_different_databases_replicate_and_only_their_snapshot_is_refused(
    tmp_path: Path,
) -> None:
    items = {"topics": ["a"], "key": ["id"]}
    config = parse_config(
        {**GOOD, "tables": [{**items, "name": "inventory.items"}, {**items, "name": "archive.items", "topics": ["b"]}]}
    )
    assert [t.name for t in config.tables] == ["inventory.items", "archive.items"]
    assert config.hive_name_clashes() == (
        "snapshot tables would share Hive names ods.['items']: list only one table per name under snapshot.tables"
    )
    from cdc_delta.snapshot.run import run_snapshot

    with pytest.raises(ConfigError, match=r"would share Hive names ods\.\['items'\]"):
        run_snapshot(None, config, dt.date(2026, 3, 1), lambda: None)  # type: ignore[arg-type]


def test_a_second_writer_on_s3_is_flagged_unless_the_dynamodb_log_store_keeps_commits_apart() -> None:
    s3 = parse_config({**GOOD, **LOCAL_PARTS, "storage": {"root": "s3a://bucket/lake"}})
    assert "spark.delta.logStore.s3a.impl: io.delta.storage.S3DynamoDBLogStore" in (s3.second_writer_hazard() or "")
    dynamo = {"spark": {"conf": {"spark.delta.logStore.s3a.impl": "io.delta.storage.S3DynamoDBLogStore"}}}
    assert (
        parse_config({**GOOD, **LOCAL_PARTS, **dynamo, "storage": {"root": "s3a://b/l"}}).second_writer_hazard() is None
    )
    assert parse_config(GOOD).second_writer_hazard() is None  # a local file system refuses to overwrite a commit
