"""Follow source schema changes: add new columns, widen where Delta allows, stop the table otherwise."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

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
    for descriptor in sorted(set(incoming)):
        for name, type_name in json.loads(descriptor):
            if name not in current:
                current[name] = type_name
                order.append(name)
                added[name] = type_name
            elif column_types.fits_in(type_name, current[name]):
                continue
            else:
                wider = column_types.widened(current[name], type_name) if allow_widening else None
                if wider is None:
                    raise SchemaChangeError(
                        f"table {table}: column {name!r} changed type from {current[name]} to {type_name}, "
                        "which the Delta table cannot follow"
                        + ("" if allow_widening else " (allow_type_widening is off)")
                        + ". The table is stopped and its events are parked in the dead letters; "
                        "migrate the column (ALTER TABLE or a rebuild), clear the table property "
                        "cdc_delta.stopped, and replay the parked events."
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
    )
