"""``cdc-delta connectors ...``: manage the Debezium connectors through the Kafka Connect REST API."""

from __future__ import annotations

import argparse
from typing import Any

from pydantic import ValidationError

from cdc_delta.config import AppConfig, ConnectConfig, RepairConfig, load_config
from cdc_delta.connect.apply import apply, plan
from cdc_delta.connect.client import ConnectClient
from cdc_delta.connect.files import (
    ConnectorFile,
    dumps,
    load_connector_file,
    parse_overrides,
    redacted,
    shown_key,
    validation_errors,
)
from cdc_delta.connect.http import ConnectHttp
from cdc_delta.connect.masking_settings import dropped_masking, with_masking
from cdc_delta.connect.repair_settings import with_repair_settings
from cdc_delta.exceptions import ConfigError, ConnectorError

DESCRIPTION = """\
Manage Debezium connectors on a Kafka Connect cluster (its REST API). The cluster is --connect-url,
else the connect: section of --config, else http://127.0.0.1:8083. Passwords never appear in what
this prints: keep them out of connector files with Kafka Connect's config providers
(${file:/run/secrets/db.properties:password}, ${env:DB_PASSWORD}).

examples:
  cdc-delta connectors apply connectors/mariadb-inventory.yaml --set database.hostname=db.internal
  cdc-delta connectors apply connectors/*.yaml --dry-run
  cdc-delta connectors status                      every connector; exits 1 if a task FAILED
  cdc-delta connectors restart inventory-mariadb --failed-only
  cdc-delta connectors stop inventory-mariadb && cdc-delta connectors offsets inventory-mariadb --reset
"""


def client_for(args: argparse.Namespace) -> ConnectClient:
    config = load_config(args.config).connect if args.config else ConnectConfig()
    if args.connect_url:
        try:
            config = ConnectConfig.model_validate({**config.model_dump(), "url": args.connect_url})
        except ValidationError as exc:  # its text would hold the URL as given, password included
            reasons = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors(include_input=False))
            raise ConfigError(f"--connect-url: {reasons}") from None
    return ConnectClient(ConnectHttp(config))


def _with_settings(config: AppConfig | None, loaded: ConnectorFile) -> tuple[ConnectorFile, dict[str, str], list[str]]:
    """``loaded`` with what cdc-delta adds: the settings resnapshot needs (the signal table named by
    ``repair.signal_table``) and, with a config, the tables' column masking. Returns the file, the
    repair settings added and the masking settings added or extended."""
    file, added = with_repair_settings(loaded, (config.repair if config else RepairConfig()).signal_table)
    if config is None:
        return file, added, []
    file, masked = with_masking(file, config)
    return file, added, masked


def cmd_apply(args: argparse.Namespace) -> int:
    client = client_for(args)
    overrides = parse_overrides(args.set)
    files = [load_connector_file(path, overrides) for path in args.files]  # every file checked first
    config = load_config(args.config) if args.config else None
    for loaded in files:
        file, added, masked = _with_settings(config, loaded)
        exists, diff = plan(client, file)
        dropped = dropped_masking(diff.removed)
        if dropped and not args.config:
            raise ConnectorError(
                f"{file.name}: applying {file.source} without --config would remove its column masking "
                f"({', '.join(shown_key(k) for k in dropped)}) and let those columns reach Kafka in plain text: "
                "pass --config with the tables' mask:, or add the settings to the file"
            )
        if not diff.empty:
            print(f"{file.name} ({file.source}): {'changes' if exists else 'new connector'}:")
            print("\n".join(diff.lines()))
            new = sorted(k for k in added if k in diff.added or k in diff.changed)
            if new:
                print(f"  (added by cdc-delta for resnapshot and transactions, the file lacks them: {', '.join(new)})")
            new = sorted(shown_key(k) for k in masked if k in diff.added or k in diff.changed)
            if new:
                print(f"  (added by cdc-delta for the tables' mask:, so that Kafka never holds them: {', '.join(new)})")
        result = apply(client, file, diff, exists, args.dry_run)
        counts = f"{len(diff.added)} added, {len(diff.changed)} changed, {len(diff.removed)} removed"
        print(f"{result.name}: {result.action}" + ("" if diff.empty else f" ({counts})"))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    config = load_config(args.config) if args.config else None
    file, _, _ = _with_settings(config, load_connector_file(args.file, parse_overrides(args.set)))
    verdict = client_for(args).validate(file.config)
    errors = validation_errors(verdict)
    for field, message in errors:
        print(f"{file.name}: {field}: {message}")
    print(f"{file.name}: {len(errors)} error(s) in {verdict.get('name', file.config['connector.class'])} config")
    return 1 if errors else 0


