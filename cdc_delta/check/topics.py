"""What each topic of the subscription becomes (``cdc-delta check-config --discover``): the table it
feeds (listed, or made by a pattern entry) with its key, the reason it would go to the dead letters, or
no table (the connector's schema-change, transaction and heartbeat topics). The source database and
table are read from the topic's name as Debezium names it, ``<topic.prefix>.<db>.<table>``; the stream
reads them from each event."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cdc_delta.catalog import TableCatalog
from cdc_delta.changelog.table_index import Made, Origin, claim, knowing
from cdc_delta.config import AppConfig, KeyNotKnown
from cdc_delta.events.routing import Router

NO_TABLE = "no table (by its name, the connector's schema-change, transaction or heartbeat topic)"


@dataclass(frozen=True)
class TopicPlan:
    topic: str
    table: str | None = None
    how: str = ""
    """``listed`` or the pattern entry that makes the table; else why there is no table."""
    key: tuple[str, ...] = ()
    """Empty: the key its records will name (Debezium's record key, read when the stream first lands it)."""

    @property
    def refused(self) -> bool:
        return self.table is None and self.how != NO_TABLE

    def line(self) -> str:
        if self.table is None:
            return f"{self.topic} -> {'dead letters: ' if self.refused else ''}{self.how}"
        key = f"key {list(self.key)}" if self.key else "key from its records (Debezium's record key)"
        return f"{self.topic} -> {self.table} ({self.how}, {key})"


def plan_topics(config: AppConfig, topics: Iterable[str], known: Mapping[str, Made]) -> list[TopicPlan]:
    """What each of ``topics`` becomes, against the tables the stream made so far (``known``)."""
    router = Router(config.tables)
    routed: dict[str, tuple[str, str, str]] = {}
    plans: dict[str, TopicPlan] = {}
    for topic in sorted(set(topics)):
        parts = topic.split(".")
        if len(parts) < 3 or parts[-1] == "transaction" or topic.startswith("__debezium-heartbeat"):
            plans[topic] = TopicPlan(topic, how=NO_TABLE)
            continue
        db, table = parts[-2], parts[-1]
        name = router.route(topic, db, table)
        if name is None:
            plans[topic] = TopicPlan(topic, how=router.refusal(topic, db, table))
        else:
            routed[topic] = (name, db, table)
    origins: dict[str, set[Origin]] = {}
    for topic, (name, db, table) in routed.items():
        origins.setdefault(name, set()).add(Origin(topic, db, table, truncate=False))
    refused = claim(config, known, origins).refused
    catalog = knowing(config, known)
    for topic, (name, _, _) in routed.items():
        entry = config.owner(name)
        assert entry is not None  # the router named it
        if (name, topic) in refused:
            plans[topic] = TopicPlan(topic, how=refused[(name, topic)])
        else:
            how = f"made by {entry.name!r}" if entry.is_pattern else "listed"
            plans[topic] = TopicPlan(topic, name, how, _key(catalog, name))
    return [plans[t] for t in sorted(plans)]


def _key(catalog: TableCatalog, name: str) -> tuple[str, ...]:
    try:
        return tuple(catalog.table(name).key)
    except KeyNotKnown:  # its records will name it
        return ()


def summary(plans: list[TopicPlan]) -> str:
    tables = {p.table for p in plans if p.table is not None}
    made = {p.table for p in plans if p.table is not None and p.how != "listed"}
    refused = sum(p.refused for p in plans)
    none = sum(p.how == NO_TABLE for p in plans)
    return (
        f"discover: {len(plans)} topics: {len(tables)} tables ({len(made)} made by pattern entries), "
        f"{refused} topics to the dead letters, {none} without a table"
    )
