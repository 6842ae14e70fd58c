"""Which type changes a table follows: cast up, widen, or stop."""

from __future__ import annotations

import json

import pytest

from cdc_delta.events.column_types import fits_in, normalize, widened
from cdc_delta.exceptions import SchemaChangeError
from cdc_delta.rows.schema_evolution import plan_schema


@pytest.mark.parametrize(
    ("incoming", "existing", "fits"),
    [
        ("int", "bigint", True),
        ("bigint", "int", False),
        ("float", "double", True),
        ("int", "double", True),
        ("bigint", "double", False),
        ("decimal(10,2)", "decimal(12,2)", True),
        ("decimal(10,2)", "decimal(10,3)", False),
        ("decimal(10,2)", "decimal(11,3)", True),
        ("int", "decimal(12,2)", True),
        ("int", "decimal(10,2)", False),
        ("string", "bigint", False),
        ("date", "timestamp", False),
    ],
)
def test_fits_in(incoming: str, existing: str, fits: bool) -> None:
    assert fits_in(incoming, existing) is fits


def test_widened() -> None:
    assert widened("int", "bigint") == "bigint"
    assert widened("decimal(10,2)", "decimal(10,4)") == "decimal(12,4)"
    assert widened("string", "bigint") is None
    assert widened("decimal(38,0)", "decimal(38,2)") is None


def test_normalize_rejects_unknown_types() -> None:
    with pytest.raises(ValueError, match="unsupported column type 'map<string,int>'"):
        normalize("map<string,int>")


def d(*cols: tuple[str, str]) -> str:
    return json.dumps([list(c) for c in cols])


def test_plan_adds_new_columns_in_order_and_casts_narrower_ones() -> None:
    plan = plan_schema(
        "t", [("id", "bigint"), ("n", "bigint")], [d(("id", "int"), ("n", "int"), ("extra", "string"))], True
    )
    assert plan.columns == (("id", "bigint"), ("n", "bigint"), ("extra", "string"))
    assert plan.added == (("extra", "string"),)
    assert plan.widened == ()


def test_plan_widens_when_allowed() -> None:
    plan = plan_schema("t", [("id", "int")], [d(("id", "bigint"))], True)
    assert plan.widened == (("id", "int", "bigint"),)
    assert plan.columns == (("id", "bigint"),)


def test_incompatible_change_names_table_column_and_types() -> None:
    with pytest.raises(
        SchemaChangeError,
        match=r"table shop\.orders: column 'amount' changed type from decimal\(10,2\) "
        r"to string",
    ):
        plan_schema("shop.orders", [("amount", "decimal(10,2)")], [d(("amount", "string"))], True)
    with pytest.raises(SchemaChangeError, match="allow_type_widening is off"):
        plan_schema("t", [("id", "int")], [d(("id", "bigint"))], False)
