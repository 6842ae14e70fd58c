"""What used to be accepted and then failed (or lost data) later is refused when the config loads: every
problem at once, one line each, naming where (a table by its name, an override by its variable) and
what to write instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cdc_delta.cli.main import main
from cdc_delta.config import load_config, parse_config
from cdc_delta.config.durations import interval_micros
from cdc_delta.exceptions import ConfigError

ORDERS: dict[str, Any] = {"name": "inventory.orders", "topics": ["srv.inventory.orders"], "key": ["id"]}
GOOD: dict[str, Any] = {"app_id": "inventory-cdc", "storage": {"root": "/data/lake"}, "tables": [ORDERS]}


def refusal(data: dict, env: dict[str, str] | None = None) -> str:
    """The message of the ConfigError that ``data`` (with ``env``) is refused with."""
    with pytest.raises(ConfigError) as info:
        parse_config(data, "cdc.yaml", env=env)
    return str(info.value)


def lines(*problems: str, source: str = "cdc.yaml") -> str:
    return "\n".join([f"invalid configuration in {source}:", *(f"  - {p}" for p in problems)])


# --- 1. a table is named by its name ---------------------------------------------------------------


def test_errors_inside_tables_name_the_table_or_else_its_index() -> None:
    data = {**GOOD, "tables": [{**ORDERS, "key": []}, {"topics": ["t"], "key": ["id"]}]}
    assert refusal(data) == lines(
        "tables[inventory.orders].key: key must name at least one primary-key column, e.g. key: [id]",
        "tables[1].name: is required but missing",
    )


# --- 2. did you mean -------------------------------------------------------------------------------


def test_a_misspelt_setting_suggests_the_closest_one_of_its_section() -> None:
    assert refusal({**GOOD, "storage": {"rooot": "/data/lake"}}) == lines(
        "storage.root: is required but missing",
        "storage.rooot: is not a known setting; did you mean 'root'?",
    )
    assert refusal({**GOOD, "tables": [{**ORDERS, "topic": ["t"]}]}) == lines(
        "tables[inventory.orders].topic: is not a known setting; did you mean 'topics'?"
    )
    assert refusal({**GOOD, "zzz": 1}) == lines(
        "zzz: is not a known setting (check the spelling; see streaming/example-config.yaml)"
    )


def test_a_password_written_into_a_section_points_to_password_env_and_password_file() -> None:
    assert refusal({**GOOD, "source": {"user": "cdc", "password": "s3cret"}}) == lines(
        "source.password: is not a setting: a password is never written in the config; set password_env (the "
        "name of an environment variable holding it) or password_file (a file holding it)"
    )


# --- 3. what to write ------------------------------------------------------------------------------


def test_text_where_a_list_is_expected_says_what_to_write() -> None:
    assert refusal({**GOOD, "tables": [{**ORDERS, "key": "id", "topics": "srv.a, srv.b"}]}) == lines(
        "tables[inventory.orders].topics: topics is a list: write topics: [srv.a, srv.b]",
        "tables[inventory.orders].key: key is a list: write key: [id]",
    )
    assert refusal({**GOOD, "kafka": {"bootstrap_servers": ["a:9092", "b:9092"]}}) == lines(
        "kafka.bootstrap_servers: bootstrap_servers is one text, not a list: write bootstrap_servers: a:9092,b:9092"
    )
    assert refusal({**GOOD, "spark": {"conf": {"spark.sql.shuffle.partitions": 8}}}) == lines(
        "spark.conf['spark.sql.shuffle.partitions']: is text: put it in quotes, \"8\""
    )


# --- 4. repeated YAML keys -------------------------------------------------------------------------

REPEATED = """\
app_id: x
storage: {root: /tmp/x}
tables:
  - {name: a.b, topics: [t1], key: [id]}
kafka:
  bootstrap_servers: a:9092
  bootstrap_servers: b:9092
tables:
  - {name: c.d, topics: [t2], key: [id]}
