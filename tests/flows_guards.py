"""Workflows of tests/test_guards.py (module level, so workers import them)."""

from __future__ import annotations

from typing import Any

from parkway import Workflow, use_interrupt, use_node_state
from parkway.agents import ScriptedModel, use_model

QUESTION = {"kind": "text", "question": "Go on?"}

counting = Workflow("swapping")
"""keeps an unkeyed node state, then asks"""


@counting.node(start=True)
def ask(data: dict[str, Any]) -> dict[str, Any]:
    count, set_count = use_node_state(0)
    set_count(count + 1)
    return {"answer": use_interrupt(QUESTION, id="go")}


modelling = Workflow("swapping")
"""the same workflow deployed with an unkeyed model call where the node state was"""


@modelling.node(start=True)
def ask(data: dict[str, Any]) -> dict[str, Any]:  # noqa: F811 - the same node, as another deploy has it
    use_model(ScriptedModel([{"answer": "hi"}]), [{"role": "user", "content": "hi"}])
    return {"answer": use_interrupt(QUESTION, id="go")}
