"""Columns added at the source with a default: older rows read the default, as the database's do.

``ALTER TABLE t ADD COLUMN c INT NOT NULL DEFAULT 7`` gives every existing row c = 7 without a binlog
event for any of them; only changes made after the ALTER carry c. So when the stream adds such a column
to a Delta table it also fills it in:

- rows already in the table get the default (one UPDATE, "backfill");
- a later-arriving event that lacks the column and is older than the ALTER gets the default too; one
  that lacks it and is newer (the column was dropped again) gets NULL, like any dropped column.

"Older than the ALTER" is judged by the ordering key: ``since`` is the earliest event of the batch
that first carried the column. The defaults, ``since`` and whether the backfill is done are kept in
the table property ``cdc_delta.column_defaults``, written before the column is added, so that a crash
between the ALTER and the backfill is finished by the next start.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from cdc_delta import columns as C
from cdc_delta.events.ordering import Seq
from cdc_delta.retry import retry_on_conflict
from cdc_delta.rows.schema_evolution import SchemaPlan, descriptor_columns
from cdc_delta.rows.truncates import seq_literal
from cdc_delta.rows.typed import typed_literal

logger = logging.getLogger(__name__)

PROPERTY = "cdc_delta.column_defaults"


@dataclass(frozen=True)
class ColumnDefault:
    """One added column's default (canonical JSON form) and where the source added it."""

    value: Any
    since: Seq
    filled: bool = False
    """Whether the rows that predate the column have been given the default."""


def from_properties(properties: Mapping[str, str]) -> dict[str, ColumnDefault]:
    raw = json.loads(properties.get(PROPERTY) or "{}")
    return {name: ColumnDefault(d["value"], Seq(*d["since"]), bool(d["filled"])) for name, d in raw.items()}


def save(spark: SparkSession, path: str, defaults: Mapping[str, ColumnDefault]) -> None:
    text = json.dumps({n: {"value": d.value, "since": list(d.since), "filled": d.filled} for n, d in defaults.items()})
    statement = (
        f"ALTER TABLE {C.delta_path_identifier(path)} SET TBLPROPERTIES ('{PROPERTY}' = {C.string_literal(text)})"
    )
    retry_on_conflict(lambda: spark.sql(statement), f"recording column defaults of {path}")


def added_defaults(plan: SchemaPlan, descriptors: Mapping[str, Seq], filled: bool) -> dict[str, ColumnDefault]:
    """The defaults of the columns ``plan`` adds, each since the earliest event that carries it."""
    out = {}
    for name, value in plan.added_defaults.items():
        carrying = [seq for d, seq in descriptors.items() if name in descriptor_columns(d)]
        if carrying:
            out[name] = ColumnDefault(value, min(carrying), filled)
    return out


def backfill(spark: SparkSession, path: str, types: Mapping[str, str], defaults: Mapping[str, ColumnDefault]) -> None:
    """Give the rows older than each column's addition its default (idempotent: only NULLs change)."""
    target = DeltaTable.forPath(spark, path)
    for name, default in defaults.items():
        condition = F.col(C.quote(name)).isNull() & (F.col(C.SEQ) < seq_literal(default.since))
        assignment = {C.quote(name): typed_literal(default.value, types[name])}

        def fill(condition: Column = condition, assignment: Mapping[str, Column] = assignment) -> None:
            target.update(condition=condition, set=dict(assignment))

        retry_on_conflict(fill, f"filling {name} of {path} with its default")
        logger.info("table %s: rows older than the new column %s read its default %r", path, name, default.value)


def finish(
    spark: SparkSession, path: str, types: Mapping[str, str], defaults: Mapping[str, ColumnDefault]
) -> dict[str, ColumnDefault]:
    """Backfill the columns not filled yet, then record them as filled."""
    pending = {n: d for n, d in defaults.items() if not d.filled}
    if not pending:
        return dict(defaults)
    backfill(spark, path, types, pending)
    done = {n: replace(d, filled=True) for n, d in defaults.items()}
    save(spark, path, done)
    return done
