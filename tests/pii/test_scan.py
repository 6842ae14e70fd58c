"""``cdc-delta scan-pii`` as a process on Delta tables: it finds the columns planted with plain-text
e-mails and card numbers, not the hashed one, the free text, the allowed one nor the soft-deleted rows
(the demo's tables, where it finds nothing: tests/demo/test_demo.py)."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml
from deltalake import write_deltalake

from cdc_delta.config import load_config
from tests.prom import samples
from tests.services import cdc_delta

USERS = {"name": "shop.users", "topics": ["srv.shop.users"], "key": ["id"]}


def card(rng: random.Random) -> str:
    """A 16-digit number whose last digit makes its Luhn sum a multiple of 10."""
    digits = [4] + [rng.randrange(10) for _ in range(14)]
    total = sum((d * 2 - 9 if d > 4 else d * 2) if i % 2 == 0 else d for i, d in enumerate(reversed(digits)))
    return "".join(map(str, digits)) + str((10 - total % 10) % 10)


def write_config(tmp_path: Path, **scan: Any) -> Path:
    path = tmp_path / "cdc.yaml"
    data = {
        "app_id": "pii",
        "storage": {"root": str(tmp_path / "lake")},
        "tables": [USERS],
        "metrics": {"textfile_dir": str(tmp_path / "prom")},
        "scan_pii": scan,
    }
    path.write_text(yaml.safe_dump(data))
    return path


def test_planted_plain_text_is_found_and_nothing_else(tmp_path: Path) -> None:
    rng = random.Random(3)
    rows = 400
    config_path = write_config(tmp_path)
    config = load_config(config_path)
    emails = [f"user{i}@example.com" for i in range(rows)]
    users = pa.table(
        {
            "id": list(range(rows)),
            "email": [e if i % 4 else "" for i, e in enumerate(emails)],  # some empty: not counted
            "email_hash": [hashlib.sha256(e.encode()).hexdigest() for e in emails],  # masked at the source
            "card": [card(rng) if i % 2 else None for i in range(rows)],
            "backup_email": emails,  # allowed below
            "note": [f"order {i} shipped on 2026-01-0{i % 9 + 1}" for i in range(rows)],
            "_cdc_op": ["c"] * rows,
            "_cdc_deleted": [False] * rows,
        }
    )
    deleted = pa.table(
        {**{c: users[c][:50] for c in users.column_names if c not in ("note", "_cdc_deleted")}}
        | {"note": ["+44 20 7946 0958"] * 50, "_cdc_deleted": [True] * 50}
    ).select(users.column_names)  # a phone number in every soft-deleted row: not read
    write_deltalake(config.table_path("shop.users"), pa.concat_tables([users, deleted]))

    found = cdc_delta(config_path, "scan-pii")
    assert found.returncode == 1, found.stderr
    (line,) = [x for x in found.stdout.splitlines() if x.startswith("shop.users:")]
    assert line == (
        "shop.users: plain text found: email: email in 100% of 300 values; card: card_number in 100% of 200 values; "
        "backup_email: email in 100% of 400 values"
    ), line
    assert "2 column(s)" not in found.stderr and "3 column(s) with plain text" in found.stderr
    prom = samples((tmp_path / "prom" / "cdc_delta_scan_pii.prom").read_text())
    assert prom["cdc_delta_scan_pii_table_plaintext_columns"] == {(("table", "shop.users"),): 3}
    assert prom["cdc_delta_scan_pii_exit_code"] == {(): 1}

    allowed = write_config(tmp_path, allow=["shop.users.backup_email"])
    report = cdc_delta(allowed, "scan-pii", "--json")
    assert report.returncode == 1
    (table,) = json.loads(report.stdout)["tables"]
    assert [(f["column"], f["kind"]) for f in table["findings"]] == [("email", "email"), ("card", "card_number")]
    assert table["rows_sampled"] == rows  # the soft-deleted rows are not read

    unknown = cdc_delta(allowed, "scan-pii", "--table", "shop.nope")
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1, unknown.stderr
    assert "--table shop.nope: no such table; the tables are shop.users" in unknown.stderr


def test_a_table_without_the_deleted_flag_is_read_whole_and_an_unreadable_one_is_said_not_scanned(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cdc.yaml"
    tables = [
        {"name": "crm.people", "topics": ["srv.crm.people"], "key": ["id"]},
        {"name": "crm.torn", "topics": ["srv.crm.torn"], "key": ["id"]},
    ]
    path.write_text(yaml.safe_dump({"app_id": "pii2", "storage": {"root": str(tmp_path / "lake")}, "tables": tables}))
    config = load_config(path)
    ids = ["11010519491231002x"] * 10  # the check character in lower case
    write_deltalake(config.table_path("crm.people"), pa.table({"id": list(range(10)), "national_id": ids}))
    torn = Path(config.table_path("crm.torn")) / "_delta_log"
    torn.mkdir(parents=True)
    (torn / "00000000000000000000.json").write_text('{"commitInfo": {"timestamp": 1}}\n{"add": {"path": ')
    found = cdc_delta(path, "scan-pii")
    assert found.returncode == 1, found.stderr
    assert "crm.people: plain text found: national_id: cn_resident_id in 100% of 10 values" in found.stdout
    assert "crm.torn: not scanned (cannot be read: " in found.stdout, found.stdout
    shutil.rmtree(torn.parent)  # the suite's sweep reads every table a test leaves: not this torn one