"""


def test_a_key_given_twice_is_refused_with_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "cdc.yaml"
    path.write_text(REPEATED)
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert str(info.value) == lines(
        "kafka.bootstrap_servers: is given twice, on lines 6 and 7: YAML keeps only the second; write it once",
        "tables: is given twice, on lines 3 and 8: YAML keeps only the second; write it once",
        source=str(path),
    )


def test_check_config_exits_2_listing_every_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cdc.yaml"
    path.write_text(REPEATED + "trigger_interval: 10 sekunds\n")
    assert main(["check-config", "--config", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"cdc-delta: error: invalid configuration in {path}:",
        "  - kafka.bootstrap_servers: is given twice, on lines 6 and 7: YAML keeps only the second; write it once",
        "  - tables: is given twice, on lines 3 and 8: YAML keeps only the second; write it once",
        "  - trigger_interval: trigger_interval '10 sekunds' is not a duration Spark reads: 'sekunds' is not a unit "
        "(week, day, hour, minute, second, millisecond, microsecond); write e.g. trigger_interval: 10 seconds",
    ]


def test_check_config_lists_field_file_and_value_problems_in_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Files it names that this host cannot read are problems beside the field errors, not after them;
    numbers, booleans and choices say the value given and what to write."""
    path = tmp_path / "cdc.yaml"
    path.write_text(
        "app_id: shop\n"
        "storage: {root: lake}\n"
        "kafka: {topics: [srv.shop.orders], value_format: jsn, security: {protocol: SSL, ca_file: ca.pem}}\n"
        "merge: {min_events: -5, in_stream: perhaps, concurrency: 2.5}\n"
        "source: {host: db, user: cdc, password_file: /nowhere/pw}\n"
        "tables: [{name: shop.orders, topics: [srv.shop.orders], key: [id]}]\n"
    )
    assert main(["check-config", "--config", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert sorted(err.splitlines()[1:]) == [
        f"  - kafka.security: kafka.security.ca_file '{tmp_path}/ca.pem' cannot be read here (No such file or "
        "directory): write the path of a file this host can read",
        "  - kafka.value_format: is one of 'json' or 'avro', not 'jsn'",
        "  - merge.concurrency: is a whole number, not 2.5: write e.g. concurrency: 4",
        "  - merge.in_stream: is true or false, not 'perhaps': write in_stream: false",
        "  - merge.min_events: must be >= 1, not -5: write e.g. min_events: 20000",
        "  - source: source.password_file '/nowhere/pw' cannot be read here (No such file or directory): write the "
        "path of a file this host can read",
    ]


def test_yaml_merge_keys_may_still_override() -> None:
    from cdc_delta.config.yaml_file import read_yaml

    data, repeated = read_yaml("base: &b {a: 1, c: 2}\nother:\n  <<: *b\n  a: 3\n")
    assert data["other"] == {"a": 3, "c": 2} and repeated == []
    assert read_yaml("{a: 1, a: 2}")[1][0].loc == ("a",)  # two on one line too


# --- 5. durations ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "micros"),
    [  # as Spark 4.0's Trigger.ProcessingTime reads them
        ("10 seconds", 10_000_000),
        ("1 second", 1_000_000),
        ("INTERVAL 1 HOUR", 3_600_000_000),
        ("1 hour 30 minutes", 5_400_000_000),
        ("1.5 seconds", 1_500_000),
        ("500 milliseconds", 500_000),
        ("1 week", 604_800_000_000),
        ("1 day -1 hour", 82_800_000_000),
        ("  10 Seconds  ", 10_000_000),
        ("-5 seconds", -5_000_000),
    ],
)
def test_durations_are_read_as_spark_reads_them(text: str, micros: int) -> None:
    assert interval_micros(text) == micros


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("10", "'10' is not a number followed by a unit"),
        ("10s", "'10s' is not a number followed by a unit"),
        ("1 min", "'min' is not a unit (week, day, hour, minute, second, millisecond, microsecond)"),
        ("1.5 minutes", "1.5 minutes: only seconds can have a fraction"),
        ("1 month", "a trigger interval has no months or years: write days or weeks"),
        ("interval", "it is empty"),
    ],
)
def test_durations_spark_refuses_are_refused(text: str, why: str) -> None:
    with pytest.raises(ValueError) as info:
        interval_micros(text)
    assert str(info.value) == why


