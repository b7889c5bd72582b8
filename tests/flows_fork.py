"""Workflows of the fork and use_first-with-a-child tests; module-level so worker processes import them."""

from __future__ import annotations

from typing import Any

from parkway import Workflow, use_first, use_interrupt, use_workflow, use_workflows

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


# --- a gate in a run below: a fork past it must ask it again ----------------------------------

APPROVE = {
    "kind": "choice",
    "question": "Approve the charge?",
    "options": [{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}],
}


def _prepare(data: dict[str, Any]) -> dict[str, Any]:
    return {"prepared": True}


approval = Workflow("fork_approval")
"""a child that asks a person to approve, at its step 1 (its steps are not its root's): the gate"""
approval.node(start=True, name="prepare")(_prepare)


@approval.node()
def approve(data: dict[str, Any]) -> dict[str, Any]:
    return {"approved": use_interrupt(APPROVE, id="approve") == "yes"}


approval.edge("prepare", "approve")

relay = Workflow("fork_relay")
"""a child that runs the approval as a child of its own at its step 1: the gate sits in a grandchild"""
relay.node(start=True, name="prepare")(_prepare)


@relay.node()
def ask_below(data: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = use_workflow(approval, {}, id="approval")
    return out


relay.edge("prepare", "ask_below")


def _raced() -> dict[str, Any]:
    """The approval asked here and in a child run at once (``use_first``): whichever answers first."""
    first = use_first(APPROVE, timer_ms=600_000, id="race", child=(approval, {}))
    return dict(first.value) if first.kind == "child" else {"approved": first.value == "yes"}


racing = Workflow("fork_racing")
"""a child whose ``use_first`` (at its step 1) races its own question against a grandchild's approval"""
racing.node(start=True, name="prepare")(_prepare)


@racing.node()
def race_below(data: dict[str, Any]) -> dict[str, Any]:
    return _raced()


racing.edge("prepare", "race_below")


payment = Workflow("fork_payment")
"""step 0 waits on an approval (``gate``: ``child``, ``grandchild``, ``fanout`` (a child of
``use_workflows``), ``first`` (this run's ``use_first`` races a child) or ``first-below`` (a child's
``use_first`` races a grandchild)); step 1 charges ``amount`` to ``to``"""

GATES = ("child", "grandchild", "fanout", "first", "first-below")


@payment.node(start=True)
def gate(data: dict[str, Any]) -> dict[str, Any]:
    how = data["gate"]
    if how == "child":
        out = use_workflow(approval, {}, id="gate")
    elif how == "grandchild":
        out = use_workflow(relay, {}, id="gate")
    elif how == "fanout":
        out = use_workflows([(approval, {})], id="gate")[0]
    elif how == "first":
        out = _raced()
    else:
        out = use_workflow(racing, {}, id="gate")
    if not out["approved"]:
        raise RuntimeError("the charge was not approved")
    return {}


@payment.node()
def charge(data: dict[str, Any]) -> dict[str, Any]:
    return {"charged": {"to": data["to"], "amount": data["amount"]}}


payment.edge("gate", "charge")
