"""Which logical table an event belongs to: by topic, and by a regex over the source db/table for shards."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


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


class Router:
    """Maps (topic, source db, source table) to a logical table name; the first table that matches wins."""

    def __init__(self, tables: Sequence[RouteSpec]) -> None:
        self._routes = [
            _Route(
                table=t.name,
                topics=frozenset(t.topics),
                topic_pattern=re.compile(t.topic_pattern) if t.topic_pattern else None,
                source_database=re.compile(t.source_database) if t.source_database else None,
                source_table=re.compile(t.source_table) if t.source_table else None,
            )
            for t in tables
        ]

    def route(self, topic: str, database: str | None, table: str | None) -> str | None:
        """The logical table for an event, or None when no configured table claims it."""
        for candidate in self._routes:
            if candidate.matches(topic, database, table):
                return candidate.table
        return None
