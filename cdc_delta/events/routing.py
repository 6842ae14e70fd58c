"""Which logical table an event belongs to: by topic, by a regex over the source db/table for shards,
and by pattern entries that name one table per source table (``{db}.{table}``)."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")
"""A logical table's name: ``db.table`` or ``table``."""
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class NameTemplate:
    """A pattern entry's ``name``: literal parts and placeholders (``{db}``, ``{table}``, the named groups
    of its topic pattern)."""

    text: str

    @staticmethod
    def is_template(name: str) -> bool:
        return "{" in name

    @property
    def placeholders(self) -> list[str]:
        return _PLACEHOLDER.findall(self.text)

    def looks_valid(self) -> bool:
        """Whether the names it makes can be table names (each placeholder standing for a plain word)."""
        return bool(TABLE_NAME.fullmatch(_PLACEHOLDER.sub("x", self.text)))

    @functools.cached_property
    def regex(self) -> re.Pattern[str]:
        """What the names it makes look like (each placeholder one or more name characters)."""
        parts = _PLACEHOLDER.split(self.text)
        return re.compile("".join(re.escape(p) if i % 2 == 0 else "[A-Za-z0-9_]+" for i, p in enumerate(parts)))

    def render(self, values: dict[str, str | None]) -> str:
        return _PLACEHOLDER.sub(lambda m: values.get(m.group(1)) or "", self.text)


class Owners:
    """Which entry a table's name belongs to: the listed table of that name, else the first pattern entry
    whose names look like it. The router keeps to it when it names a table, so every process finds a
    table's entry (key, settings) from its name alone."""

    def __init__(self, entry_names: Iterable[str]) -> None:
        names = list(entry_names)
        self._listed = {n for n in names if not NameTemplate.is_template(n)}
        self._templates = [NameTemplate(n) for n in names if NameTemplate.is_template(n)]

    def of(self, name: str) -> str | None:
        """The name (or name template) of the entry that owns ``name``; None when none does."""
        if name in self._listed:
            return name
        return next((t.text for t in self._templates if t.regex.fullmatch(name)), None)


class RouteSpec(Protocol):
    """What routing needs of a table's config (:class:`cdc_delta.config.TableConfig` is one)."""

    @property
    def name(self) -> str: ...
    @property
    def topics(self) -> Sequence[str]: ...
    @property
    def topic_pattern(self) -> str | None: ...
    @property
    def source_database(self) -> str | None: ...
    @property
    def source_table(self) -> str | None: ...


@dataclass(frozen=True)
class _Route:
    table: str
    topics: frozenset[str]
    topic_pattern: re.Pattern[str] | None
    source_database: re.Pattern[str] | None
    source_table: re.Pattern[str] | None

    def matches(self, topic: str, database: str | None, table: str | None) -> bool:
        by_topic = topic in self.topics or bool(self.topic_pattern and self.topic_pattern.fullmatch(topic))
        if not by_topic and (self.topics or self.topic_pattern):
            return False
        if self.source_database and not self.source_database.fullmatch(database or ""):
            return False
        return not (self.source_table and not self.source_table.fullmatch(table or ""))


@dataclass(frozen=True)
class _Decision:
    table: str | None
    refusal: str | None = None


class Router:
    """Maps (topic, source db, source table) to a logical table name: the first listed table whose route
    matches, else the first pattern entry whose route matches, which names the table from the event.

    A name a pattern entry makes must be its own: a name that a listed table has, or that an earlier
    pattern entry's names look like, is refused (the event is dead-lettered with the reason), so a
    table's name alone tells every process which entry (key, settings) it belongs to."""

    def __init__(self, tables: Sequence[RouteSpec]) -> None:
        routes = [
            _Route(
                table=t.name,
                topics=frozenset(t.topics),
                topic_pattern=re.compile(t.topic_pattern) if t.topic_pattern else None,
                source_database=re.compile(t.source_database) if t.source_database else None,
                source_table=re.compile(t.source_table) if t.source_table else None,
            )
            for t in tables
        ]
        self._listed = [r for r in routes if not NameTemplate.is_template(r.table)]
        self._patterns = [(r, NameTemplate(r.table)) for r in routes if NameTemplate.is_template(r.table)]
        self._owners = Owners(r.table for r in routes)
        self._decided: dict[tuple[str, str | None, str | None], _Decision] = {}

    def route(self, topic: str, database: str | None, table: str | None) -> str | None:
        """The logical table for an event, or None when no configured table takes it (:meth:`refusal`)."""
        return self._decide(topic, database, table).table

    def refusal(self, topic: str, database: str | None, table: str | None) -> str:
        """Why no table takes an event: the dead letter's reason."""
        decision = self._decide(topic, database, table)
        unrouted = f"no configured table routes topic {topic!r} (source db {database!r}, table {table!r})"
        return decision.refusal or unrouted

    def pattern_of(self, name: str) -> str | None:
        """The name template of the pattern entry that a table named ``name`` belongs to, or None."""
        owner = self._owners.of(name)
        return owner if owner is not None and NameTemplate.is_template(owner) else None

    def _decide(self, topic: str, database: str | None, table: str | None) -> _Decision:
        at = (topic, database, table)
        decision = self._decided.get(at)
        if decision is None:
            decision = self._decided[at] = self._first(topic, database, table)
        return decision

    def _first(self, topic: str, database: str | None, table: str | None) -> _Decision:
        for candidate in self._listed:
            if candidate.matches(topic, database, table):
                return _Decision(candidate.table)
        for k, (candidate, _) in enumerate(self._patterns):
            if candidate.matches(topic, database, table):
                return self._named(k, topic, database, table)
        return _Decision(None)

    def _named(self, k: int, topic: str, database: str | None, table: str | None) -> _Decision:
        route, template = self._patterns[k]
        found = route.topic_pattern.fullmatch(topic) if route.topic_pattern else None
        values: dict[str, str | None] = {"db": database, "table": table, **(found.groupdict() if found else {})}
        entry = f"pattern entry {template.text!r}"
        empty = [p for p in template.placeholders if not values.get(p)]
        if empty:
            missing = ", ".join(empty)
            return _Decision(None, f"{entry} takes topic {topic!r} but the event has no {missing} to name it by")
        name = template.render(values)
        if not TABLE_NAME.fullmatch(name):
            return _Decision(
                None,
                f"{entry} makes the name {name!r} for topic {topic!r}, not a table name (letters, digits and _, "
                "not starting with a digit): list that table with its own entry and a name",
            )
        owner = self._owners.of(name)
        if owner == template.text:
            return _Decision(name)
        if owner is None:  # a placeholder's value held a '.'
            why = f"which its own names do not look like (each part of {template.text!r} one word)"
            return _Decision(None, f"{entry} makes the name {name!r} for topic {topic!r}, {why}")
        if not NameTemplate.is_template(owner):
            return _Decision(
                None,
                f"{entry} makes the name {name!r} for topic {topic!r}, a listed table's, whose route does not take "
                "the topic: add the topic to that table's entry, or narrow the pattern",
            )
        return _Decision(
            None,
            f"{entry} makes the name {name!r} for topic {topic!r}, a name of the earlier pattern entry "
            f"{owner!r}: list the narrower entry first (a name belongs to the first entry whose names look like it)",
        )
