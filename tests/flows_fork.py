"""Workflows of the fork and use_first-with-a-child tests; module-level so worker processes import them."""

from __future__ import annotations

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

# --- use_first with a child run ------------------------------------------------------

quick = Workflow("first_quick")
"""a child that completes at once"""


@quick.node(start=True)
def quick_sum(data: dict[str, Any]) -> dict[str, Any]:
    return {"sum": data["a"] + data["b"]}


asking = Workflow("first_asking")
"""a child that waits on a person of its own"""


@asking.node(start=True)
def child_asks(data: dict[str, Any]) -> dict[str, Any]:
    return {"sum": data["a"] + data["b"], "color": use_interrupt(COLORS, id="child-color")}


failing = Workflow("first_failing")


@failing.node(start=True)
def child_fails(data: dict[str, Any]) -> dict[str, Any]:
    raise RuntimeError("the child broke")


CHILDREN = {"quick": quick, "asking": asking, "failing": failing}
knobs: dict[str, Any] = {}
"""what a test changes between attempts (``a``: the child's input), to make a replay ask for another child"""

racer = Workflow("racer")
"""races a color question, a timer and a child run (``child`` names which)"""


@racer.node(start=True)
def race(data: dict[str, Any]) -> dict[str, Any]:
    child = (CHILDREN[data["child"]], {"a": knobs.get("a", 1), "b": 2})
    first = use_first(COLORS, timer_ms=data.get("timer", 60_000), id="pick", child=child)
    return {"kind": first.kind, "value": first.value}
