"""Twelve flawed config files, as people write them, through ``cdc-delta check-config`` as a process:
each problem is one line naming the setting, what was given and what to write; exit 2; no traceback.
The twelfth (an unanchored pattern) is not an error: it is a warning, and the config is valid."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.services import ROOT

KAFKA = "kafka: {bootstrap_servers: 'k:9092', topics: [srv.shop.orders]}\n"
TABLES = "tables: [{name: shop.orders, topics: [srv.shop.orders], key: [id]}]\n"
LAKE = "app_id: shop\nstorage: {root: /data/lake}\n"

FLAWED = {
    "a misspelt setting": (
        LAKE + "trigger_intervl: 1 second\n" + KAFKA + TABLES,
        "trigger_intervl: is not a known setting; did you mean 'trigger_interval'?",
    ),
    "a word where a number goes": (
        LAKE + "merge: {min_events: lots}\n" + KAFKA + TABLES,
        "merge.min_events: is a whole number, not 'lots': write e.g. min_events: 20000",
    ),
    "no tables": (LAKE + KAFKA, "tables: is required but missing"),
    "a duration Spark does not read": (
        LAKE + "trigger_interval: 10 sekunds\n" + KAFKA + TABLES,
        "trigger_interval: trigger_interval '10 sekunds' is not a duration Spark reads: 'sekunds' is not a unit",
    ),
    "a key given twice": (
        "app_id: shop\napp_id: shop2\nstorage: {root: /data/lake}\n" + KAFKA + TABLES,
        "app_id: is given twice, on lines 1 and 2: YAML keeps only the second; write it once",
    ),
    "a pattern that misses a declared table": (
        LAKE + r"kafka: {bootstrap_servers: 'k:9092', topic_pattern: '^other\..*'}" + "\n" + TABLES,
        r"kafka: kafka.topic_pattern '^other\..*' does not match topic 'srv.shop.orders' of table 'shop.orders': "
        "the stream would never read it; widen the pattern or fix the table's topics",
    ),
    "a secret's variable not set": (
        LAKE + "source: {host: db, user: cdc, password_env: CDC_DELTA_TEST_NOT_SET}\n" + KAFKA + TABLES,
        "source: source.password_env names CDC_DELTA_TEST_NOT_SET, which is not set in the environment: set it, "
        "or read the password from a file with source.password_file",
    ),
    "a negative number": (
        LAKE + "merge: {max_delay_seconds: -1}\n" + KAFKA + TABLES,
        "merge.max_delay_seconds: must be a number of seconds >= 0, not -1 (default 60)",
    ),
    "a regular expression that does not compile": (
        LAKE + r"kafka: {bootstrap_servers: 'k:9092', topic_pattern: '^srv\.(shop'}" + "\n" + TABLES,
        r"kafka: kafka.topic_pattern '^srv\.(shop' is not a valid regular expression: missing ), unterminated "
        "subpattern at position 6; write a Python regular expression",
    ),
    "a relative path to a file not there": (
        "app_id: shop\nstorage: {root: lake}\n"
        "kafka: {bootstrap_servers: 'k:9092', topics: [srv.shop.orders], security: {protocol: SSL, "
        "ca_file: certs/ca.pem}}\n" + TABLES,
        "kafka.security: kafka.security.ca_file '{folder}/certs/ca.pem' cannot be read here (No such file or "
        "directory): write the path of a file this host can read",
    ),
    "a password file not there": (
        LAKE + "source: {host: db, user: cdc, password_file: /nowhere/pw}\n" + KAFKA + TABLES,
        "source: source.password_file '/nowhere/pw' cannot be read here (No such file or directory): write the "
        "path of a file this host can read",
    ),
}


def check_config(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "cdc.yaml"
    path.write_text(text)
    command = [sys.executable, "-m", "cdc_delta.cli", "check-config", "--config", str(path)]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=60)


@pytest.mark.parametrize("flaw", FLAWED)
def test_a_flawed_config_is_one_line_naming_the_fix_and_exit_2(flaw: str, tmp_path: Path) -> None:
    text, problem = FLAWED[flaw]
    run = check_config(tmp_path, text)
    assert run.returncode == 2 and run.stdout == "", run.stderr
    assert run.stderr.splitlines()[0] == f"cdc-delta: error: invalid configuration in {tmp_path / 'cdc.yaml'}:"
    (line,) = run.stderr.splitlines()[1:]
    assert line.startswith("  - " + problem.replace("{folder}", str(tmp_path))), line
    assert "Traceback" not in run.stderr


def test_an_unanchored_pattern_is_a_warning_and_relative_paths_are_said_to_be_the_files_folders(
    tmp_path: Path,
) -> None:
    run = check_config(
        tmp_path,
        "app_id: shop\nstorage: {root: lake}\n"
        + r"kafka: {bootstrap_servers: 'k:9092', topic_pattern: 'srv\.shop\..*'}"
        + "\n"
        + TABLES,
    )
    assert run.returncode == 0, run.stderr
    assert (
        r"warning: kafka.topic_pattern 'srv\.shop\..*' is not anchored: Kafka's subscription matches it anywhere"
        in run.stdout
    ), run.stdout
    assert f"lake -> {tmp_path}/lake (relative paths are taken from the config file's folder)" in run.stdout
