"""Workflows for the lifecycle tests (cancel, expiry status, fan-out); module-level so worker
processes import them as ``tests.flows_life:NAME``."""

from __future__ import annotations

from typing import Any

from parkway import ChildFailed, Workflow, use_interrupt, use_workflow
from tests.flows import COLORS

asks = Workflow("asks")


@asks.node(start=True)
def ask_color(data: dict[str, Any]) -> dict[str, Any]:
    return {"color": use_interrupt(COLORS, id="color", ttl_ms=600_000)}


guards_child = Workflow("guards_child")


@guards_child.node(start=True)
def call_and_catch(data: dict[str, Any]) -> dict[str, Any]:
    """As the README's ``publish``: a child's failure (or cancellation) is caught and the run goes on."""
    try:
        return {"color": use_workflow(asks, {}, id="ask")["color"]}
    except ChildFailed as exc:
        return {"caught": exc.status}


guards_grandchild = Workflow("guards_grandchild")


@guards_grandchild.node(start=True)
def call_guard(data: dict[str, Any]) -> dict[str, Any]:
    try:
        return {"inner": use_workflow(guards_child, {}, id="guard")}
    except ChildFailed as exc:
        return {"caught": exc.status}


expiring_policy = Workflow("expiring_policy", on_expire=None)


@expiring_policy.node(start=True)
def ask_briefly(data: dict[str, Any]) -> dict[str, Any]:
    """One question of 1 s whose expiry policy is the input's ``policy`` (``"timer"``: a use_first
    race of the question against a timer of 1 s instead)."""
    from parkway import InterruptCancelled, use_first

    if data["policy"] == "timer":
        return {"first": use_first(COLORS, timer_ms=1000, id="race").kind}
    try:
        return {"picked": use_interrupt(COLORS, id="color", ttl_ms=1000, on_expire=data["policy"])}
    except InterruptCancelled as exc:
        return {"cancelled": exc.reason}


square = Workflow("square")


@square.node(start=True)
def square_it(data: dict[str, Any]) -> dict[str, Any]:
    if data.get("fail"):
        raise ValueError(f"no square for {data['i']}")
    return {"i": data["i"], "square": data["i"] * data["i"]}


fans_out = Workflow("fans_out")


@fans_out.node(start=True)
def fan(data: dict[str, Any]) -> dict[str, Any]:
    """Starts ``n`` children side by side, at most ``limit`` at a time: ``square`` (those in ``fail``
    raise), or ``asks`` with ``ask``; each failure is a value in the results."""
    from parkway import use_workflows

    child = asks if data.get("ask") else square
    calls = [(child, {"i": i, "fail": i in data.get("fail", [])}) for i in range(data["n"])]
    results = use_workflows(calls, id="all", limit=data.get("limit", 3))
    return {"results": [{"failed": r.status, "message": r.error_message} if isinstance(r, ChildFailed) else r
                        for r in results]}


nests_fan_out = Workflow("nests_fan_out")


@nests_fan_out.node(start=True)
def call_fan_out(data: dict[str, Any]) -> dict[str, Any]:
    """A fan-out one level down: its children are the root's grandchildren."""
    return {"inner": use_workflow(fans_out, data, id="fan")}
