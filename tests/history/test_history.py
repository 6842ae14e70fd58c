"""History (SCD type 2), by hand-made histories through the stream and the merger: every version of a
row with when it was valid at the source, a delete and a truncate closing versions, a re-insert opening
one, untracked columns updating the open version in place; replays change nothing; history turned on
for a table with rows starts from them; the current versions are the table's live rows."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import functions as F

from cdc_delta.cli.main import main
from cdc_delta.config import parse_config
from cdc_delta.demo.batches import kafka_frame
from cdc_delta.demo.generator import Column, SourceTable, envelope
from cdc_delta.history.append import history_path
from cdc_delta.history.versions import as_of, read_versions
from cdc_delta.maintenance.run import run_maintenance
from cdc_delta.merger.run import Merger
from cdc_delta.stream.batch import BatchProcessor
from tests.batches import merging_processor

pytestmark = pytest.mark.spark

ITEMS = SourceTable("shop", "items", (Column("id", "int64"), Column("status", "string"), Column("note", "string")))
T0 = 1_700_000_000_000


def settings(root: Path, history: Any = True, merge_now: bool = True) -> dict[str, Any]:
    table = {"name": "shop.items", "topics": ["srv.shop.items"], "key": ["id"]}
    if history is not None:
        table["history"] = history
    return {
        "app_id": "hist",
        "storage": {"root": str(root)},
        "tables": [table],
        "merge": {"max_delay_seconds": 0 if merge_now else 3600},
    }


def config(root: Path, history: Any = True, merge_now: bool = True) -> Any:
    return parse_config(settings(root, history, merge_now))


class Source:
    """Changes as MariaDB logs them, one second apart, each a transaction of its own."""

    def __init__(self) -> None:
        self.pos, self.offset = 4, 0

    def changes(self, *changes: tuple[str, int | None, str | None, str | None]) -> list[tuple]:
        """(op, id, status, note) each; a truncate is ("t", None, None, None)."""
        out = []
        for op, key, status, note in changes:
            self.pos += 100
            values = None if key is None else {"id": key, "status": status, "note": note}
            before, after = (values, None) if op in ("d", "t") else (None, values)
            value = envelope(ITEMS, op, before, after, pos=self.pos, ts_ms=self.ts(), server="srv")
            out.append(("srv.shop.items", 0, self.offset, b"k", json.dumps(value).encode()))
            self.offset += 1
        return out

    def ts(self, pos: int | None = None) -> int:
        return T0 + (self.pos if pos is None else pos) * 10

    def at(self, pos: int) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.ts(pos) / 1000, dt.timezone.utc).replace(tzinfo=None)


def versions(spark: Any, cfg: Any) -> list[tuple]:
    """(id, status, note, op, valid from, valid to, closed by, current), in order."""
    table = cfg.table("shop.items")
    rows = read_versions(spark, history_path(cfg, table.name), table.row_key, table.history).collect()
    out = [
        (
            r["id"],
            r["status"],
            r["note"],
            r["_cdc_op"],
            r["_cdc_valid_from"],
            r["_cdc_valid_to"],
            r["_cdc_closed_by"],
            r["_cdc_is_current"],
        )
        for r in rows
    ]
    return sorted(out, key=lambda v: (v[0], v[4]))


def live_table_rows(spark: Any, cfg: Any) -> list[tuple]:
    rows = spark.read.format("delta").load(cfg.table_path("shop.items")).where(~F.col("_cdc_deleted"))
    return sorted((r["id"], r["status"], r["note"], r["_cdc_op"]) for r in rows.collect())


def current(found: list[tuple]) -> list[tuple]:
    return sorted((v[0], v[1], v[2], v[3]) for v in found if v[7])


def test_every_version_with_when_it_was_valid(spark: Any, tmp_path: Path) -> None:
    cfg = config(tmp_path)
    src = Source()
    processor = merging_processor(spark, cfg)
    # pos 104 .. 504: three changes of row 1 in one batch, row 2 made, row 1's note alone changed.
    one = src.changes(
        ("c", 1, "new", "a"), ("c", 2, "new", None), ("u", 1, "paid", "a"), ("u", 1, "sent", "a"), ("u", 1, "sent", "b")
    )
    # pos 604 .. 804: row 2 deleted, made again, row 3 made; then a truncate (904) and row 3 made again (1004).
    two = src.changes(("d", 2, "new", None), ("c", 2, "again", None), ("c", 3, "x", None))
    three = src.changes(("t", None, None, None), ("c", 3, "after", None))
    processor.process(kafka_frame(spark, one), 0)
    processor.process(kafka_frame(spark, two), 1)
    processor.process(kafka_frame(spark, three), 2)
    at = src.at
    expected = [
        (1, "new", "a", "c", at(104), at(304), "u", False),
        (1, "paid", "a", "u", at(304), at(404), "u", False),
        (1, "sent", "a", "u", at(404), at(504), "u", False),
        (1, "sent", "b", "u", at(504), at(904), "t", False),
        (2, "new", None, "c", at(204), at(604), "d", False),
        (2, "again", None, "c", at(704), at(904), "t", False),
        (3, "x", None, "c", at(804), at(904), "t", False),
        (3, "after", None, "c", at(1004), None, None, True),
    ]
    # Every column is tracked: the note's change (504) opened a version of its own.
    found = versions(spark, cfg)
    assert found == expected
    assert current(found) == live_table_rows(spark, cfg) == [(3, "after", None, "c")]
    # The table as it was at 0.5 s past pos 704: rows 1 and 2, not yet 3.
    table = cfg.table("shop.items")
    history = read_versions(spark, history_path(cfg, table.name), table.row_key, table.history)
    then = as_of(history, F.lit(at(754)))
    assert sorted((r["id"], r["status"]) for r in then.collect()) == [(1, "sent"), (2, "again")]
    # The last batch replayed (a restart before its checkpoint): nothing appended.
    held = spark.read.format("delta").load(history_path(cfg, table.name)).count()
    processor.process(kafka_frame(spark, three), 2)
    assert spark.read.format("delta").load(history_path(cfg, table.name)).count() == held
    # Batches delivered again by Kafka (new batch ids): appended again, and not one version more.
    processor.process(kafka_frame(spark, one + two), 3)
    assert versions(spark, cfg) == found


def test_untracked_columns_update_the_open_version_and_sql_reads_it(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = config(tmp_path, history={"except_columns": ["note"]})
    src = Source()
    processor = merging_processor(spark, cfg)
    processor.process(kafka_frame(spark, src.changes(("c", 1, "new", "a"), ("u", 1, "new", "b"))), 0)
    processor.process(kafka_frame(spark, src.changes(("u", 1, "paid", "b"), ("u", 1, "paid", "c"))), 1)
    at = src.at
    assert versions(spark, cfg) == [
        (1, "new", "b", "u", at(104), at(304), "u", False),  # the note's change updated it in place
        (1, "paid", "c", "u", at(304), None, None, True),
    ]
    assert current(versions(spark, cfg)) == live_table_rows(spark, cfg)
    # cdc-delta check --history: the current versions are the live rows; a change the table never got
    # (written into the history by hand) is found both ways: a current version no live row, and a live
    # row no current version.
    path = tmp_path / "cdc.yaml"
    path.write_text(yaml.safe_dump(settings(tmp_path, {"except_columns": ["note"]})))
    assert main(["check", "--config", str(path), "--history"]) == 0
    assert "shop.items: history ok (1 live rows, each its current version)" in capsys.readouterr().out
    history = history_path(cfg, "shop.items")
    newest = spark.read.format("delta").load(history).orderBy(F.col("_cdc_seq").desc()).limit(1)
    forged = newest.withColumn("status", F.lit("forged")).withColumn(
        "_cdc_seq", F.col("_cdc_seq").withField("pos", F.col("_cdc_seq.pos") + 1)
    )
    forged.write.format("delta").mode("append").save(history)
    assert main(["check", "--config", str(path), "--history"]) == 1
    assert "shop.items: history DIFFERS: 1 current versions are no live row, 1 live rows are no current version" in (
        capsys.readouterr().out
    )
    spark.sql(f"DELETE FROM delta.`{history}` WHERE status = 'forged'")
    # cdc-delta sql: hist.shop_items, and live.shop_items as of a source time.
    query = "SELECT status, note, _cdc_is_current FROM hist.shop_items ORDER BY _cdc_valid_from"
    assert main(["sql", "--config", str(path), query]) == 0
    assert printed(capsys.readouterr().out) == [["new", "b", "false"], ["paid", "c", "true"]]
    # In a process of its own: the live views' database is set when a Spark session starts.
    then = at(250).isoformat(sep=" ")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cdc_delta.cli",
            "sql",
            "--config",
            str(path),
            "--as-of",
            then,
            "SELECT status, note FROM live.shop_items",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert printed(done.stdout) == [["new", "b"]]
    assert f"live views, as of source time {then}, from their history: live.shop_items" in done.stderr
    assert main(["sql", "--config", str(path), "--as-of", "last tuesday", "SELECT 1 FROM live.shop_items"]) == 2
    assert "--as-of 'last tuesday' is not a time" in capsys.readouterr().err


def printed(out: str) -> list[list[str]]:
    """The rows a query printed (Spark's table, its header left out)."""
    lines = [line for line in out.splitlines() if line.startswith("|")]
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines[1:]]


