"""Routing: topics, topic patterns, and shard regexes over source db/table."""

from __future__ import annotations

import pytest

from cdc_delta.config import parse_config
from cdc_delta.events.routing import Router

CONFIG = parse_config(
    {
        "app_id": "t",
        "storage": {"root": "/x"},
        "tables": [
            {"name": "inventory.orders", "topics": ["srv.inventory.orders"], "key": ["id"]},
            {
                "name": "shop.orders",
                "source_database": r"shop_[0-7]",
                "source_table": r"orders_\d{3}",
                "key": ["id"],
                "key_includes_source": True,
            },
            {"name": "audit.events", "topic_pattern": r"srv\.audit\..*", "key": ["id"]},
        ],
    }
)
ROUTER = Router(CONFIG.tables)


def test_exact_topic() -> None:
    assert ROUTER.route("srv.inventory.orders", "inventory", "orders") == "inventory.orders"


def test_all_128_shards_in_8_databases_fold_into_one_table() -> None:
    for db in range(8):
        for table in range(128):
            assert (
                ROUTER.route(f"srv.shop_{db}.orders_{table:03d}", f"shop_{db}", f"orders_{table:03d}") == "shop.orders"
            )


def test_shard_regexes_match_the_whole_name() -> None:
    assert ROUTER.route("srv.shop_8.orders_000", "shop_8", "orders_000") is None
    assert ROUTER.route("srv.shop_1.orders_0001", "shop_1", "orders_0001") is None
    assert ROUTER.route("srv.shop_1.orders_001_archive", "shop_1", "orders_001_archive") is None


def test_topic_pattern_and_unrouted() -> None:
    assert ROUTER.route("srv.audit.login", "audit", "login") == "audit.events"
    assert ROUTER.route("srv.other.table", "other", "table") is None


def test_a_topic_route_also_checks_source_regexes_when_given() -> None:
    router = Router(
        parse_config(
            {
                "app_id": "t",
                "storage": {"root": "/x"},
                "tables": [{"name": "a", "topics": ["t1"], "source_table": "keep_.*", "key": ["id"]}],
            }
        ).tables
    )
    assert router.route("t1", "db", "keep_1") == "a"
    assert router.route("t1", "db", "drop_1") is None


def pattern_router(*tables: dict) -> Router:
    return Router(parse_config({"app_id": "t", "storage": {"root": "/x"}, "tables": list(tables)}).tables)


def test_a_pattern_entry_names_one_table_per_source_table_after_every_listed_table() -> None:
    router = pattern_router(
        {"name": "{db}.{table}", "topic_pattern": r"srv\..+", "key": ["id"]},
        {"name": "shop.orders", "topics": ["srv.shop.orders_v2"], "key": ["id"]},
    )
    assert router.route("srv.shop.items", "shop", "items") == "shop.items"
    assert router.route("srv.crm.people", "crm", "people") == "crm.people"
    assert router.route("srv.shop.orders_v2", "shop", "orders_v2") == "shop.orders"  # listed below, still first
    assert router.route("other.shop.items", "shop", "items") is None
    assert router.pattern_of("shop.items") == "{db}.{table}" and router.pattern_of("shop.orders") is None


@pytest.mark.parametrize(
    ("topic", "db", "table", "reason"),
    [
        (
            "srv.shop.order-lines",
            "shop",
            "order-lines",
            "makes the name 'shop.order-lines' for topic 'srv.shop.order-lines', not a table name",
        ),
        (
            "srv.shop.orders",
            "shop",
            "orders",
            "makes the name 'shop.orders' for topic 'srv.shop.orders', a listed table's, whose route does not take",
        ),
        ("srv.shop.x", None, "x", "takes topic 'srv.shop.x' but the event has no db to name it by"),
    ],
)
def test_a_name_a_pattern_entry_cannot_own_is_refused_with_the_reason(
    topic: str, db: str, table: str, reason: str
) -> None:
    router = pattern_router(
        {"name": "{db}.{table}", "topic_pattern": r"srv\..+", "key": ["id"]},
        {"name": "shop.orders", "topics": ["old.shop.orders"], "key": ["id"]},
    )
    assert router.route(topic, db, table) is None
    assert reason in router.refusal(topic, db, table)


def test_a_name_an_earlier_pattern_entry_would_make_is_refused() -> None:
    router = pattern_router(
        {"name": "crm_{db}.{table}", "topic_pattern": r"c\..+", "key": ["uuid"]},
        {"name": "{db}.{table}", "topic_pattern": r"a\..+", "key": ["id"]},
        {"name": "{db}.{table}_b", "topic_pattern": r"b\..+", "key": ["uuid"]},
    )
    assert router.route("c.shop.items", "shop", "items") == "crm_shop.items"  # the narrower entry first
    assert router.route("a.shop.items", "shop", "items") == "shop.items"
    assert router.route("b.shop.items", "shop", "items") is None
    why = router.refusal("b.shop.items", "shop", "items")
    assert (
        "name 'shop.items_b' for topic 'b.shop.items', a name of the earlier pattern entry '{db}.{table}': list" in why
    )


def test_a_name_its_own_template_does_not_make_is_refused_not_an_error() -> None:
    router = pattern_router({"name": "{table}", "topic_pattern": r"srv\..+", "key": ["id"]})
    assert router.route("srv.shop.a.b", "shop", "a.b") is None  # a table name holding a '.'
    assert router.refusal("srv.shop.a.b", "shop", "a.b") == (
        "pattern entry '{table}' makes the name 'a.b' for topic 'srv.shop.a.b', which its own names do not look "
        "like (each part of '{table}' one word)"
    )
