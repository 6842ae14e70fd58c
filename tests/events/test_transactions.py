"""Debezium's transaction metadata as the changelog keeps it: a change's block, and a transaction's END
with its counts per table; anything not as Debezium writes it is read as no transaction."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cdc_delta.events.transactions import Txn, change_txn, transaction_end

BLOCK = {"id": "0-1-30", "total_order": 3, "data_collection_order": 2}


def test_a_change_names_its_transaction_and_its_place_in_it() -> None:
    assert change_txn({"op": "c", "transaction": BLOCK}) == Txn("0-1-30", 3, 2)
    assert change_txn({"op": "r", "transaction": None}) is None  # a snapshot read
    assert change_txn({"op": "c"}) is None  # metadata off


@pytest.mark.parametrize(
    "block",
    [
        "0-1-30",
        {**BLOCK, "id": 30},
        {**BLOCK, "total_order": 0},
        {**BLOCK, "total_order": True},
        {**BLOCK, "data_collection_order": "2"},
        {**BLOCK, "total_order": 2**63},
        {"id": "0-1-30", "total_order": 3},
    ],
)
def test_a_block_not_as_debezium_writes_it_is_no_transaction(block: Any) -> None:
    assert change_txn({"op": "c", "transaction": block}) is None


def test_an_end_counts_its_events_per_table() -> None:
    end = {
        "status": "END",
        "id": "0-1-31",
        "ts_ms": 1795448045000,
        "event_count": 4,
        "data_collections": [
            {"data_collection": "shop.orders", "event_count": 3},
            {"data_collection": "shop.accounts", "event_count": 1},
        ],
    }
    found = transaction_end(end)
    assert found is not None
    txn, counts = found
    assert txn == Txn("0-1-31", 4, None)
    assert json.loads(counts) == {"shop.accounts": 1, "shop.orders": 3}
    assert transaction_end({**end, "status": "BEGIN", "event_count": None, "data_collections": None}) is None
    assert transaction_end({**end, "data_collections": [{"data_collection": "a.b", "event_count": -1}]}) is None
    assert transaction_end({**end, "event_count": "4"}) is None
    empty = transaction_end({**end, "event_count": 0, "data_collections": []})
    assert empty == (Txn("0-1-31", 0, None), "{}")
