"""The demo workflow: a draft that a person approves before it is published."""

from __future__ import annotations

from typing import Any

from .runtime.hooks import emit, use_interrupt, use_node_state
from .runtime.workflow import Result, Workflow

approval = Workflow("approval")


@approval.node(start=True)
def draft(data: dict[str, Any]) -> Result:
    announced, set_announced = use_node_state(False)
    if not announced:  # runs once, even though the node replays after the answer
        emit("lifecycle", {"step": "draft-ready", "title": data.get("title", "Untitled")})
        set_announced(True)
    decision = use_interrupt(
        {
            "kind": "choice",
            "question": f"Publish the draft {data.get('title', 'Untitled')!r}?",
            "options": [
                {"id": "approve", "label": "Approve", "description": "publish it now"},
                {"id": "reject", "label": "Reject", "description": "drop the draft"},
            ],
        },
        id="approval",
    )
    return Result(data={"decision": decision}, condition=decision)


@approval.node
def publish(data: dict[str, Any]) -> dict[str, Any]:
    return {"published": True}


@approval.node
def discard(data: dict[str, Any]) -> dict[str, Any]:
    return {"published": False}


approval.edge("draft", "publish", when="approve").edge("draft", "discard", when="reject")
