"""What the session operations return (``pw.sessions``): a message sent, an interrupt cleared, a
session's view (its tree of messages, open interrupts, a page of messages) and how each is shown
over HTTP (``public``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

ClearOutcome = Literal["resumed", "dispatched", "cleared", "still_parked", "already_cleared", "unknown", "expired"]


@dataclass(frozen=True)
class Sent:
    """A message added and the branch run dispatched for it."""

    message_id: str
    run_id: str


@dataclass(frozen=True)
class Cleared:
    """What ``resume_interrupt`` did. ``resumed``: the branch's run got the answer (or was woken
    with the ``interrupt.resumed`` trigger); ``dispatched``: no run was live at the head, one was
    dispatched for the trigger; ``cleared``: recorded, nothing delivered (an abandoned branch, or
    no branch); ``still_parked``: cleared, but other interrupts (``parked_by``) still park the
    head; ``already_cleared``, ``unknown``, ``expired``: nothing changed."""

    outcome: ClearOutcome
    interrupt_id: str
    run_id: str | None = None
    parked_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class SessionInterrupt:
    id: str
    reason: str
    status: Literal["open", "cleared"]
    scope: Literal["session", "run"]
    """``session``: raised by a caller; ``run``: raised by a branch run (node code or the policy)"""
    anchor: str
    """the message it is anchored at; '' = global (parks every branch)"""
    origin: str
    payload: Any = None
    run_id: str | None = None
    cleared_by: dict[str, Any] | None = None


@dataclass(frozen=True)
class SessionMessage:
    id: str
    parent: str
    role: str
    content: str
    run_id: str | None = None


@dataclass
class SessionView:
    """A session as one read saw it."""

    session_id: str
    owner: str
    tenant: str
    agent: str
    head: str
    messages: dict[str, SessionMessage]
    interrupts: list[SessionInterrupt]
    live_runs: dict[str, str]
    """live branch run id -> its leaf message"""
    run_status: dict[str, str] = field(default_factory=dict)

    def path(self, leaf: str) -> list[str]:
        out: list[str] = []
        while leaf:
            out.append(leaf)
            leaf = self.messages[leaf].parent if leaf in self.messages else ""
        return out[::-1]

    @property
    def open_interrupts(self) -> list[SessionInterrupt]:
        return [i for i in self.interrupts if i.status == "open"]

    def parked_by(self, leaf: str | None = None) -> list[str]:
        """The open interrupts parking the path that ends at ``leaf`` (default: the head)."""
        on = set(self.path(self.head if leaf is None else leaf))
        return [i.id for i in self.open_interrupts if i.anchor == "" or i.anchor in on]

    def children(self, message_id: str) -> list[str]:
        return [m.id for m in self.messages.values() if m.parent == message_id]

    def public(self) -> dict[str, Any]:
        """The session as JSON (camelCase), as the CLI and the HTTP API show it."""
        return {
            "sessionId": self.session_id,
            "owner": self.owner,
            "tenant": self.tenant,
            "agent": self.agent,
            "head": self.head,
            "parkedBy": self.parked_by(),
            "messages": [self.message_json(m) for m in self.messages.values()],
            "interrupts": [
                {
                    "id": i.id,
                    "reason": i.reason,
                    "status": i.status,
                    "scope": i.scope,
                    "anchor": i.anchor,
                    "origin": i.origin,
                    "payload": i.payload,
                    "runId": i.run_id,
                    "clearedBy": i.cleared_by,
                }
                for i in self.interrupts
            ],
            "liveRuns": self.live_runs,
        }

    def message_json(self, m: SessionMessage) -> dict[str, Any]:
        """One message as JSON, with the interrupts that park the path to it."""
        return {"id": m.id, "parent": m.parent, "role": m.role, "content": m.content, "runId": m.run_id,
                "parkedBy": self.parked_by(m.id)}

    def tree(self) -> str:
        """The tree as text: one line per message (``-``, the head ``*``), indented below its parent,
        with ``⏸`` lines under the messages interrupts are anchored at."""
        lines: list[str] = [f"session {self.session_id} (owner {self.owner}, tenant {self.tenant})"]
        anchors: dict[str, list[str]] = {}
        for i in self.open_interrupts:
            anchors.setdefault(i.anchor, []).append(f"{i.id}: {i.reason}")
        for text in anchors.get("", []):
            lines.append(f"  ⏸ global interrupt {text}")
        live_at = {leaf: run for run, leaf in self.live_runs.items()}

        def walk(mid: str, depth: int) -> None:
            m = self.messages[mid]
            mark = "*" if mid == self.head else "-"
            content = m.content if len(m.content) <= 60 else m.content[:57] + "..."
            extra = f"  [run {live_at[mid]} {self.run_status.get(live_at[mid], '')}]" if mid in live_at else ""
            lines.append(f"{'  ' * depth}{mark} {mid} {m.role}: {content}{extra}")
            for text in anchors.get(mid, []):
                lines.append(f"{'  ' * depth}    ⏸ parked by {text}")
            for child in self.children(mid):
                walk(child, depth + 1)

        for root in self.children(""):
            walk(root, 1)
        return "\n".join(lines)


@dataclass(frozen=True)
class MessagePage:
    """A session read a page at a time: ``view`` holds every message's id and parent but no content
    (the outline), ``messages`` one page of them whole, ``next_cursor`` where the next page starts
    (None: none left)."""

    view: SessionView
    messages: list[SessionMessage]
    next_cursor: str | None

    def public(self) -> dict[str, Any]:
        """The session as JSON: its facts, ``outline`` (each message's id, parent and parkedBy),
        ``messages`` (this page's, whole) and ``nextCursor``."""
        body = self.view.public()
        body["outline"] = [{"id": m["id"], "parent": m["parent"], "parkedBy": m["parkedBy"]} for m in body["messages"]]
        body["messages"] = [self.view.message_json(m) for m in self.messages]
        body["nextCursor"] = self.next_cursor
        return body
