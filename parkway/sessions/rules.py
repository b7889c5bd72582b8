"""Sessions: the shapes and rules of a durable tree of messages whose branches park on their own.

A session is a tree of messages (``user``, ``assistant``, ``tool``) with an
active head, an owner and a tenant. Each user message dispatches the
session's *agent* (an ordinary workflow) as a *branch run* for the path that
ends at it; the run adds its own messages below (its session and the message
it answers are fields of the run, written when the session creates it). An interrupt is anchored at
a message and parks every path through it; one with no anchor parks every
branch. This module holds what needs no store: who may do what to a session (the
privilege table; the caller and its ranks are :mod:`parkway.runtime.authority`'s),
the client input's shape, and the fold that rebuilds a session from its events.
The transitions are scripts (``parkway/sessions/lua/session_*.lua``, called by
:mod:`parkway.sessions.store`); the client is :mod:`parkway.sessions.client`.

Privilege, from the authenticated caller, never from a payload::

    origin:   system  >  machine  >  frontend
    caller:   system      machine    user (frontend: an owner in a tenant)

A caller may clear an interrupt whose origin is at most its own privilege.
A user must be the session's owner in the session's tenant; a system or
machine caller bound to a tenant must be in the session's; one bound to
none acts deployment-wide. Node code and the policy raise ``frontend``
interrupts, so the session's user can answer them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..runtime.authority import RANK, Caller
from ..runtime.errors import SessionDenied, ValidationError
from ..runtime.policy import check_text, loaded
from ..runtime.protocol import check_id

__all__ = [
    "MESSAGE_ROLES",
    "SessionState",
    "check_access",
    "check_may_clear",
    "check_text",
    "message_run",
    "parse_resume",
    "rebuild",
]

MESSAGE_ROLES = ("user", "assistant", "tool")


def message_run(message: Mapping[str, Any]) -> str | None:
    """The run a stored message (or its ``message.added`` event) names: ``runId``; a message
    stored before that spelling, still under its session's TTL, says ``run``."""
    run = message.get("runId", message.get("run"))
    return str(run) if run else None


def check_access(caller: Caller, owner: str, tenant: str) -> None:
    """Raise SessionDenied unless ``caller`` may act on a session of ``owner`` in ``tenant``."""
    if not isinstance(caller, Caller):
        raise ValidationError("caller must be a parkway Caller")
    if caller.tenant is not None and caller.tenant != tenant:
        raise SessionDenied("the caller belongs to another tenant", reason="tenant")
    if caller.role == "user" and caller.owner != owner:
        raise SessionDenied("a user may act only on their own sessions", reason="owner")


def check_may_clear(caller: Caller, origin: str, owner: str, tenant: str) -> None:
    """Raise SessionDenied unless ``caller`` may clear an interrupt of ``origin`` in this session."""
    check_access(caller, owner, tenant)
    if RANK[caller.origin] < RANK.get(origin, 3):
        raise SessionDenied(
            f"an interrupt raised by a {origin} caller needs a {origin} caller or higher to clear it",
            reason="privilege",
        )


def parse_resume(raw: Any) -> tuple[str, Any]:
    """The seed's client input ``{"type": "interrupt.resume", "interrupt_id": ..., "payload"?: ...}``
    (a dict or JSON): ``(interrupt id, payload)``."""
    value = loaded(raw, "the resume input")
    if not isinstance(value, Mapping) or value.get("type") != "interrupt.resume":
        raise ValidationError("a resume input is {'type': 'interrupt.resume', 'interrupt_id': ..., 'payload': ...}")
    return check_id(value.get("interrupt_id"), "interrupt id"), value.get("payload")


# --- a session as its events tell it ------------------------------------------------------------


@dataclass
class SessionState:
    """What a session's events say: the tree, the head, open interrupts, dispatched runs."""

    owner: str = ""
    tenant: str = ""
    head: str = ""
    parents: dict[str, str] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)
    open: dict[str, str] = field(default_factory=dict)
    """open session-level interrupts: id -> anchor ('' = global)"""
    cleared: set[str] = field(default_factory=set)
    runs: dict[str, str] = field(default_factory=dict)
    """every run dispatched: run id -> its leaf (the message it answers, then the last it added)"""

    def path(self, leaf: str) -> list[str]:
        """The message ids from the first message to ``leaf``."""
        out: list[str] = []
        while leaf:
            out.append(leaf)
            leaf = self.parents.get(leaf, "")
        return out[::-1]

    def parked_by(self, leaf: str) -> list[str]:
        """The open session-level interrupts parking the path that ends at ``leaf``."""
        on = set(self.path(leaf))
        return sorted(i for i, anchor in self.open.items() if anchor == "" or anchor in on)


def rebuild(events: Iterable[tuple[str, Mapping[str, Any]]]) -> SessionState:
    """Fold a session's events (``(type, data)``, oldest first) into its state."""
    state = SessionState()
    for kind, data in events:
        if kind == "session.opened":
            state.owner, state.tenant = data["owner"], data["tenant"]
        elif kind == "message.added":
            # a user's message names its parent; a branch run's goes below the run's leaf
            run = message_run(data) or ""
            parent = data.get("parent") or "" if data["role"] == "user" else state.runs.get(run, "")
            if data["role"] != "user" and run in state.runs:
                state.runs[run] = data["id"]
            state.parents[data["id"]] = parent
            state.roles[data["id"]] = data["role"]
            # a user's message becomes the head; an agent's follows its parent when that was the head
            if data["role"] == "user" or state.head == parent:
                state.head = data["id"]
        elif kind == "head.switched":
            state.head = data["head"]
        elif kind == "run.dispatched":
            state.runs[data["runId"]] = data["leaf"]
        elif kind == "interrupt.raised" and data.get("scope") == "session":
            state.open[data["interruptId"]] = data.get("anchor") or ""
        elif kind == "interrupt.cleared":
            state.open.pop(data["interruptId"], None)
            state.cleared.add(data["interruptId"])
    return state
