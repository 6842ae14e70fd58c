"""Fresh reads through ``cdc-delta sql``: ``live.<db>_<table>`` is the merged table overridden by the
changes still pending in the changelog, ``db.table`` the table as of its last merge. The generator is the
reference: its rows after the first batch (merged) and after the second (landed, not merged)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdc_delta.cli.main import main
from cdc_delta.config import load_config
from cdc_delta.demo.batches import DEMO_TABLES, demo_tables, kafka_frame
from cdc_delta.demo.generator import ChangeGenerator
from cdc_delta.merger.run import Merger
from cdc_delta.stream.batch import BatchProcessor
from tests.services import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.spark]

QUERY = """
SELECT v, concat_ws(' ', sort_array(collect_list(row))) AS rows FROM (
  SELECT 'live' AS v, concat(id, '=', status) AS row FROM live.inventory_orders
  UNION ALL SELECT 'all', concat(id, '=', status, IF(_cdc_deleted, '-', '')) FROM LIVE.`inventory_orders_all`
  UNION ALL SELECT 'merged', concat(id, '=', status) FROM inventory.orders WHERE NOT _cdc_deleted
) GROUP BY v ORDER BY v
"""


def described(rows: dict[int, dict[str, Any]], deleted: dict[int, dict[str, Any]] | None = None) -> str:
    """As the query prints a view: ``id=status`` sorted, a soft-deleted row with ``-``."""
    items = [f"{k}={r['status']}" for k, r in rows.items()]
    items += [f"{k}={r['status']}-" for k, r in (deleted or {}).items()]
    return " ".join(sorted(items))


def test_live_views_see_pending_changes_the_merged_table_does_not(spark: Any, tmp_path: Path) -> None:
    config_path = tmp_path / "cdc.yaml"
    config_path.write_text(
        yaml.safe_dump(
            {
                "app_id": "live",
                "storage": {"root": str(tmp_path / "lake")},
                "merge": {"max_delay_seconds": 3600, "min_events": 1_000_000},
                "spark": {"master": "local[1]", "shuffle_partitions": 2, "conf": {"spark.ui.enabled": "false"}},
                "tables": demo_tables(),
            }
        )
    )
    config = load_config(config_path, env={})
    processor = BatchProcessor(config)  # lands only: nothing merges by itself
    generator = ChangeGenerator(DEMO_TABLES[:1], seed=5)
    source = (DEMO_TABLES[0].db, DEMO_TABLES[0].table)
    offset = iter(range(1_000_000))
    last_image: dict[int, dict[str, Any]] = {}

    def batch(batch_id: int, count: int) -> None:
        records = []
        for change in generator.changes(count):
            records.append((change.topic, 0, next(offset), change.key, change.value))
            last_image.update(generator.rows[source])
        processor.process(kafka_frame(spark, records), batch_id)

    batch(0, 40)
    Merger(spark, config).merge_all()
    merged = dict(generator.rows[source])
    batch(1, 40)  # updates, deletes and inserts, landed and pending
    assert generator.rows[source] != merged

    done = subprocess.run(
        [sys.executable, "-m", "cdc_delta.cli", "sql", "--config", str(config_path), QUERY],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    printed = {
        cells[0]: cells[1]
        for line in done.stdout.splitlines()
        if line.startswith("|") and (cells := [c.strip() for c in line.strip("|").split("|")])[0] != "v"
    }
    assert printed["live"] == described(generator.rows[source])
    deleted = {k: last_image[k] for k in generator.deleted[source]}
    assert printed["all"] == described(generator.rows[source], deleted)
    assert printed["merged"] == described(merged)
    assert "live views, as of now: live.inventory_orders, live.inventory_orders_all" in done.stderr


def test_a_query_spark_cannot_run_is_one_line_naming_the_tables(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "cdc.yaml"
    config.write_text(
        yaml.safe_dump({"app_id": "q", "storage": {"root": str(tmp_path / "lake")}, "tables": demo_tables()})
    )
    for query in ("SELECT * FROM live.inventory_order", "SELEC 1"):
        assert main(["sql", "--config", str(config), query]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert err.startswith("cdc-delta: error: the query cannot be run: ["), err
        assert err.endswith(
            "(tables: db.table as merged, live.db_table and live.db_table_all fresh, hist.db_table its versions; "
            "see cdc-delta sql --help)"
        )
