"""Workflows the tracing tests run (``tests.trace_flows:NAME``): a pause, then a child run."""

from __future__ import annotations

from typing import Any

from parkway import Workflow, use_interrupt, use_workflow
from tests.flows import COLORS, adder

asks_then_adds = Workflow("asks_then_adds")


@asks_then_adds.node(start=True)
def ask_then_add(data: dict[str, Any]) -> dict[str, Any]:
    color = use_interrupt(COLORS, id="color")
    total = use_workflow(adder, {"a": 2, "b": 3}, id="add")
    return {"color": color, "sum": total["sum"]}
