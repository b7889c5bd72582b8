"""Workflows the telemetry tests run; module-level so worker processes import them as
``tests.telemetry_flows:NAME``."""

from __future__ import annotations

from typing import Any

from parkway import Workflow, use_interrupt

SECRET_QUESTION = "Which vault code opens door Zeta-7731?"
SECRET_LABEL = "Quartz-Lantern-0042"

secret = Workflow("secret_ask", capture_content=())
"""captures nothing: its interrupts' lifecycle records hold no application content"""


@secret.node(start=True)
def ask_secret(data: dict[str, Any]) -> dict[str, Any]:
    code = use_interrupt({"kind": "text", "question": SECRET_QUESTION}, id="code")
    door = use_interrupt(
        {"kind": "choice", "question": SECRET_QUESTION, "options": [{"id": "opt-q", "label": SECRET_LABEL}]}, id="door"
    )
    return {"code": code, "door": door}


input_only = Workflow("input_only")


@input_only.node(start=True)
def ask_input_only(data: dict[str, Any]) -> dict[str, Any]:
    return {"note": use_interrupt({"kind": "text", "question": "A note?"}, id="note", capture_content=("input",))}


free = Workflow("free")


@free.node(start=True)
def ask_free(data: dict[str, Any]) -> dict[str, Any]:
    return {"note": use_interrupt({"kind": "text", "question": "A note?"}, id="note", ttl_ms=data.get("ttl_ms"))}


brittle = Workflow("brittle")
"""fails on the replay that receives its answer: the interrupt's outcome is resume_failed"""


@brittle.node(start=True)
def ask_then_break(data: dict[str, Any]) -> dict[str, Any]:
    picked = use_interrupt({"kind": "choice", "question": "Go?", "options": [{"id": "go", "label": "Go"}]}, id="go")
    raise RuntimeError(f"cannot handle {picked}")
