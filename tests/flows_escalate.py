"""Workflows for the tests of escalation, audiences and listing filters; module-level so workers
import them as ``tests.flows_escalate:NAME``."""

from __future__ import annotations

from typing import Any

from parkway import InterruptCancelled, Workflow, use_interrupt
from tests.flows import COLORS

escalating = Workflow("escalating")


@escalating.node(start=True)
def ask_up_the_chain(data: dict[str, Any]) -> dict[str, Any]:
    """Ask ``data["audience"]``; at expiry, the policy in ``data["policy"]`` applies."""
    try:
        picked = use_interrupt(
            COLORS, id="color", ttl_ms=data.get("ttl_ms", 1000), audience=data.get("audience"),
            on_expire=data.get("policy"),
        )
    except InterruptCancelled as exc:
        return {"picked": None, "cancelled": exc.reason}
    return {"picked": picked}


escalates_by_default = Workflow(
    "escalates_by_default", on_expire={"escalate": {"to": "team:leads", "ttl_ms": 2000, "then": "fail"}}
)


@escalates_by_default.node(start=True)
def ask_ops(data: dict[str, Any]) -> dict[str, Any]:
    return {"picked": use_interrupt(COLORS, id="color", ttl_ms=2000, audience="team:ops")}


asks_audience = Workflow("asks_audience")


@asks_audience.node(start=True)
def ask_someone(data: dict[str, Any]) -> dict[str, Any]:
    """Ask ``data["audience"]`` (or nobody in particular) with a long TTL."""
    return {"picked": use_interrupt(COLORS, id="color", audience=data.get("audience"))}


parent_of_escalating = Workflow("parent_of_escalating")


@parent_of_escalating.node(start=True)
def call_escalating(data: dict[str, Any]) -> dict[str, Any]:
    from parkway import use_workflow

    child = use_workflow(escalating, {"audience": "team:ops", "ttl_ms": 2000, "policy": data["policy"]}, id="kid")
    return {"child_picked": child["picked"]}


escalates_later = Workflow("escalates_later")


@escalates_later.node(start=True)
def prepare(data: dict[str, Any]) -> dict[str, Any]:
    return {"prepared": True}


@escalates_later.node
def ask_after(data: dict[str, Any]) -> dict[str, Any]:
    """Step 1 (so the run keeps a snapshot): ask, escalating at expiry as ``data["policy"]`` says."""
    return {"picked": use_interrupt(COLORS, id="color", ttl_ms=1000, on_expire=data["policy"])}


escalates_later.edge("prepare", "ask_after")
