"""Sessions: the shapes and rules of a durable tree of messages whose branches park on their own.

A session is a tree of messages (``user``, ``assistant``, ``tool``) with an
active head, an owner and a tenant. Each user message dispatches the
session's *agent* (an ordinary workflow) as a *branch run* for the path that
ends at it; the run adds its own messages below. An interrupt is anchored at
a message and parks every path through it; one with no anchor parks every
branch. This module holds what needs no store: who may do what (the
privilege table), the policy's action/trigger/input shapes, and the fold that
rebuilds a session from its events. The transitions are scripts
(``adapters/redis/session_*.lua``); the client is :mod:`parkway.sessions`.

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

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import SessionDenied, ValidationError
from .protocol import check_id

Role = Literal["system", "machine", "user"]
Origin = Literal["system", "machine", "frontend"]
RANK: dict[str, int] = {"frontend": 1, "machine": 2, "system": 3}
ROLES = ("system", "machine", "user")
MESSAGE_ROLES = ("user", "assistant", "tool")
MAX_MESSAGE_CHARS = 100_000
MAX_REASON_CHARS = 1000


@dataclass(frozen=True)
class Caller:
    """Who calls: a role, and for a user the owner and tenant it acts as."""

    role: Role
    owner: str | None = None
    tenant: str | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValidationError(f"a caller's role is one of {ROLES}, not {self.role!r}")
        if self.owner is not None:
            check_id(self.owner, "caller owner")
        if self.tenant is not None:
            check_id(self.tenant, "caller tenant")
        if self.role == "user" and (self.owner is None or self.tenant is None):
            raise ValidationError("a user caller needs an owner and a tenant")

    @property
    def name(self) -> str:
        return f"{self.role}:{self.owner}" if self.owner else self.role

    @property
    def origin(self) -> Origin:
        """The origin an interrupt this caller raises records."""
        return "frontend" if self.role == "user" else self.role

    def public(self) -> dict[str, Any]:
        return {"role": self.role, "owner": self.owner, "tenant": self.tenant}


SYSTEM = Caller("system")


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


def check_text(value: object, what: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        raise ValidationError(f"{what} must be a non-empty string of at most {limit} characters")
    return value


# --- the policy's shapes (the seed's Spec: actions, triggers, client input) ---------------------

TRIGGERS = ("session.start", "user.message", "tool.execute", "tool.results", "interrupt.resumed")
ACTIONS = ("interrupt", "tool.run", "tool.defer", "tool.result", "tool.error")


def _loaded(value: Any, what: str) -> Any:
    if isinstance(value, str | bytes):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise ValidationError(f"{what} is not valid JSON: {exc}") from exc
    return value


def parse_action(raw: Any) -> dict[str, Any]:
    """One action, checked: ``{"type": "interrupt", "reason": ..., "interrupt_id"?, "payload"?}``,
    ``{"type": "tool.result", "result": ...}``, ``{"type": "tool.error", "error": "..."}``,
    ``{"type": "tool.run"}`` (run the tool) or ``{"type": "tool.defer"}`` (wait for ``answer_tool``)."""
    action = _loaded(raw, "an action")
    if not isinstance(action, Mapping) or action.get("type") not in ACTIONS:
        raise ValidationError(f"an action is a dict whose type is one of {ACTIONS}, not {raw!r:.200}")
    out = dict(action)
    if out["type"] == "interrupt":
        reason = out.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise ValidationError("an interrupt action needs a reason (a non-empty string)")
        check_text(reason, "an interrupt's reason", MAX_REASON_CHARS)
        if out.get("interrupt_id") is not None:
            interrupt_id = check_id(out["interrupt_id"], "interrupt id")
            if interrupt_id.startswith(("int_", "tool_")):
                raise ValidationError("an interrupt id given by a policy may not start with 'int_' or 'tool_'")
    elif out["type"] == "tool.error":
        check_text(out.get("error"), "a tool.error's error", MAX_REASON_CHARS)
    elif out["type"] == "tool.result" and "result" not in out:
        raise ValidationError("a tool.result action needs a result")
    return out


def parse_actions(raw: Any) -> list[dict[str, Any]]:
    """What a policy returned: ``{"actions": [...]}``, a list of actions, one action, or JSON of those."""
    value = _loaded(raw, "the policy's decision")
    if value is None:
        return []
    if isinstance(value, Mapping) and "actions" in value:
        value = value["actions"]
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, list | tuple):
        raise ValidationError("a policy returns {'actions': [...]}, a list of actions or one action")
    return [parse_action(a) for a in value]


def parse_resume(raw: Any) -> tuple[str, Any]:
    """The seed's client input ``{"type": "interrupt.resume", "interrupt_id": ..., "payload"?: ...}``
    (a dict or JSON): ``(interrupt id, payload)``."""
    value = _loaded(raw, "the resume input")
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
            run = str(data.get("run") or "")
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
