"""A session's branch run, as the executor sees it: an observer (``parkway.runtime.observers``).

:class:`BranchRuns` is the sessions' entry in the executor's ``Options.extensions``: for a run the
session's script created as a branch run (its record names its ``session`` and its ``leaf``) it
gives a :class:`BranchObserver`, which

- before each attempt, in one round trip: holds the run if its branch is parked, else reads the path
  to the leaf (the node's ``messages``; messages never change, so every attempt reads the same); shows the policy the
  run's trigger (``session.start``, ``user.message``) and the triggers delivered to this activation;
- before a hook calls out (a model, a tool): holds the run if its branch is parked;
- when a hook's call settles: commits it through the session (``session_settle.lua``): a model reply
  or an added message on a parked branch is voided, a tool result kept, and the run held;
- when the node parks: names the session, the anchor and the branch run in the request's ``meta``
  (listings show a session's interrupts with them).

A held run ends its job and waits, without compute, until the interrupts parking its branch are
cleared; the resume is then delivered first (``interrupt.resumed`` on the run's stream) and the
node replays to its follow-on. ``add_message`` is the hook a branch run's node code adds messages with.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..runtime import journal
from ..runtime.agents import consult, delivered, request_id_for
from ..runtime.errors import ValidationError
from ..runtime.hooks import Held, NodeContext, Pause, RunObserver, current
from ..runtime.observers import Extension, on_settle
from ..runtime.policy import check_text
from ..runtime.protocol import check_id
from ..runtime.store import JournalEntry, RunRecord, Store
from .store import SessionStore


class BranchRuns(Extension):
    """Observes the branch runs of sessions."""

    def observe(self, store: Store, run: RunRecord) -> RunObserver | None:
        if run.session is None or run.leaf is None:  # not a branch run (a branch run's child has no leaf)
            return None
        return BranchObserver(SessionStore(store), run.session, run.leaf)


class BranchObserver(RunObserver):
    """One job of a session's branch run."""

    def __init__(self, store: SessionStore, session_id: str, leaf: str) -> None:
        self.store = store
        self.session_id = session_id
        self.leaf = leaf

    def before_attempt(self, ctx: NodeContext, data: dict[str, Any]) -> dict[str, Any]:
        """The node's data with ``messages``, the path to the run's leaf; the run keeps only the
        leaf, so a long conversation's path is not copied into each of its runs."""
        # one step: a run released onto a parked branch waits before it does anything; else its path
        messages = self.store.begin(self.session_id, ctx.run_id, ctx.fence, ctx.step, self.leaf, ctx.clock())
        if messages is None:
            raise Held(f"run {ctx.run_id} held: its branch is parked")
        view = {**data, "messages": messages}
        if ctx.step == 0:
            self._consult_start(ctx, view)  # the policy sees the run's trigger before the node runs
        ctx.triggers = delivered(ctx, view)
        for name, trigger in ctx.triggers:  # and each interrupt.resumed delivered to it, once each
            consult(ctx, trigger, journal.interrupt(f"policy:trigger:{name}"))
        return view

    def before_call(self, ctx: NodeContext) -> None:
        """Hold the run now if its branch is parked: nothing is called while parked."""
        check = JournalEntry("check", "", None)
        outcome = self.store.settle(
            self.session_id, ctx.run_id, ctx.fence, ctx.step, "check", "", check, None, ctx.clock()
        )
        if outcome == "held":
            raise Held(f"run {ctx.run_id} held: its branch is parked")

    def on_settle(
        self, ctx: NodeContext, field_name: str, entry: JournalEntry, mode: str, message: Mapping[str, Any] | None
    ) -> bool:
        outcome = self.store.settle(
            self.session_id, ctx.run_id, ctx.fence, ctx.step, mode, field_name, entry, message, ctx.clock()
        )
        if outcome in ("voided", "held"):
            raise Held(f"run {ctx.run_id} held: its branch is parked ({outcome})")
        return True

    def on_park(self, ctx: NodeContext, pause: Pause) -> None:
        anchor = self.store.leaf(self.session_id, ctx.run_id)
        meta = {**pause.request.meta, "session": self.session_id, "anchor": anchor, "branchRun": ctx.run_id}
        pause.request = pause.request.model_copy(update={"meta": meta})

    def _consult_start(self, ctx: NodeContext, data: Mapping[str, Any]) -> None:
        """``session.start`` for the session's first message, then the run's own trigger (``user.message``)."""
        trigger = data.get("trigger") if isinstance(data.get("trigger"), Mapping) else None
        messages = data.get("messages") or []
        if trigger is None or trigger.get("type") != "user.message":
            return
        if len(messages) == 1:
            consult(ctx, {"type": "session.start", "session": self.session_id}, journal.interrupt("policy:start"))
        content = messages[-1].get("content") if messages else None
        consult(ctx, {**trigger, "content": content}, journal.interrupt("policy:message"))


def add_message(content: str, *, role: str = "assistant", id: str | None = None) -> str:
    """Add a message below this branch run's leaf (once; replays do not add it again) and return
    its id. The session's head follows when it was at the leaf. On a parked branch the run is held
    and the message is added after the resume."""
    ctx = current()
    if not any(isinstance(observer, BranchObserver) for observer in ctx.observers):
        raise ValidationError("add_message works in a session's branch run only")
    check_text(content, "a message's content")
    if role not in ("assistant", "tool"):
        raise ValidationError("a branch run adds assistant or tool messages")
    field = journal.message(check_id(id, "message id")) if id is not None else ctx.next_position()
    entry = ctx.replayed(field, "message", role)
    if entry is not None:
        return str(entry.value)
    message_id = request_id_for("m_", ctx.run_id, ctx.step, field)[:16]
    message = {"id": message_id, "role": role, "content": content, "runId": ctx.run_id}
    on_settle(ctx, field, JournalEntry("message", role, message_id), "void", message)
    return message_id