def test_a_trigger_interval_spark_would_not_read_is_refused_with_an_example() -> None:
    assert refusal({**GOOD, "trigger_interval": "10 sekunds"}) == lines(
        "trigger_interval: trigger_interval '10 sekunds' is not a duration Spark reads: 'sekunds' is not a unit "
        "(week, day, hour, minute, second, millisecond, microsecond); write e.g. trigger_interval: 10 seconds"
    )
    assert refusal({**GOOD, "trigger_interval": "-5 seconds"}) == lines(
        "trigger_interval: trigger_interval '-5 seconds' is negative: write e.g. trigger_interval: 10 seconds"
    )
    assert refusal({**GOOD, "trigger_interval": 10}) == lines(
        "trigger_interval: trigger_interval 10 has no unit: write trigger_interval: 10 seconds"
    )
    assert parse_config({**GOOD, "trigger_interval": "1 minute 30 seconds"}).trigger_interval == "1 minute 30 seconds"


def test_a_negative_number_of_seconds_is_refused_from_the_file_and_from_the_environment() -> None:
    assert refusal({**GOOD, "merge": {"max_delay_seconds": -1}, "snapshot": {"poll_seconds": "1 minute"}}) == lines(
        "snapshot.poll_seconds: is a number of seconds: write poll_seconds: 60",
        "merge.max_delay_seconds: must be a number of seconds >= 0, not -1 (default 60)",
    )
    env = {"CDC_DELTA__MERGE__MAX_DELAY_SECONDS": "-1", "CDC_DELTA__TRIGGER_INTERVAL": "-5 seconds"}
    assert refusal(GOOD, env) == "\n".join(
        [
            "invalid configuration from the environment:",
            "  - CDC_DELTA__TRIGGER_INTERVAL (trigger_interval): trigger_interval '-5 seconds' is negative: write "
            "e.g. trigger_interval: 10 seconds",
            "  - CDC_DELTA__MERGE__MAX_DELAY_SECONDS (merge.max_delay_seconds): must be a number of seconds >= 0, "
            "not -1 (default 60)",
        ]
    )


# --- 6. environment overrides ----------------------------------------------------------------------


def test_a_wrong_override_names_its_variable_not_the_file() -> None:
    env = {"CDC_DELTA__KAFAK__TOPICS": "[a]", "CDC_DELTA__SPARK__SHUFFLE_PARTITIONS": "many"}
    assert refusal(GOOD, env) == "\n".join(
        [
            "invalid configuration from the environment:",
            "  - CDC_DELTA__SPARK__SHUFFLE_PARTITIONS (spark.shuffle_partitions): is a whole number, not 'many': "
            "write e.g. shuffle_partitions: 4",
            "  - CDC_DELTA__KAFAK__TOPICS (kafak): is not a known setting; did you mean 'kafka'?",
        ]
    )
    assert refusal(GOOD, {"CDC_DELTA__APP_ID__X": "1"}) == "\n".join(
        [
            "invalid configuration from the environment:",
            "  - CDC_DELTA__APP_ID__X: 'app_id' is not a section of the config",
        ]
    )
    # a problem of the file is still the file's
    assert refusal({**GOOD, "app_id": "my app"}, {"CDC_DELTA__SPARK__SHUFFLE_PARTITIONS": "8"}) == lines(
        "app_id: app_id 'my app' must be letters, digits, '.', '_' or '-'"
    )