def cmd_list(args: argparse.Namespace) -> int:
    for name in client_for(args).connectors():
        print(name)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    client = client_for(args)
    names = [args.name] if args.name else client.connectors()
    failed = False
    print(f"{'connector':<32} {'state':<10} tasks")
    for name in names:
        state = client.status(name)
        tasks = " ".join(f"{t.id}:{t.state}" for t in state.tasks) or "-"
        print(f"{state.name:<32} {state.state:<10} {tasks}")
        if state.trace:
            print(f"  connector: {state.trace.strip().splitlines()[0]}")
        for task in state.tasks:
            if task.state == "FAILED":
                print(f"  task {task.id}: {task.first_trace_line}")
        failed = failed or state.failed
    return 1 if failed else 0


def cmd_restart(args: argparse.Namespace) -> int:
    state = client_for(args).restart(args.name, failed_only=args.failed_only)
    which = "its failed tasks" if args.failed_only else "the connector and its tasks"
    print(f"{args.name}: restarting {which}" + (f" (now {state.state})" if state else ""))
    return 0


def cmd_simple(args: argparse.Namespace) -> int:
    client = client_for(args)
    if args.action == "delete":
        print(f"{args.name}: deleting the connector and its config (its topics and committed offsets stay)")
    getattr(client, args.action)(args.name)
    done = {"pause": "paused", "resume": "resumed", "stop": "stopped", "delete": "deleted"}[args.action]
    print(f"{args.name}: {done}")
    return 0


def cmd_offsets(args: argparse.Namespace) -> int:
    client = client_for(args)
    if args.reset:
        print(f"{args.name}: {client.reset_offsets(args.name)}")
        return 0
    print(dumps(client.offsets(args.name)))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    config = client_for(args).config(args.name)
    if config is None:
        print(f"{args.name}: no such connector")
        return 1
    print(dumps(redacted(config)))
    return 0


def add_commands(sub: Any) -> None:
    """Register ``connectors`` and its actions on the top-level subparsers."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", help="the YAML config whose connect: section names the Connect cluster")
    common.add_argument("--connect-url", help="the Connect REST URL (overrides the config)")
    parser = sub.add_parser(
        "connectors",
        help="Debezium connectors on Kafka Connect: apply, validate, status, restart, pause, stop, offsets ...",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = actions.add_parser("apply", parents=[common], help="create or update connectors from files (idempotent)")
    p.add_argument("files", nargs="+", metavar="FILE", help="connector files (JSON or YAML)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a setting")
    p.add_argument("--dry-run", action="store_true", help="print what would change, change nothing")
    p.set_defaults(func=cmd_apply)
    p = actions.add_parser("validate", parents=[common], help="ask the worker to validate a file; exit 1 on errors")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a setting")
    p.set_defaults(func=cmd_validate)
    actions.add_parser("list", parents=[common], help="the connectors' names").set_defaults(func=cmd_list)
    p = actions.add_parser("status", parents=[common], help="connector and task states; exit 1 if one FAILED")
    p.add_argument("name", nargs="?", help="one connector (default: all)")
    p.set_defaults(func=cmd_status)
    p = actions.add_parser("show", parents=[common], help="a connector's config as the worker holds it (no secrets)")
    p.add_argument("name")
    p.set_defaults(func=cmd_show)
    p = actions.add_parser("restart", parents=[common], help="restart a connector and its tasks")
    p.add_argument("name")
    p.add_argument("--failed-only", action="store_true", help="only the failed connector or tasks")
    p.set_defaults(func=cmd_restart)
    for action, text in (
        ("pause", "pause a connector"),
        ("resume", "resume a paused or stopped connector"),
        ("stop", "stop a connector and its tasks, keeping its config"),
        ("delete", "delete a connector"),
    ):
        p = actions.add_parser(action, parents=[common], help=text)
        p.add_argument("name")
        p.set_defaults(func=cmd_simple)
    p = actions.add_parser("offsets", parents=[common], help="a connector's committed source offsets")
    p.add_argument("name")
    p.add_argument("--reset", action="store_true", help="forget them (the connector must be stopped first)")
    p.set_defaults(func=cmd_offsets)
