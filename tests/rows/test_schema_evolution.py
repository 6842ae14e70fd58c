"""Schema evolution without Spark: defaults of added columns, and names Delta cannot hold."""

from __future__ import annotations

import json
import re

import pytest

from cdc_delta.events.ordering import Seq
from cdc_delta.exceptions import SchemaChangeError
from cdc_delta.rows.column_defaults import ColumnDefault, added_defaults, from_properties
from cdc_delta.rows.schema_evolution import descriptor_columns, plan_in_order, plan_schema

BEFORE = json.dumps([["id", "int"], ["name", "string"]])
AFTER = json.dumps([["id", "int"], ["name", "string"], ["score", "int", 7], ["tag", "string", "dflt"], ["x", "int"]])


def seq(pos: int) -> Seq:
    return Seq(1, 0, 3, pos, 0, 0, 0, pos)


def test_added_columns_keep_their_source_default_since_the_first_event_that_carries_them() -> None:
    plan = plan_schema("t", [("id", "int"), ("name", "string")], [BEFORE, AFTER], allow_widening=True)
    assert plan.added == (("score", "int"), ("tag", "string"), ("x", "int"))
    assert plan.added_defaults == {"score": 7, "tag": "dflt"}
    defaults = added_defaults(plan, {BEFORE: seq(10), AFTER: seq(50)}, filled=False)
    assert defaults == {"score": ColumnDefault(7, seq(50), False), "tag": ColumnDefault("dflt", seq(50), False)}


def test_defaults_round_trip_through_the_table_property() -> None:
    text = json.dumps({"score": {"value": 7, "since": list(seq(50)), "filled": True}})
    assert from_properties({"cdc_delta.column_defaults": text}) == {"score": ColumnDefault(7, seq(50), True)}
    assert from_properties({}) == {}


def test_a_column_that_existed_keeps_no_default() -> None:
    plan = plan_schema("t", [("id", "int"), ("score", "int")], [AFTER], allow_widening=True)
    assert "score" not in plan.added_defaults


def test_descriptor_columns() -> None:
    assert descriptor_columns(AFTER) == {"id", "name", "score", "tag", "x"}


@pytest.mark.parametrize("name", ["weird name", "a,b", "x=y", "f(x)", "tab\there"])
def test_a_column_name_delta_cannot_hold_stops_the_table_with_the_name(name: str) -> None:
    with pytest.raises(SchemaChangeError, match=re.escape(f"table t: source column {name!r} has characters a Delta")):
        plan_schema("t", [("id", "int")], [json.dumps([["id", "int"], [name, "int"]])], allow_widening=True)


def test_schema_changes_are_followed_landing_by_landing_up_to_one_the_table_cannot_follow() -> None:
    added = json.dumps([["id", "int"], ["name", "string"], ["score", "int"]])
    as_text = json.dumps([["id", "string"], ["name", "string"]])  # id became text: an int column cannot follow
    table = [("id", "int"), ("name", "string")]
    every = plan_in_order("t", table, {BEFORE: 3, added: 4}, allow_widening=True)
    assert (every.through, every.error, every.plan.added) == (None, None, (("score", "int"),))
    stopped = plan_in_order("t", table, {BEFORE: 3, added: 4, as_text: 6}, allow_widening=True)
    assert stopped.through == 5 and stopped.plan.added == (("score", "int"),)
    assert stopped.error is not None and "column 'id' changed type from int to string" in str(stopped.error)
    assert sorted(stopped.covers({BEFORE: 3, added: 4, as_text: 6})) == sorted([BEFORE, added])
    with pytest.raises(SchemaChangeError, match="column 'id' changed type"):  # its first landing: nothing to follow
        plan_in_order("t", table, {as_text: 3, added: 4}, allow_widening=True)
