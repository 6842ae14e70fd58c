"""Create or update a connector so that its config on the worker equals its file: idempotent."""

from __future__ import annotations

from dataclasses import dataclass

from cdc_delta.connect.client import ConnectClient
from cdc_delta.connect.files import ConfigDiff, ConnectorFile, config_diff


@dataclass(frozen=True)
class Applied:
    """What applying one file did: ``created``, ``updated``, ``unchanged`` (or ``would ...`` in a dry run)."""

    name: str
    action: str
    diff: ConfigDiff


def plan(client: ConnectClient, file: ConnectorFile) -> tuple[bool, ConfigDiff]:
    """(whether the connector exists, the difference between its config and the file's)."""
    current = client.config(file.name)
    return current is not None, config_diff(current, file.config)


def apply(client: ConnectClient, file: ConnectorFile, diff: ConfigDiff, exists: bool, dry_run: bool) -> Applied:
    """Send the file's config when it differs (``PUT /connectors/{name}/config``); the same config
    again changes nothing."""
    if diff.empty:
        return Applied(file.name, "unchanged", diff)
    action = "update" if exists else "create"
    if dry_run:
        return Applied(file.name, f"would {action}", diff)
    client.put_config(file.name, file.config)
    return Applied(file.name, f"{action}d", diff)
