"""Pattern entries: one entry makes a table per source table; its name alone tells its entry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cdc_delta.catalog import TableCatalog
from cdc_delta.cli.main import main
from cdc_delta.config import parse_config
from cdc_delta.exceptions import ConfigError

SHOP: dict[str, Any] = {"name": "shop.{table}", "topic_pattern": r"srv\.shop\..+", "key": ["id"], "zorder_by": ["id"]}
ANY: dict[str, Any] = {"name": "{db}.{table}", "topic_pattern": r"srv\.[^.]+\.[^.]+", "key": ["uuid"]}
LISTED: dict[str, Any] = {"name": "shop.orders", "topics": ["srv.shop.orders"], "key": ["order_id"]}


def config(*tables: dict[str, Any], **extra: Any):
    return parse_config({"app_id": "p", "storage": {"root": "/lake"}, "tables": list(tables), **extra})


def known(c: Any, *names: str) -> Any:
    """``c`` knowing ``names`` as the table index would (keys named by their entries)."""
    return TableCatalog(c, {name: () for name in names})


def refusal(*tables: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        config(*tables)
    return str(info.value)


def test_a_made_table_has_its_entrys_key_and_settings_and_a_path_from_its_name() -> None:
    c = config(LISTED, SHOP, ANY)
    made = c.table("shop.items")
    assert (made.name, made.key, made.zorder_by, made.is_pattern) == ("shop.items", ["id"], ["id"], False)
    assert c.storage.table_path(made) == "/lake/shop/items"
    assert c.table("crm.people").key == ["uuid"]  # the later entry: the first one's names are all shop.*
    assert c.table("shop.orders").key == ["order_id"]  # a listed table owns its name, wherever it is listed
    # The entries are indexed once (a batch asks per table); a copy with other tables asks those.
    copy = c.model_copy(update={"tables": [c.tables[0].model_copy(update={"key": ["other"]}), *c.tables[1:]]})
    assert (copy.table("shop.orders").key, c.table("shop.orders").key) == (["other"], ["order_id"])
    assert copy.owner("nowhere") is None and copy.owner("shop.items") is copy.tables[1]


def test_every_table_is_the_listed_ones_then_those_the_index_found() -> None:
    c = config(SHOP, LISTED)
    assert [t.name for t in TableCatalog(c).tables()] == ["shop.orders"]  # before the index is read
    names = [t.name for t in known(c, "shop.items", "shop.orders", "shop.carts", "nowhere").tables()]
    assert names == ["shop.orders", "shop.carts", "shop.items"]  # a name no entry makes is left out
    assert [t.name for t in known(c, "shop.items").snapshot_tables()] == ["shop.orders", "shop.items"]


def test_an_unknown_name_lists_the_pattern_entries() -> None:
    with pytest.raises(ConfigError, match=r"no table named 'crm.x'.*made by 'shop\.\{table\}'"):
        config(SHOP).table("crm.x")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"name": "{db}.{table}", "key": ["id"]}, "pattern entry '{db}.{table}' has no route: set topic_pattern"),
        (
            {**ANY, "path": "/x", "columns": {"id": "bigint"}},
            "pattern entry '{db}.{table}' cannot set path, columns: they belong to one table",
        ),
        (
            {**ANY, "name": "{schema}.{table}"},
            "pattern entry '{schema}.{table}': {schema} is neither {db}, {table} nor a named group",
        ),
        ({**ANY, "name": "{db}-{table}"}, "table name '{db}-{table}' must look like db.table or table"),
    ],
)
def test_a_pattern_entry_that_cannot_work_is_refused(entry: dict[str, Any], message: str) -> None:
    assert message in refusal(entry)


def test_named_groups_of_the_topic_pattern_may_name_the_table() -> None:
    entry = {"name": "{server}_{db}.{table}", "topic_pattern": r"(?P<server>eu|us)\.[^.]+\.[^.]+", "key": ["id"]}
    assert config(entry).table("eu_shop.orders").key == ["id"]


def test_check_config_shows_a_pattern_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cdc.yaml"
    path.write_text(
        "app_id: p\nstorage: {root: /lake}\nkafka: {topic_pattern: 'srv\\..*'}\n"
        "tables:\n  - {name: '{db}.{table}', topic_pattern: 'srv\\..+', key: [id]}\n"
    )
    assert main(["check-config", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "{db}.{table}: key ['id'] -> /lake/{db}/{table} (a table per source table of topics 'srv\\\\..+')" in out
    assert "note: the pattern entries" not in out

    path.write_text(path.read_text().replace("{topic_pattern: 'srv\\..*'}", "{topics: [srv.a.b]}"))
    assert main(["check-config", "--config", str(path)]) == 0
    assert "note: the pattern entries see only the topics kafka.topics lists" in capsys.readouterr().out


def test_made_tables_that_would_share_a_hive_name_get_no_live_table(caplog: pytest.LogCaptureFixture) -> None:
    from cdc_delta.views.live_tables import _named_apart

    c = config({"name": "crm.items", "topics": ["srv.crm.items"], "key": ["id"]}, ANY)
    tables = known(c, "shop.items", "erp.items", "shop.carts").tables()
    assert [t.name for t in _named_apart(c, tables)] == ["crm.items", "shop.carts"]
    why = "shop.items: no live table: cdc_live.items would also be the Hive name of crm.items, erp.items"
    assert why in caplog.text


def test_a_table_belongs_to_the_topic_of_its_rows_and_a_truncate_from_elsewhere_is_refused() -> None:
    from cdc_delta.changelog.table_index import Made, Origin, claim

    c = config(LISTED, {"name": "{db}.{table}", "topic_pattern": r"(s1|s2)\.[^.]+\.[^.]+", "key": ["id"]})
    rows = Origin("s1.sales.items", "sales", "items", truncate=False)
    drop = Origin("s1", "sales", "items", truncate=True)  # a DROP TABLE on s1's schema-change topic
    first = claim(c, {}, {"sales.items": {rows, drop}, "shop.orders": {Origin("x", "shop", "o", False)}})
    assert (first.new, first.refused) == ({"sales.items": Made("s1.sales.items", "sales", "items")}, {})

    known = first.new
    other_rows = Origin("s2.sales.items", "sales", "items", truncate=False)
    other_truncate = Origin("s2.sales.items", "sales", "items", truncate=True)
    other_drop = Origin("s2", "sales", "items", truncate=True)
    later = claim(c, known, {"sales.items": {rows, other_rows, other_truncate, other_drop}})
    assert later.new == {}
    assert set(later.refused) == {("sales.items", "s2.sales.items"), ("sales.items", "s2")}
    assert "takes a truncate of table 'sales.items' from topic 's2'" in later.refused[("sales.items", "s2")]
    assert claim(c, {}, {"sales.items": {other_drop}}).new == {}  # a drop of a table never seen claims nothing


def test_discover_says_what_each_topic_becomes() -> None:
    from cdc_delta.changelog.table_index import Made
    from cdc_delta.check.topics import NO_TABLE, plan_topics, summary

    c = config(LISTED, {**ANY, "name": "{table}", "topic_pattern": r"srv\..+"})
    topics = ["srv", "srv.transaction", "srv.shop.orders", "srv.shop.items", "srv.crm.items", "srv.crm.a-b"]
    plans = {p.topic: p for p in plan_topics(c, topics, {"items": Made("srv.crm.items", "crm", "items")})}
    assert plans["srv"].how == plans["srv.transaction"].how == NO_TABLE
    assert plans["srv.shop.orders"].line() == "srv.shop.orders -> shop.orders (listed, key ['order_id'])"
    assert plans["srv.crm.items"].line() == "srv.crm.items -> items (made by '{table}', key ['uuid'])"
    assert plans["srv.shop.items"].refused  # the stream made `items` of srv.crm.items already
    assert "from topic 'srv.shop.items', but the table is topic 'srv.crm.items''s" in plans["srv.shop.items"].how
    assert plans["srv.crm.a-b"].line().startswith("srv.crm.a-b -> dead letters: pattern entry '{table}' makes")
    assert summary(list(plans.values())) == (
        "discover: 6 topics: 2 tables (1 made by pattern entries), 2 topics to the dead letters, 2 without a table"
    )


KEYLESS: dict[str, Any] = {"name": "{db}.{table}", "topic_pattern": r"srv\.[^.]+\.[^.]+"}


def test_an_entry_without_a_key_takes_each_tables_key_from_the_index() -> None:
    from cdc_delta.config import KeyNotKnown

    c = config(LISTED, KEYLESS)
    with pytest.raises(KeyNotKnown, match=r"the key of table 'shop.items' is not known here: pattern entry"):
        c.table("shop.items")
    assert c.entry("shop.items").name == "{db}.{table}"  # its entry and path are known from the name alone
    assert c.table_path("shop.items") == "/lake/shop/items"
    k = TableCatalog(c, {"shop.items": ("sku", "store")})
    assert k.table("shop.items").key == ["sku", "store"]
    assert [(t.name, t.key) for t in k.tables()] == [
        ("shop.orders", ["order_id"]),
        ("shop.items", ["sku", "store"]),
    ]
    before = TableCatalog(c, {"shop.items": ()})  # the index of an entry that named keys before
    with pytest.raises(KeyNotKnown, match="was made while pattern entry '{db}.{table}' named its key"):
        before.table("shop.items")
    assert [t.name for t in before.tables()] == ["shop.orders"]  # left out, with a warning, until its key
    with pytest.raises(ConfigError, match=r"tables\[a\]\.key: key must name at least one primary-key column"):
        config({"name": "a", "topics": ["t"]})  # a listed table still names its key


def test_a_new_tables_key_is_the_one_its_records_name_and_a_change_or_none_is_refused() -> None:
    from cdc_delta.changelog.table_index import Made, Origin, _by_name, claim

    c = config(KEYLESS)
    items = Origin("srv.shop.items", "shop", "items", truncate=False)
    logs = Origin("srv.shop.logs", "shop", "logs", truncate=False)
    keys = {("shop.items", "srv.shop.items"): {("sku", "store")}, ("shop.logs", "srv.shop.logs"): {()}}
    first = claim(c, {}, {"shop.items": {items}, "shop.logs": {logs}}, keys)
    assert first.new == {"shop.items": Made("srv.shop.items", "shop", "items", ("sku", "store"))}
    assert set(first.refused) == {("shop.logs", "srv.shop.logs")}
    assert (
        "table 'shop.logs' (topic 'srv.shop.logs') has none: its records have no key"
        in first.refused[("shop.logs", "srv.shop.logs")]
    )

    same = claim(c, first.new, {"shop.items": {items}}, {("shop.items", "srv.shop.items"): {("sku", "store")}})
    assert (same.new, same.refused) == ({}, {})
    changed = claim(
        c, first.new, {"shop.items": {items}}, {("shop.items", "srv.shop.items"): {("sku", "store"), ("id",)}}
    )
    why = changed.refused[("shop.items", "srv.shop.items")]
    assert (
        "has key ['sku', 'store'] (its primary key when it was found), but records of topic 'srv.shop.items' "
        "now have key ['id']" in why
    )
    mixed = claim(c, {}, {"shop.items": {items}}, {("shop.items", "srv.shop.items"): {("a",), ("b",)}})
    assert "its records' keys name different columns (['a'], ['b'])" in mixed.refused[("shop.items", "srv.shop.items")]
    assert claim(c, {}, {"shop.items": {items}}).new == {
        "shop.items": Made("srv.shop.items", "shop", "items")
    }  # not judged
    # A table made while the entry named its key takes its records' key once the entry has none.
    old = {"shop.items": Made("srv.shop.items", "shop", "items")}
    adopted = claim(c, old, {"shop.items": {items}}, {("shop.items", "srv.shop.items"): {("sku",)}})
    assert (adopted.new, adopted.refused) == ({"shop.items": Made("srv.shop.items", "shop", "items", ("sku",))}, {})
    rows = [
        {"table": "shop.items", "topic": "srv.shop.items", "source_db": "shop", "source_table": "items"},
        {
            "table": "shop.items",
            "topic": "srv.shop.items",
            "source_db": "shop",
            "source_table": "items",
            "key": ["sku"],
        },
    ]
    assert _by_name(rows) == adopted.new  # the index read: the first record, with the key recorded later
    keyed = config({**KEYLESS, "key": ["id"]})  # an entry with a key takes no key from the records
    assert claim(keyed, {}, {"shop.logs": {logs}}, keys).new == {"shop.logs": Made("srv.shop.logs", "shop", "logs")}


def test_check_config_and_discover_say_where_a_key_comes_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cdc_delta.changelog.table_index import Made
    from cdc_delta.check.topics import plan_topics

    path = tmp_path / "cdc.yaml"
    path.write_text(
        "app_id: p\nstorage: {root: /lake}\ntables:\n  - {name: '{db}.{table}', topic_pattern: 'srv\\..+'}\n"
    )
    assert main(["check-config", "--config", str(path)]) == 0
    assert (
        "{db}.{table}: key from each table's records (Debezium's record key) -> /lake/{db}/{table}"
        in capsys.readouterr().out
    )
    plans = plan_topics(
        config(KEYLESS),
        ["srv.shop.items", "srv.shop.new"],
        {"shop.items": Made("srv.shop.items", "shop", "items", ("sku",))},
    )
    assert [p.line() for p in plans] == [
        "srv.shop.items -> shop.items (made by '{db}.{table}', key ['sku'])",
        "srv.shop.new -> shop.new (made by '{db}.{table}', key from its records (Debezium's record key))",
    ]