def test_history_turned_on_later_starts_from_the_rows(spark: Any, tmp_path: Path) -> None:
    src = Source()
    without = config(tmp_path, history=None, merge_now=False)
    merger = Merger(spark, without)
    processor = BatchProcessor(without, listener=merger)
    processor.process(kafka_frame(spark, src.changes(("c", 1, "new", None), ("c", 2, "new", None))), 0)
    processor.process(kafka_frame(spark, src.changes(("u", 1, "paid", None), ("d", 2, "new", None))), 1)
    merger.merge_all()
    cfg = config(tmp_path, merge_now=False)
    merger = Merger(spark, cfg)
    processor = BatchProcessor(cfg, listener=merger)
    processor.process(kafka_frame(spark, src.changes(("u", 1, "sent", None), ("c", 3, "new", None))), 2)
    merger.merge_all()
    at = src.at
    assert versions(spark, cfg) == [
        (1, "paid", None, "u", at(304), at(504), "u", False),  # its row when history began
        (1, "sent", None, "u", at(504), None, None, True),
        (3, "new", None, "c", at(604), None, None, True),
    ]
    assert current(versions(spark, cfg)) == live_table_rows(spark, cfg)
    # The hourly maintenance compacts the history (a file per merge) and changes none of its versions.
    found = versions(spark, cfg)
    history = history_path(cfg, "shop.items")
    files_before = len(_files(spark, history))
    report = run_maintenance(spark, cfg).tables[0]
    assert files_before > 1 and report.history_files_compacted == files_before, report
    assert f"history: {files_before} files compacted" in report.summary()
    assert len(_files(spark, history)) == 1 and versions(spark, cfg) == found


def _files(spark: Any, path: str) -> list[str]:
    return spark.read.format("delta").load(path).inputFiles()
