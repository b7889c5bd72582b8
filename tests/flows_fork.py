"""Workflows of the fork and use_first-with-a-child tests; module-level so worker processes import them."""

from __future__ import annotations

from typing import Any

from parkway import Result, Workflow, use_interrupt, use_workflow

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

counter = Workflow("fork_counter")
"""one node entered again until ``n`` reaches ``steps``: each activation is a step of its own"""


@counter.node(start=True)
def count(data: dict[str, Any]) -> Result:
    n = data.get("n", 0) + 1
    return Result(data={"n": n}, condition="again" if n < data["steps"] else "stop")


@counter.node()
def done(data: dict[str, Any]) -> dict[str, Any]:
    return {"done": True}


counter.edge("count", "count", when="again").edge("count", "done", when="stop")
