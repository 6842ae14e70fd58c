"""The check-config command: validate a config file and print what it resolves to."""

from __future__ import annotations

import argparse
import os
from typing import Any

from cdc_delta.cli.common import add_config_argument
from cdc_delta.config import AppConfig, TableConfig, load_config
from cdc_delta.config.kafka import require_subscription
from cdc_delta.exceptions import ConfigError


def cmd_check_config(args: argparse.Namespace) -> int:
    # Every password_env must be set here (a job fails only where it needs that password, later).
    # Every file it names must be readable here (a job fails only where it reads that file, later).
    config = load_config(args.config, env=os.environ, check_files=True)
    for table in config.tables:
        made = f" (a table per source table of {_route(table)})" if table.is_pattern else ""
        key = table.key or "from each table's records (Debezium's record key)"
        print(f"{table.name}: key {key} -> {config.storage.table_path(table)}{made}")
    if config.patterns and config.kafka.topics:
        print(
            "note: the pattern entries see only the topics kafka.topics lists; subscribe with kafka.topic_pattern "
            "for the tables created later to be read"
        )
    pattern = config.kafka.topic_pattern or ""
    if pattern and not (pattern.startswith("^") and pattern.endswith(("$", ".*", ".+"))):
        print(
            f"warning: kafka.topic_pattern '{pattern}' is not anchored: Kafka's subscription matches it anywhere in "
            f"a topic's name (the connector's schema-history topic too); write topic_pattern: "
            f"'^{pattern.removeprefix('^').removesuffix('$')}$'"
        )
    try:
        require_subscription(config.kafka)
    except ConfigError as exc:
        print(f"note: {exc}: `cdc-delta stream` refuses it, the other jobs run")
    print(f"lake -> {config.storage.root} (relative paths are taken from the config file's folder)")
    print(f"dead letters -> {config.storage.dead_letters}")
    m = config.merge
    print(f"changelog -> {config.changelog.located(config.storage.root)} (kept {config.changelog.retention_hours:g} h)")
    where = "in the stream's process" if m.in_stream else "by `cdc-delta merge` (merge.in_stream: false)"
    when = (
        "after every batch"
        if m.max_delay_seconds == 0
        else f"at {m.min_events} pending changes or after {m.max_delay_seconds:g} s"
    )
    print(f"merges: each table {when}, {m.concurrency} at a time, {where}")
    from cdc_delta.check.lake import lake_problems

    problems = lake_problems(config)
    if problems:
        header = f"invalid configuration in {args.config}, against the lake:"
        raise ConfigError("\n".join([header, *(f"  - {p}" for p in problems)]))
    print(f"config {args.config} is valid")
    return _discover(config) if args.discover else 0


def _discover(config: AppConfig) -> int:
    """Print what each topic of the subscription becomes; 1 when some would go to the dead letters."""
    from cdc_delta.changelog.table_index import discovered_without_spark
    from cdc_delta.check.topics import plan_topics, summary
    from cdc_delta.exceptions import EXIT_ATTENTION
    from cdc_delta.kafka.client import brokers
    from cdc_delta.kafka.offsets import partition_lag

    kafka = config.kafka
    topics = {lag.topic for lag in partition_lag(brokers(kafka), config.app_id, kafka.topics, kafka.topic_pattern)}
    plans = plan_topics(config, topics, discovered_without_spark(config))
    for plan in plans:
        print(f"  {plan.line()}")
    print(summary(plans))
    return EXIT_ATTENTION if any(p.refused for p in plans) else 0


def _route(table: TableConfig) -> str:
    parts = [
        ("topics", table.topic_pattern),
        ("source db", table.source_database),
        ("source table", table.source_table),
    ]
    return ", ".join(f"{what} {regex!r}" for what, regex in parts if regex)


def add_commands(sub: Any) -> None:
    """Register this module's commands on the top-level subparsers."""
    check = sub.add_parser(
        "check-config",
        help="validate a config file",
        description="Validate a config file and print what it resolves to: each table's key and path, the "
        "changelog, the merge schedule. Exit 2 listing every problem.",
    )
    add_config_argument(check)
    check.add_argument(
        "--discover",
        action="store_true",
        help="also ask Kafka for the subscribed topics and print the table each feeds (listed, or made by a "
        "pattern entry, with its key) or why its records would go to the dead letters; exit 1 if any would",
    )
    check.set_defaults(func=cmd_check_config)
