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
