"""Routing: topics, topic patterns, and shard regexes over source db/table."""

from __future__ import annotations

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
