"""Workflows for the tests of resume_or_start, code versions and checked child calls;
module-level so workers import them as ``tests.flows_model:NAME``."""

from __future__ import annotations

from typing import Any

from parkway import Workflow, use_first, use_interrupt, use_workflow
from tests.flows import COLORS, adder

knobs: dict[str, Any] = {}
"""what a test changes between a pause and its replay (reset before each test)"""


def reset_knobs() -> None:
    knobs.clear()
    knobs.update({"child": "adder", "a": 2, "depth": 1})


reset_knobs()

doubler = Workflow("doubler")


@doubler.node(start=True)
def double(data: dict[str, Any]) -> dict[str, Any]:
    return {"sum": data["a"] * 2}


calls_then_asks = Workflow("calls_then_asks")


@calls_then_asks.node(start=True)
def call_then_ask(data: dict[str, Any]) -> dict[str, Any]:
    nested: Any = {"a": knobs["a"], "b": 1}
    for _ in range(knobs["depth"] - 1):
        nested = {"deeper": nested}
    child = adder if knobs["child"] == "adder" else doubler
    total = use_workflow(child, nested if knobs["depth"] > 1 else {"a": knobs["a"], "b": 1}, id="calc")
    color = use_interrupt(COLORS, id="color")
    return {"sum": total["sum"], "color": color}


versioned = Workflow("versioned", version="v1")


@versioned.node(start=True)
def ask_versioned(data: dict[str, Any]) -> dict[str, Any]:
    return {"color": use_interrupt(COLORS, id="color")}


unversioned = Workflow("unversioned")


@unversioned.node(start=True)
def ask_unversioned(data: dict[str, Any]) -> dict[str, Any]:
    return {"color": use_interrupt(COLORS, id="color")}


races = Workflow("races")


@races.node(start=True)
def answer_or_timeout(data: dict[str, Any]) -> dict[str, Any]:
    first = use_first(COLORS, timer_ms=data.get("timer", 2000), id="pick")
    return {"kind": first.kind, "value": first.value}
