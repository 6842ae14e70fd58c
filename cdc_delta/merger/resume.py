"""Resume a stopped table once its cause is dealt with: clear its stopped flag, and accept the Delta
table now at its path (or none) where it was deleted or replaced under the stream."""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession

from cdc_delta.config import AppConfig
from cdc_delta.delta import stop_records
from cdc_delta.delta.registry import TableRegistry, registry_path
from cdc_delta.delta.tables import clear_stopped
from cdc_delta.rows.target import table_state

logger = logging.getLogger(__name__)


def resume_table(spark: SparkSession, config: AppConfig, name: str) -> list[str]:
    """Resume table ``name``; returns what was done, one line each (empty: it was not stopped)."""
    path = config.table_path(name)
    done = []
    recorded = stop_records.clear(config, name)  # a stop the table could not hold (its log unreadable then)
    if recorded is not None:
        done.append(f"table {name}: stop record cleared (it was: {recorded})")
    state = table_state(spark, path)
    registry = TableRegistry(spark, registry_path(config))
    known = registry.get(name)
    if known is not None and known.table_id != state.table_id:
        registry.replace(name, path, state.table_id)
        if state.table_id is None:
            done.append(
                f"table {name}: the deleted Delta table {known.table_id} is forgotten; the next batch with its "
                "changes creates it anew, holding those changes only until the source is read again"
            )
        else:
            done.append(f"table {name}: Delta table {state.table_id} at {path} accepted (was {known.table_id})")
    if state.stopped:
        clear_stopped(spark, path)
        done.append(f"table {name}: stopped flag cleared (it was: {state.stopped_reason or 'no reason recorded'})")
    for line in done:
        logger.info("%s", line)
    return done
