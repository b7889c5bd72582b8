"""Workflows of the fork and use_first-with-a-child tests; module-level so worker processes import them."""

from __future__ import annotations

import time
from typing import Any

from parkway import Workflow, use_first, use_interrupt, use_workflow

COLORS = {
    "kind": "choice",
    "question": "Pick a color",
    "options": [{"id": "red", "label": "Red"}, {"id": "blue", "label": "Blue"}],
}

three = Workflow("three")
"""a -> b (asks a color) -> c: the data each step starts with is known"""


@three.node(start=True)
def first(data: dict[str, Any]) -> dict[str, Any]:
    return {"trail": [*data.get("trail", []), "a"], "x": 1}


@three.node()
def second(data: dict[str, Any]) -> dict[str, Any]:
    color = use_interrupt(COLORS, id="color")
    return {"trail": [*data["trail"], "b"], "color": color}


@three.node()
def third(data: dict[str, Any]) -> dict[str, Any]:
    return {"trail": [*data["trail"], "c"], "z": data["x"] + 1}


three.edge("first", "second").edge("second", "third")

tree_flow = Workflow("forks_children")
"""a run that starts a child: a child run cannot be forked"""


@tree_flow.node(start=True)
def call_child(data: dict[str, Any]) -> dict[str, Any]:
    return {"child": use_workflow(three, {"trail": []}, id="three")}