def test_overrides_keep_the_case_of_map_keys_and_text_values() -> None:
    env = {
        "CDC_DELTA__SPARK__CONF__spark.sql.shuffle.partitions": "8",
        "CDC_DELTA__SPARK__CONF__spark.ui.enabled": "false",
        "CDC_DELTA__Kafka__Options__kafka.security.protocol": "SASL_SSL",
        "CDC_DELTA__Spark__Shuffle_Partitions": "3",  # section and setting names: any case
        "CDC_DELTA__APP_ID": "123",  # text, not a number
    }
    data: dict[str, Any] = {**GOOD, "spark": {"conf": {"spark.ui.enabled": "true", "spark.driver.memory": "2g"}}}
    config = parse_config(data, env=env)
    assert config.spark.conf == {
        "spark.ui.enabled": "false",
        "spark.driver.memory": "2g",
        "spark.sql.shuffle.partitions": "8",
    }
    assert config.kafka.options == {"kafka.security.protocol": "SASL_SSL"}
    assert config.spark.shuffle_partitions == 3 and config.app_id == "123"
    assert data["spark"]["conf"] == {"spark.ui.enabled": "true", "spark.driver.memory": "2g"}  # not changed


# --- 7. Avro needs its registry --------------------------------------------------------------------


def test_avro_without_a_schema_registry_url_is_refused() -> None:
    assert refusal({**GOOD, "kafka": {"value_format": "avro"}}) == lines(
        "schema_registry: value_format avro needs schema_registry.url, the registry holding the Avro schemas: "
        "write schema_registry: {url: http://schema-registry:8081}"
    )
    avro = {**GOOD, "kafka": {"value_format": "avro"}, "schema_registry": {"url": "http://registry:8081"}}
    assert parse_config(avro).schema_registry.url == "http://registry:8081"
    from_env = {"CDC_DELTA__KAFKA__VALUE_FORMAT": "avro", "CDC_DELTA__SCHEMA_REGISTRY__URL": "http://r:8081"}
    assert parse_config(GOOD, env=from_env).schema_registry.url == "http://r:8081"
    assert parse_config(GOOD).schema_registry.url == "http://127.0.0.1:8081"  # JSON: the default, unused


# --- 8. secrets ------------------------------------------------------------------------------------


def test_secrets_written_into_kafka_options_or_spark_conf_are_refused() -> None:
    data = {
        **GOOD,
        "kafka": {"options": {"kafka.sasl.jaas.config": '... password="x";', "kafka.ssl.truststore.location": "/t"}},
        "spark": {"conf": {"spark.hadoop.fs.s3a.SECRET.key": "k", "spark.authenticate.secret": "s"}},
    }
    assert refusal(data) == lines(
        "kafka.options['kafka.sasl.jaas.config']: holds a secret, which does not belong in the config file: set it "
        "from the environment, CDC_DELTA__KAFKA__OPTIONS__kafka.sasl.jaas.config=...",
        "spark.conf['spark.hadoop.fs.s3a.SECRET.key']: holds a secret, which does not belong in the config file: "
        "set it from the environment, CDC_DELTA__SPARK__CONF__spark.hadoop.fs.s3a.SECRET.key=...",
        "spark.conf['spark.authenticate.secret']: holds a secret, which does not belong in the config file: set it "
        "from the environment, CDC_DELTA__SPARK__CONF__spark.authenticate.secret=... (or "
        "spark.authenticate.secret.file: a file holding it)",
    )
    env = {"CDC_DELTA__KAFKA__OPTIONS__kafka.sasl.jaas.config": '... password="x";'}
    assert parse_config(GOOD, env=env).kafka.options == {"kafka.sasl.jaas.config": '... password="x";'}
    names_no_secret = {
        "kafka.sasl.oauthbearer.token.endpoint.url": "https://idp/token",
        "kafka.ssl.keystore.location": "/k",
    }
    spark_no_secret = {"spark.authenticate.secret.file": "/run/secrets/s", "spark.kubernetes.driver.secrets.s3": "/s"}
    parse_config({**GOOD, "kafka": {"options": names_no_secret}, "spark": {"conf": spark_no_secret}})


