"""The tables known at run time: those the config lists, and those its pattern entries made so far, with
the keys the table index recorded for them (:func:`cdc_delta.changelog.table_index.indexed` reads it).
The config stays the frozen model of the file; a job that lists or looks up tables is given a catalog."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from cdc_delta.config import AppConfig, KeyNotKnown, TableConfig

logger = logging.getLogger(__name__)


class TableCatalog:
    """The config's tables and those its pattern entries made (``made``: each name with the key the
    table index records for it, empty where the entry names the key)."""

    def __init__(self, config: AppConfig, made: Mapping[str, Sequence[str]] | None = None) -> None:
        self.config = config
        self.made = {name: tuple(key) for name, key in (made or {}).items()}

    def tables(self) -> list[TableConfig]:
        """Every table: those listed, then those the pattern entries made; a made table whose key is not
        known yet is left out, with a warning."""
        listed = self.config.listed_tables
        names = {t.name for t in listed}
        made = []
        for name in sorted(set(self.made) - names):
            try:
                made.append(self.pattern_table(name))
            except KeyNotKnown as exc:
                logger.warning("%s: left out for now: %s", name, exc)
        return listed + [t for t in made if t is not None]

    def table(self, name: str) -> TableConfig:
        """The table named ``name``: listed, or made by a pattern entry (:meth:`pattern_table`)."""
        entry = self.config.entry(name)
        made = self.pattern_table(name) if entry.is_pattern else entry
        assert made is not None
        return made

    def pattern_table(self, name: str) -> TableConfig | None:
        """The table named ``name`` that a pattern entry makes, or None. Raises :class:`KeyNotKnown` for a
        table whose key comes from Debezium's record key when the table index does not hold it."""
        entry = self.config.pattern_entry(name)
        if entry is None or entry.key:
            return self.config.pattern_table(name)
        if name in self.made and not self.made[name]:
            raise KeyNotKnown(
                f"table {name!r} was made while pattern entry {entry.name!r} named its key, and its records have not "
                "named it since: the stream records it with the table's next change (or give the entry its key again)"
            )
        if not self.made.get(name):
            return self.config.pattern_table(name)  # raises: not known here
        return entry.made(name, self.made[name])

    def snapshot_tables(self) -> list[TableConfig]:
        """The tables the nightly snapshot publishes (of those :meth:`tables` lists)."""
        return [t for t in self.tables() if self.config.in_snapshot(t)]
