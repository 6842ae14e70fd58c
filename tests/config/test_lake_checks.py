"""check-config against the lake as it is: storage locations this user cannot write, and key or zorder_by
columns a table's existing Delta table does not have (read with delta-rs), each one line naming the
setting, exit 2. The Delta table is written with delta-rs here: no Spark."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from cdc_delta.cli.main import main


def write(path: Path, root: Path, key: str = "[id]", zorder: str = "[]") -> Path:
    path.write_text(
        f"app_id: x\nstorage: {{root: '{root}'}}\n"
        f"tables: [{{name: shop.orders, topics: [t], key: {key}, zorder_by: {zorder}}}]\n"
    )
    return path


def test_columns_the_delta_table_does_not_have_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "lake"
    rows = pa.table({"id": [1], "customer": ["c"], "_cdc_deleted": [False]})
    write_deltalake(str(root / "shop" / "orders"), rows)
    config = write(tmp_path / "cdc.yaml", root, zorder="[customer]")
    assert main(["check-config", "--config", str(config)]) == 0
    assert "is valid" in capsys.readouterr().out

    write(config, root, key="[order_id]", zorder="[custmer, id]")
    assert main(["check-config", "--config", str(config)]) == 2
    where = root / "shop" / "orders"
    assert capsys.readouterr().err.splitlines()[1:] == [
        f"  - tables[shop.orders].key: ['order_id'] not among the columns of its Delta table at {where} (customer, "
        "id): write them as the source names them",
        f"  - tables[shop.orders].zorder_by: ['custmer'] not among the columns of its Delta table at {where} "
        "(customer, id): write them as the source names them",
    ]


def test_a_storage_root_that_cannot_be_written_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / "a-file"
    file.write_text("")
    config = write(tmp_path / "cdc.yaml", file / "lake")
    assert main(["check-config", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"  - storage.root {file}/lake: {file} is a file, not a folder: point storage.root at a folder" in err

    # Not writable by this user (the suite runs as root, to whom every folder is: os.access answers here).
    write(config, tmp_path / "new" / "lake")
    monkeypatch.setattr("cdc_delta.check.lake.os.access", lambda path, mode: Path(path) != tmp_path)
    assert main(["check-config", "--config", str(config)]) == 2
    assert (
        f"  - storage.root {tmp_path}/new/lake cannot be written by this user (its nearest existing folder {tmp_path} "
        "is not writable): run the jobs as a user that may write there, or point storage.root elsewhere"
    ) in capsys.readouterr().err