def test_a_password_env_that_is_not_set_is_refused_when_the_loader_is_given_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "cdc.yaml"
    path.write_text(
        "app_id: x\nstorage: {root: /tmp/x}\ntables: [{name: a.b, topics: [t], key: [id]}]\n"
        "source: {user: cdc, password_env: CDC_TEST_SOURCE_PW}\n"
        "connect: {url: 'http://c:8083', username: admin, password_env: CDC_TEST_CONNECT_PW}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(path, env={"CDC_TEST_CONNECT_PW": "pw"})
    assert str(info.value) == lines(
        "source: source.password_env names CDC_TEST_SOURCE_PW, which is not set in the environment: set it, or "
        "read the password from a file with source.password_file",
        source=str(path),
    )
    config = load_config(path, env={"CDC_TEST_CONNECT_PW": "pw", "CDC_TEST_SOURCE_PW": "pw"})
    assert config.source.password_env == "CDC_TEST_SOURCE_PW"
    parse_config({**GOOD, "source": {"password_env": "CDC_TEST_SOURCE_PW"}})  # no environment given: not checked


def test_check_config_refuses_a_password_env_that_is_not_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cdc_delta.cli.main import main

    path = tmp_path / "cdc.yaml"
    path.write_text(
        "app_id: x\nstorage: {root: /tmp/x}\ntables: [{name: a.b, topics: [t], key: [id]}]\n"
        "source: {user: cdc, password_env: CDC_TEST_SOURCE_PW}\n"
    )
    monkeypatch.delenv("CDC_TEST_SOURCE_PW", raising=False)
    assert main(["check-config", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "source.password_env names CDC_TEST_SOURCE_PW, which is not set in the environment" in err
    monkeypatch.setenv("CDC_TEST_SOURCE_PW", "pw")
    assert main(["check-config", "--config", str(path)]) == 0
    assert "pw" not in capsys.readouterr().out.split()


# --- 9. bootstrap servers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("servers", "why"),
    [
        ("localhost", "'localhost' has no port: write localhost:9092"),
        ("http://x:9092", "'http://x:9092' has a scheme: write x:9092"),
        ("host:port:1", "'host:port:1' is not host:port (e.g. broker1:9092)"),
        ("a:9092,,b:9092", "an entry is empty (two commas in a row, or one at an end): remove it"),
        ("a:0", "'a:0' is not host:port (e.g. broker1:9092)"),
    ],
)
def test_bootstrap_servers_that_are_not_host_port_are_refused_naming_the_entry(servers: str, why: str) -> None:
    assert refusal({**GOOD, "kafka": {"bootstrap_servers": servers}}) == lines(
        f"kafka.bootstrap_servers: kafka.bootstrap_servers is host:port, comma-separated: {why}"
    )


def test_bootstrap_servers_edge_cases() -> None:
    assert refusal({**GOOD, "kafka": {"bootstrap_servers": " "}}) == lines(
        "kafka.bootstrap_servers: kafka.bootstrap_servers is empty: write host:port, e.g. 127.0.0.1:9092"
    )
    assert refusal({**GOOD, "kafka": {"bootstrap_servers": "localhost,b"}}) == lines(
        "kafka.bootstrap_servers: kafka.bootstrap_servers is host:port, comma-separated: 'localhost' has no port: "
        "write localhost:9092; 'b' has no port: write b:9092"
    )
    for good in ("a:9092, b-2.example.com:9093", "[::1]:9092", "10.0.0.1:29092"):
        assert parse_config({**GOOD, "kafka": {"bootstrap_servers": good}}).kafka.bootstrap_servers == good


# --- 10. the subscription covers every table -------------------------------------------------------


def test_a_table_whose_topics_the_subscription_does_not_cover_is_refused() -> None:
    assert refusal({**GOOD, "kafka": {"topic_pattern": r"^dbserver1\..*"}}) == lines(
        r"kafka: kafka.topic_pattern '^dbserver1\..*' does not match topic 'srv.inventory.orders' of table "
        "'inventory.orders': the stream would never read it; widen the pattern or fix the table's topics"
    )
    shards = {"name": "shop.orders", "topic_pattern": r"srv\.shop_\d+\.orders", "key": ["id"]}
    assert refusal({**GOOD, "kafka": {"topics": ["srv.other"]}, "tables": [ORDERS, shards]}) == lines(
        r"kafka: kafka.topics does not list 'srv.inventory.orders' of table 'inventory.orders', topic_pattern "
        r"'srv\\.shop_\\d+\\.orders' of table 'shop.orders': the stream would never read them; add the table's "
        "topics to kafka.topics (or subscribe with kafka.topic_pattern)"
    )
    # Spark's subscribePattern matches anywhere in a name; a table's own pattern under a pattern is not judged.
    covered = {**GOOD, "kafka": {"topic_pattern": r"inventory\."}, "tables": [ORDERS, shards]}
    assert parse_config(covered).kafka.topic_pattern == r"inventory\."
    listed = {**GOOD, "kafka": {"topics": ["srv.inventory.orders", "srv.shop_1.orders"]}, "tables": [ORDERS, shards]}
    assert len(parse_config(listed).tables) == 2


# --- 11. a table needs a route ---------------------------------------------------------------------


def test_a_table_with_no_topics_no_pattern_and_no_source_table_is_refused() -> None:
    unrouted = {"name": "inventory.orders", "key": ["id"]}
    assert refusal({**GOOD, "tables": [unrouted]}) == lines(
        "tables[inventory.orders]: table 'inventory.orders' has no route: set topics, topic_pattern or source_table"
    )
    by_source_table = {**unrouted, "source_table": "orders"}  # any topic of the subscription, by source.table
    assert parse_config({**GOOD, "tables": [by_source_table]}).tables[0].source_table == "orders"


# --- all at once -----------------------------------------------------------------------------------


def test_every_problem_is_listed_at_once() -> None:
    data = {
        **GOOD,
        "storage": {"rooot": "/x"},
        "tables": [{**ORDERS, "key": "id"}],
        "kafka": {"bootstrap_servers": "localhost", "options": {"kafka.ssl.key.password": "x"}},
        "trigger_interval": "10 sekunds",
    }
    message = refusal(data, {"CDC_DELTA__MERGE__CONCURRENCY": "0"})
    assert message.splitlines() == [
        "invalid configuration in cdc.yaml:",
        "  - kafka.options['kafka.ssl.key.password']: holds a secret, which does not belong in the config file: set "
        "it from the environment, CDC_DELTA__KAFKA__OPTIONS__kafka.ssl.key.password=...",
        "  - storage.root: is required but missing",
        "  - storage.rooot: is not a known setting; did you mean 'root'?",
        "  - tables[inventory.orders].key: key is a list: write key: [id]",
        "  - kafka.bootstrap_servers: kafka.bootstrap_servers is host:port, comma-separated: 'localhost' has no "
        "port: write localhost:9092",
        "  - trigger_interval: trigger_interval '10 sekunds' is not a duration Spark reads: 'sekunds' is not a unit "
        "(week, day, hour, minute, second, millisecond, microsecond); write e.g. trigger_interval: 10 seconds",
        "  - CDC_DELTA__MERGE__CONCURRENCY (merge.concurrency): must be >= 1, not 0: write e.g. concurrency: 4",
    ]


def test_checks_across_sections_are_listed_with_the_field_errors() -> None:
    """The registry check (it reads kafka.value_format) and the object-store checks (they read storage.root)
    run although other settings of those sections are wrong: one run lists every problem."""
    data = {
        **GOOD,
        "storage": {"root": "s3a://lake/cdc", "lease_timeout_seconds": 1},
        "kafka": {"bootstrap_servers": "k:9092", "value_format": "avro", "max_offsets_per_trigger": "lots"},
        "merge": {"concurrency": 0},
    }
    lines = refusal(data).splitlines()
    assert lines[0] == "invalid configuration in cdc.yaml:"
    problems = sorted(line.split(":", 1)[0].strip(" -") for line in lines[1:])
    assert problems == [
        "(top level)",  # the locks and the metastore of an object-store lake
        "kafka.max_offsets_per_trigger",
        "merge.concurrency",
        "schema_registry",
        "storage.lease_timeout_seconds",
    ], lines
    assert any("value_format avro needs schema_registry.url" in line for line in lines), lines
    assert any("set maintenance.lock_path, snapshot.lock_path" in line for line in lines), lines
