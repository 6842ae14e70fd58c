"""Follow source schema changes: add new columns, widen where Delta allows, stop the table otherwise."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cdc_delta import columns as C
from cdc_delta.events import column_types
from cdc_delta.exceptions import SchemaChangeError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SchemaPlan:
    """The business columns of a table after this batch, and the changes that get it there."""

    columns: tuple[tuple[str, str], ...]
    added: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    widened: tuple[tuple[str, str, str], ...] = field(default_factory=tuple)
    """(column, old type, new type)"""
    added_defaults: dict[str, Any] = field(default_factory=dict)
    """The source's default of each added column that has one (canonical JSON form)."""

    @property
    def changed(self) -> bool:
        return bool(self.added or self.widened)


def plan_schema(
    table: str,
    existing: Iterable[tuple[str, str]],
    incoming: Iterable[str],
    allow_widening: bool,
) -> SchemaPlan:
    """Merge the table's current business columns with the ``schema_json`` descriptors of a batch.

    A new column is added; a narrower type is cast up; a wider type widens the column when
    ``allow_widening`` and Delta can; anything else raises :class:`SchemaChangeError`.
    """
    current = dict(existing)
    order = list(current)
    added: dict[str, str] = {}
    widened: dict[str, tuple[str, str]] = {}
    defaults: dict[str, Any] = {}
    for descriptor in sorted(set(incoming)):
        for name, type_name, *default in json.loads(descriptor):
            if name not in current:
                _check_name(table, name, current)
                current[name] = type_name
                order.append(name)
                added[name] = type_name
                if default:
                    defaults[name] = default[0]
            elif column_types.fits_in(type_name, current[name]):
                continue
            else:
                wider = column_types.widened(current[name], type_name) if allow_widening else None
                if wider is None:
                    raise SchemaChangeError(
                        f"table {table}: column {name!r} changed type from {current[name]} to {type_name}, "
                        "which the Delta table cannot follow"
                        + ("" if allow_widening else " (allow_type_widening is off)")
                        + ". The table is stopped and its changes stay pending in the changelog; "
                        f"migrate the column (ALTER TABLE or a rebuild), then `cdc-delta resume-table --table "
                        f"{table}` and restart the stream: it merges them."
                    )
                if name in added:
                    added[name] = wider
                else:
                    old = widened.get(name, (current[name], wider))[0]
                    widened[name] = (old, wider)
                current[name] = wider
    return SchemaPlan(
        columns=tuple((name, current[name]) for name in order),
        added=tuple(added.items()),
        widened=tuple((name, old, new) for name, (old, new) in widened.items()),
        added_defaults=defaults,
    )


@dataclass(frozen=True)
class OrderedPlan:
    """The schema plan of a table's pending changes, followed landing by landing: where a landing brings
    a change the table cannot follow, the plan of the landings before it, and the refusal."""

    plan: SchemaPlan
    through: int | None = None
    """None: the plan covers every landing. Else the newest landing it covers (the changes past it wait
    behind :attr:`error`)."""
    error: SchemaChangeError | None = None

    def covers(self, first_landings: Mapping[str, int]) -> list[str]:
        """The descriptors (of ``first_landings``: each with the landing of its first change) the plan covers."""
        return [d for d, at in first_landings.items() if self.through is None or at <= self.through]


def plan_in_order(
    table: str, existing: Iterable[tuple[str, str]], first_landings: Mapping[str, int], allow_widening: bool
) -> OrderedPlan:
    """:func:`plan_schema` of the descriptors of ``first_landings`` (each with the landing of its first
    change); where they cannot all be followed, the plan of the longest run of landings that can, so that
    the changes before an incompatible schema change are merged and only those from it on wait. Raises
    :class:`SchemaChangeError` where the first of the landings brings it (nothing can be followed)."""
    existing = tuple(existing)
    try:
        return OrderedPlan(plan_schema(table, existing, first_landings, allow_widening))
    except SchemaChangeError as refused:
        error = refused
    landings = sorted(set(first_landings.values()))
    plan = None
    for landing in landings:
        try:
            upto = [d for d, at in first_landings.items() if at <= landing]
            plan = plan_schema(table, existing, upto, allow_widening)
        except SchemaChangeError as refused:
            if plan is None:
                raise
            return OrderedPlan(plan, landing - 1, refused)
    raise error  # every landing followed one by one: not reached (the whole set was refused)


# Characters Delta refuses in column names unless the table uses column mapping.
_NOT_IN_DELTA_NAMES = set(" ,;{}()\n\t=")


def _check_name(table: str, name: str, columns: Iterable[str]) -> None:
    """Refuse a new column that Delta cannot hold beside the table's ``columns``."""
    fix = (
        "The table is stopped and its changes stay pending in the changelog; rename the column at the source "
        f"(or replicate a view with a plain name), then `cdc-delta resume-table --table {table}`, restart the "
        f"stream, and read the table from the source again (`cdc-delta resnapshot --table {table}`): the changes "
        "that carry the old name cannot be merged."
    )
    bad = sorted(set(name) & _NOT_IN_DELTA_NAMES)
    if bad:
        raise SchemaChangeError(
            f"table {table}: source column {name!r} has characters a Delta column name cannot hold "
            f"({' '.join(repr(c) for c in bad)}). {fix}"
        )
    if "`" in name:
        raise SchemaChangeError(
            f"table {table}: source column {name!r} holds a backtick, which Delta's MERGE cannot address. {fix}"
        )
    if name.lower().startswith(C.PREFIX):
        raise SchemaChangeError(
            f"table {table}: source column {name!r} starts with {C.PREFIX!r}, which names cdc-delta's own "
            f"columns. {fix}"
        )
    same = [c for c in columns if c.lower() == name.lower()]
    if same:
        raise SchemaChangeError(
            f"table {table}: source column {name!r} differs from column {same[0]!r} only in case, and Delta "
            f"column names ignore case. {fix}"
        )


@functools.lru_cache(maxsize=4096)
def descriptor_columns(descriptor: str) -> frozenset[str]:
    """The column names of a ``schema_json`` descriptor (``[[name, type(, default)], ...]``)."""
    return frozenset(entry[0] for entry in json.loads(descriptor))
