"""Sessions, as applications use them: ``pw.sessions`` (a :class:`Sessions` over the client).

::

    pw = Parkway()
    sid = pw.sessions.open(agent, owner="ada", tenant="acme")
    sent = pw.sessions.send(sid, "Email Bob the report")      # dispatches the agent's branch run
    view = pw.sessions.get(sid)                                # tree, head, interrupts, parked paths
    pw.sessions.resume_interrupt(sid, view.open_interrupts[0].id, {"approved": True}, caller=user)

Every call takes the authenticated ``caller`` (:class:`~parkway.runtime.authority.Caller`);
Python code in the deployment defaults to the system caller. See
:mod:`parkway.sessions.rules` for the rules, :mod:`parkway.sessions.branch` for what a branch
run does (``add_message``) and :mod:`parkway.runtime.agents` for the agent's hooks.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Protocol

from ..config import Settings, check_ttl
from ..runtime import kinds, telemetry, tokens
from ..runtime.answers import validate_answer
from ..runtime.authority import SYSTEM, Caller
from ..runtime.clock import now_ms
from ..runtime.errors import (
    BranchBusy,
    BranchParked,
    CorruptRecord,
    SessionDenied,
    SessionNotFound,
    ValidationError,
)
from ..runtime.executor import Options
from ..runtime.hooks import MAX_ROOT_ID
from ..runtime.protocol import (
    ResumeOutcome,
    ResumeResult,
    check_depth,
    check_event_id,
    check_id,
    check_name,
    name_of,
    scoped_id,
)
from ..runtime.store import Answer, InterruptRecord, NewRun, ResumeCommit, Store, StoredEvent
from ..runtime.workflow import Workflow
from .rules import check_access, check_may_clear, check_text, message_run, parse_resume
from .store import SessionRecords, SessionStore, branch_run_id, check_session_id, session_store
from .views import Cleared, ClearOutcome, MessagePage, Sent, SessionInterrupt, SessionMessage, SessionView


class Dispatcher(Protocol):
    def enqueue(self, run_id: str, step: int, fence: int) -> None: ...


class Backend(Protocol):
    @property
    def options(self) -> Options: ...

    @property
    def dispatcher(self) -> Dispatcher: ...


class Host(Protocol):
    """What the session operations need of the client they belong to (``parkway.client.Parkway``)."""

    @property
    def store(self) -> Store: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def backend(self) -> Backend: ...

    def workflow_ref(self, workflow: Workflow | str) -> tuple[Workflow, str]: ...

    def prepare_answer(
        self,
        token: str,
        *,
        selected: Any = None,
        value: Any = None,
        request_id: str | None = None,
        responder: str | None = None,
        fresh: bool = False,
    ) -> Answer | ResumeResult: ...

    def answer_committed(self, answer: Answer, commit: ResumeCommit) -> None: ...

    def resume(
        self,
        token: str,
        *,
        selected: Any = None,
        value: Any = None,
        request_id: str | None = None,
        responder: str | None = None,
    ) -> ResumeResult: ...


RETRIES = 20
_ENDED = ("completed", "failed", "cancelled", "expired", "gone")


_REFUSED: dict[ResumeOutcome, ClearOutcome] = {
    ResumeOutcome.ALREADY_RESOLVED: "already_cleared",
    ResumeOutcome.EXPIRED: "expired",
}
"""a branch run's refusal of an answer, as a clearing's outcome"""


PAGE_CHARS = 1_000_000
"""the stored size of the messages one page holds at most (past its first message): ten messages of
the largest size, a hundred of 10 KB"""


class Sessions:
    """The session operations of a :class:`~parkway.client.Parkway` (``pw.sessions``)."""

    def __init__(self, pw: Host) -> None:
        self.pw = pw
        self._store = session_store(pw.store)

    @property
    def store(self) -> SessionStore:
        """The session transitions and reads on the client's store."""
        return self._store

    # --- reads --------------------------------------------------------------------------------

    def _read(self, session_id: str, caller: Caller, *, contents: bool = True) -> SessionRecords:
        check_id(session_id, "session id")
        records = self._store.read(session_id, contents=contents)
        check_access(caller, records.fields["owner"], records.fields["tenant"])
        return records

    def incarnation(self, session_id: str, *, caller: Caller = SYSTEM) -> str:
        """The session's incarnation (a nonce of the open that made it: an id opened again after it
        expired is another), once ``caller`` may read it (SessionDenied otherwise; SessionNotFound for
        none). A stream holds on to it and ends when it changes (``parkway.sessions.http``)."""
        check_id(session_id, "session id")
        found = self._store.whose(session_id)
        if found is None:
            raise SessionNotFound(f"no session {session_id!r}", session_id=session_id)
        owner, tenant, inc = found
        check_access(caller, owner, tenant)
        return inc

    def get(self, session_id: str, *, caller: Caller = SYSTEM) -> SessionView:
        """The session: its messages, head, interrupts (open and cleared) and live branch runs."""
        return self._view(self._read(session_id, caller))

    def page(
        self, session_id: str, *, caller: Caller = SYSTEM, cursor: str | None = None, limit: int = 100,
        ids: Sequence[str] | None = None,
    ) -> MessagePage:
        """The session with one page of its messages: ``ids`` (those of them it holds), or those
        after ``cursor`` in id order; at most ``limit`` and ``PAGE_CHARS`` of them (at least one).
        The rest of the tree is its outline: what it reads of the messages it does not return is
        their ids and parents, so a client that keeps what it read asks only for what is new."""
        rec = self._read(session_id, caller, contents=False)
        if ids is not None:
            wanted = list(dict.fromkeys(i for i in ids if i in rec.messages))[:limit]
        else:
            order = sorted(rec.messages)
            wanted = [mid for mid in order if cursor is None or mid > cursor][:limit]
        found = self._store.message_contents(session_id, wanted, PAGE_CHARS) if limit else {}
        view = self._view(rec)
        page = [
            SessionMessage(mid, view.messages[mid].parent, m.get("role", ""), m.get("content", ""), message_run(m))
            for mid, m in found.items()
        ]
        last = page[-1].id if page and ids is None else None
        return MessagePage(view, page, last if last is not None and any(mid > last for mid in rec.messages) else None)

    def _view(self, rec: SessionRecords) -> SessionView:
        messages = {
            mid: SessionMessage(mid, m.get("parent", ""), m.get("role", ""), m.get("content", ""), message_run(m))
            for mid, m in rec.messages.items()
        }
        interrupts = [
            SessionInterrupt(
                id=iid,
                reason=r.get("reason", ""),
                status="open" if iid in rec.open else "cleared",
                scope=r.get("scope", "session"),
                anchor=r.get("anchor", ""),
                origin=r.get("origin", "frontend"),
                payload=r.get("payload"),
                run_id=r.get("runId"),
                cleared_by=r.get("clearedBy"),
            )
            for iid, r in rec.interrupts.items()
        ]
        known = {i.id for i in interrupts}
        for run_id, state in rec.runs.items():
            waiting = state.get("waiting", "")
            if state.get("status") == "waiting" and _waits_on(waiting, "int_") and waiting not in known:
                found = self.pw.store.get_interrupt(run_id, waiting)
                asked = found.request if found else None
                request = asked.model_dump(by_alias=True, exclude_none=True) if asked is not None else {}
                named = (request.get("meta") or {}).get("interruptId")
                interrupts.append(
                    SessionInterrupt(
                        id=str(named or waiting),
                        reason=str(request.get("question", "")),
                        status="open",
                        scope="run",
                        anchor=rec.live.get(run_id, ""),
                        origin="frontend",
                        payload=(request.get("payload") or {}).get("payload") if request.get("payload") else None,
                        run_id=run_id,
                    )
                )
        return SessionView(
            rec.session_id,
            rec.fields["owner"],
            rec.fields["tenant"],
            rec.fields.get("agent", ""),
            rec.fields.get("head", ""),
            messages,
            interrupts,
            {r: leaf for r, leaf in rec.live.items() if rec.runs.get(r, {}).get("status") not in _ENDED},
            {r: s["status"] + (f" ({s['waiting']})" if s.get("waiting") else "") for r, s in rec.runs.items()},
        )

    def events(
        self, session_id: str, *, after: str = "0", caller: Caller = SYSTEM, limit: int | None = None
    ) -> list[StoredEvent]:
        """The session's events after ``after``, oldest first, at most ``limit`` of them (None: all):
        enough to rebuild its tree (``parkway.sessions.rules.rebuild``) while the stream holds them all
        (it keeps the last ``max_events``, like a run's). A ``message.added`` names its message (id,
        parent, role, runId, at), not its content: :meth:`get` reads that. Page on with ``after=`` the
        last one's id."""
        check_event_id(after)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ValidationError(f"limit must be a positive integer or None, not {limit!r}")
        self._read(session_id, caller)
        out: list[StoredEvent] = []
        while limit is None or len(out) < limit:
            batch = self._store.events(session_id, after, None, 1000 if limit is None else min(1000, limit - len(out)))
            if not batch:
                break
            out += batch
            after = batch[-1].id
        return out

    # --- transitions ----------------------------------------------------------------------------

    def open(
        self,
        agent: Workflow | str,
        *,
        owner: str,
        tenant: str,
        session_id: str | None = None,
        ttl_ms: int | None = None,
        caller: Caller = SYSTEM,
    ) -> str:
        """Open a session whose messages the workflow ``agent`` answers; return its id: ``session_id``
        (default: a random name) scoped by the tenant, ``<tenant>~<name>``."""
        check_name(owner, "session owner")
        check_name(tenant, "session tenant")
        check_access(caller, owner, tenant)
        # scoped by its tenant (<tenant>~<name>): another tenant's session of the same name is another
        session_id = scoped_id(session_id or "s_" + uuid.uuid4().hex[:20], tenant, "session id")
        check_session_id(name_of(session_id), MAX_ROOT_ID)
        wf, ref = self.pw.workflow_ref(agent)
        ttl = check_ttl(ttl_ms, error=ValidationError) if ttl_ms is not None else self.pw.settings.ttl_ms
        self._store.open(session_id, ref, wf.name, owner, tenant, ttl, now_ms())
        return session_id

    def send(self, session_id: str, content: str, *, caller: Caller = SYSTEM) -> Sent:
        """Add a user message at the head and dispatch the agent for it.

        Raises BranchParked (an interrupt parks the head's path) or BranchBusy (a run is still live
        at the head); nothing is written then."""
        check_text(content, "a message")
        return self._add(session_id, "send", "", content, caller)

    def edit(self, session_id: str, message_id: str, content: str, *, caller: Caller = SYSTEM) -> Sent:
        """Fork a sibling of the user message ``message_id`` with ``content`` (a new branch below
        its parent), make it the head and dispatch the agent for it."""
        check_id(message_id, "message id")
        check_text(content, "a message")
        return self._add(session_id, "edit", message_id, content, caller)

    def _add(self, session_id: str, mode: str, edited: str, content: str, caller: Caller) -> Sent:
        check_id(session_id, "session id")
        for _ in range(RETRIES):
            # what the script checks again (head, parent, live set) is read here only to name it:
            # nothing here grows with the session (its script answers retry when it changed)
            basis = self._store.basis(session_id, edited if mode == "edit" else "")
            check_access(caller, basis.fields["owner"], basis.fields["tenant"])
            if mode == "edit":
                message = basis.edited
                if message is None:
                    raise ValidationError(f"session {session_id} has no message {edited!r}")
                if message.get("role") != "user":
                    raise ValidationError("only a user's message can be edited")
                parent = message.get("parent", "")
            else:
                parent = basis.fields.get("head", "")
            message_id = "m_" + uuid.uuid4().hex[:14]
            run_id = branch_run_id(session_id)
            new = {"id": message_id, "role": "user", "content": content, "at": now_ms(), "runId": run_id}
            trigger = {"type": "user.message", "messageId": message_id}
            run = self._branch_run(session_id, basis.fields, run_id, parent, trigger, new)
            reply = self._store.send(session_id, mode, edited, parent, new, run, basis.live, now_ms())
            if reply[0] == "ok":
                if reply[1] == "0":
                    self.pw.backend.dispatcher.enqueue(run_id, 0, 0)
                return Sent(message_id, run_id)
            self._refused(session_id, reply)
        raise ValidationError(f"session {session_id} kept changing; try again")

    def _refused(self, session_id: str, reply: list[str]) -> None:
        if reply[0] == "parked":
            raise BranchParked(
                f"session {session_id}: the branch is parked by {', '.join(reply[1:])}; resume or clear "
                "those interrupts, or edit a message above their anchor",
                session_id=session_id,
                interrupts=tuple(reply[1:]),
            )
        if reply[0] == "busy":
            raise BranchBusy(
                f"session {session_id}: run {reply[1]} is still live on this branch; wait for it",
                session_id=session_id,
                run_id=reply[1],
            )
        if reply[0] == "gone":
            raise SessionNotFound(f"no session {session_id!r}", session_id=session_id)
        if reply[0] == "no_message":
            raise ValidationError(f"session {session_id} has no such message")
        if reply[0] != "retry":
            raise ValidationError(f"session {session_id}: unexpected reply {reply!r}")

    def _branch_run(
        self,
        session_id: str,
        fields: Mapping[str, str],
        run_id: str,
        leaf: str,
        trigger: dict[str, Any],
        new: dict[str, Any] | None,
        triggers: list[dict[str, Any]] | None = None,
    ) -> NewRun:
        """The run a branch dispatches: the agent, with the session, its leaf and the trigger as
        input (its node gets ``messages``, the path to the leaf, read when it runs); a run
        dispatched for cleared interrupts gets all their triggers, in clearing order, as
        ``triggers`` (``trigger`` is the first)."""
        data = {"session": session_id, "leaf": new["id"] if new is not None else leaf, "trigger": trigger}
        if triggers is not None:
            data["triggers"] = triggers
        check_depth(data, "session run input")
        wf = self.pw.backend.options.loader(fields["agent"])
        assert wf.start is not None
        return NewRun(run_id, wf.name, fields["agent"], wf.start, data, int(fields["ttl"]), now_ms())

    def switch(self, session_id: str, head: str, *, caller: Caller = SYSTEM) -> SessionView:
        """Make ``head`` (a message id; '' = before the first message) the active head.

        Switching back to a parked branch re-enters its parked state. An answer given to a run's
        interrupt while its branch was abandoned is delivered to the run in the same step (only on
        a switch to a head whose path runs through the run's branch)."""
        if head != "":
            check_id(head, "message id")
        for _ in range(RETRIES):
            rec = self._read(session_id, caller)
            due = self._due(rec, head)
            reply = self._store.switch(session_id, head, now_ms(), [(r, run, a) for r, run, a, _ in due])
            if reply[0] == "no_message":
                raise ValidationError(f"session {session_id} has no message {head!r}")
            if reply[0] == "gone":
                raise SessionNotFound(f"no session {session_id!r}", session_id=session_id)
            if reply[0] == "ok":
                for i, (_, _, answer, _) in enumerate(due):
                    step, fence, handed = reply[3 + 5 * i : 6 + 5 * i]
                    if answer is not None and step != "":
                        commit = ResumeCommit(ResumeOutcome.ACCEPTED, int(step), int(fence), None, handed == "1")
                        self.pw.answer_committed(answer, commit)
                return self._view(self._store.read(session_id))
        raise ValidationError(f"session {session_id} kept changing; try again")

    def _due(self, rec: SessionRecords, head: str) -> list[tuple[str, str, Answer | None, str]]:
        """The answers kept for branches the path to ``head`` runs through, each prepared for its
        run (None: the run no longer waits on it): (request id, run id, answer, responder)."""
        if head != "" and head not in rec.messages:
            return []
        on = set(self._view(rec).path(head))
        out: list[tuple[str, str, Answer | None, str]] = []
        for request_id, run_id in rec.deliveries.items():
            if rec.live.get(run_id) not in on:
                continue
            kept = rec.interrupts.get(request_id, {})
            who = str((kept.get("clearedBy") or {}).get("role", "session"))
            interrupt = self.pw.store.get_interrupt(run_id, request_id)
            prepared: Answer | ResumeResult | None = None
            if interrupt is not None:
                token = tokens.mint(self.pw.backend.options.secret, run_id, request_id)
                answer = self._answer(interrupt, kept.get("answer"))
                prepared = self.pw.prepare_answer(token, responder=who, fresh=True, **answer)
            out.append((request_id, run_id, prepared if isinstance(prepared, Answer) else None, who))
        return out

    def raise_interrupt(
        self,
        session_id: str,
        reason: str,
        payload: Any = None,
        *,
        caller: Caller = SYSTEM,
        interrupt_id: str | None = None,
        anchor: str | None = None,
        scope: Literal["branch", "session"] | None = None,
    ) -> str:
        """Raise an interrupt from outside the agent: anchored at ``anchor`` (default: the head) it
        parks every path through it; ``scope="session"`` (system and machine callers only; their
        default, so editing the anchored message does not step around a stop), or a session with no
        message yet, parks every branch. Returns its id (minted when not given).

        A given ``interrupt_id`` lives in its origin's namespace: a system caller's is kept as it is,
        a machine's becomes ``machine-<id>`` and a user's ``frontend-<id>``, so an id raised first by
        a lower origin never takes the one a higher origin will raise."""
        check_text(reason, "an interrupt's reason", 1000)
        check_depth(payload, "interrupt payload")
        if scope is None:
            scope = "branch" if caller.role == "user" else "session"
        if scope not in ("branch", "session"):
            raise ValidationError("scope is 'branch' or 'session'")
        if anchor == "":
            scope = "session"  # no anchor: every branch, as a session-wide interrupt
        if scope == "session" and caller.role == "user":
            raise SessionDenied("only a system or machine caller raises a session-wide interrupt", reason="privilege")
        if interrupt_id is not None:
            interrupt_id = _namespaced(check_id(interrupt_id, "interrupt id"), caller.origin)
        rec = self._read(session_id, caller)
        iid = interrupt_id or "si_" + uuid.uuid4().hex[:16]
        where = "" if scope == "session" else (anchor if anchor is not None else rec.fields.get("head", ""))
        if where:
            check_id(where, "anchor message id")
        now = now_ms()
        record = {
            "id": iid,
            "reason": reason,
            "payload": payload,
            "origin": caller.origin,
            "raisedBy": caller.public(),
            "anchor": where,
            "scope": "session",
            "raisedAt": now,
        }
        reply = self._store.raise_(session_id, iid, where, record, now)
        if reply == "exists":
            raise ValidationError(f"session {session_id} already has an interrupt {iid!r}")
        if reply == "no_anchor":
            raise ValidationError(f"session {session_id} has no message {where!r} to anchor at")
        if reply == "gone":
            raise SessionNotFound(f"no session {session_id!r}", session_id=session_id)
        return iid

    def resume(self, session_id: str, resume_input: Any, *, caller: Caller = SYSTEM) -> Cleared:
        """The seed's client input, ``{"type": "interrupt.resume", "interrupt_id": ..., "payload": ...}``
        (a dict or its JSON)."""
        interrupt_id, payload = parse_resume(resume_input)
        return self.resume_interrupt(session_id, interrupt_id, payload, caller=caller)

    def resume_interrupt(
        self, session_id: str, interrupt_id: str, payload: Any = None, *, caller: Caller = SYSTEM
    ) -> Cleared:
        """Clear the interrupt ``interrupt_id`` with ``payload``, exactly once (see :class:`Cleared`).

        Raises SessionDenied when the caller may not (another tenant, not the owner, or an
        interrupt of a higher origin); an unknown, stale or duplicate id is a no-op outcome."""
        check_id(interrupt_id, "interrupt id")
        check_depth(payload, "resume payload")
        unsure = True
        for _ in range(RETRIES):
            rec = self._read(session_id, caller)
            owner, tenant = rec.fields["owner"], rec.fields["tenant"]
            if interrupt_id in rec.open:
                result = self._clear(rec, interrupt_id, payload, caller)
                if result is not None:
                    return result
                continue
            done = rec.interrupts.get(interrupt_id) or next(
                (r for r in rec.interrupts.values() if r.get("name") == interrupt_id and r.get("scope") == "run"), None
            )
            found = self._run_interrupt(rec, interrupt_id)
            if found is None and done is not None:
                check_may_clear(caller, done.get("origin", "system"), owner, tenant)
                return Cleared("already_cleared", interrupt_id)
            if found is None:
                if not unsure:
                    return Cleared("unknown", interrupt_id)
                # the runs are read after the session's records: an answer committed in between
                # shows its run no longer waiting but not yet its clearing; the next read shows both
                unsure = False
                continue
            run_id, request_id, interrupt = found
            check_may_clear(caller, "frontend", owner, tenant)
            answer = self._answer(interrupt, payload)  # InvalidAnswer now, not when delivered
            now = now_ms()
            leaf = rec.live.get(run_id, "")
            record = {
                "id": request_id,
                "name": interrupt_id,
                "reason": "",
                "origin": "frontend",
                "scope": "run",
                "runId": run_id,
                "anchor": leaf,
                "answer": payload,
                "clearedBy": caller.public(),
                "clearedAt": now,
            }
            token = tokens.mint(self.pw.backend.options.secret, run_id, request_id)
            prepared = self.pw.prepare_answer(token, responder=caller.name, fresh=True, **answer)
            if isinstance(prepared, ResumeResult):
                return Cleared(_REFUSED.get(prepared.outcome, "unknown"), request_id, run_id)
            reply = self._store.answer(session_id, run_id, prepared, record, now)
            if reply[0] == "accepted":
                commit = ResumeCommit(ResumeOutcome.ACCEPTED, int(reply[2]), int(reply[3]), None, reply[4] == "1")
                self.pw.answer_committed(prepared, commit)
                others = tuple(i for i in reply[5:] if i not in (request_id, interrupt_id))
                return Cleared("still_parked" if others else "resumed", request_id, run_id, others)
            if reply[0] in ("kept", "already_cleared"):
                return Cleared("cleared" if reply[0] == "kept" else "already_cleared", request_id, run_id)
            if reply[0] == "gone":
                raise SessionNotFound(f"no session {session_id!r}", session_id=session_id)
            if reply[0] in ("moved", "not_live"):
                continue  # escalated, or no longer the session's branch run: read again
            return Cleared(_REFUSED.get(ResumeOutcome(reply[0]), "unknown"), request_id, run_id)
        raise ValidationError(f"session {session_id} kept changing; try again")

    def _run_interrupt(self, rec: SessionRecords, interrupt_id: str) -> tuple[str, str, InterruptRecord] | None:
        """The live run waiting on ``interrupt_id`` (its request id, the id the policy gave it, or
        the ``use_interrupt`` id of node code), with the interrupt. A name several branches wait on
        means the one on the active path, else it is ambiguous (ValidationError: use the request id)."""
        return self._waiting(
            rec,
            "int_",
            lambda record: (
                interrupt_id
                in (record.request_id, record.hook_name, _meta(record).get("interruptId"))
            ),
        )

    def _waiting(
        self, rec: SessionRecords, prefix: str, matches: Callable[[InterruptRecord], bool]
    ) -> tuple[str, str, InterruptRecord] | None:
        found: list[tuple[str, str, InterruptRecord]] = []
        for run_id, state in rec.runs.items():
            waiting = state.get("waiting", "")
            if state.get("status") != "waiting" or not _waits_on(waiting, prefix):
                continue
            record = self.pw.store.get_interrupt(run_id, waiting)
            if record is not None and matches(record):
                found.append((run_id, waiting, record))
        if len(found) <= 1:
            return found[0] if found else None
        on = set(self._view(rec).path(rec.fields.get("head", "")))
        active = [f for f in found if rec.live.get(f[0]) in on]
        if len(active) == 1:
            return active[0]
        raise ValidationError(
            f"{len(found)} branches of session {rec.session_id} wait on that name; use the request id "
            f"({', '.join(f[1] for f in found)})"
        )

    def _answer(self, interrupt: InterruptRecord, payload: Any) -> dict[str, Any]:
        """``resume``'s answer arguments for ``payload``, checked against the interrupt's request
        (a choice takes it as ``selected``, the others as ``value``); raises InvalidAnswer."""
        request = interrupt.request
        if request is None:
            raise CorruptRecord("an open interrupt's record has no request", what="interrupt")
        contract = self.pw.settings.modules.load_contract(request.contract_ref) if request.contract_ref else None
        answer = {kinds.get(request.kind).answer_arg: payload}
        validate_answer(request, contract=contract, **answer)
        return answer

    def _clear(self, rec: SessionRecords, interrupt_id: str, payload: Any, caller: Caller) -> Cleared | None:
        record = rec.interrupts[interrupt_id]
        check_may_clear(caller, record.get("origin", "system"), rec.fields["owner"], rec.fields["tenant"])
        now = now_ms()
        cleared = {**record, "answer": payload, "clearedBy": caller.public(), "clearedAt": now}
        head = rec.fields.get("head", "")
        trigger = _resumed(interrupt_id, payload)
        kept = [
            (seq, _resumed(kept_id, rec.interrupts.get(kept_id, {}).get("answer")))
            for seq, kept_id in rec.kept_triggers(set(self._view(rec).path(head)) | {head})
        ]
        run_id = branch_run_id(rec.session_id)
        triggers = [t for _, t in kept] + [trigger]
        run = self._branch_run(rec.session_id, rec.fields, run_id, head, triggers[0], None, triggers)
        live = {r: int(rec.runs.get(r, {}).get("step") or 0) for r in rec.live}
        reply = self._store.clear(rec.session_id, interrupt_id, cleared, head, live, run, trigger, kept, now)
        outcome = reply[0]
        if outcome == "retry":
            return None
        if outcome == "gone":
            raise SessionNotFound(f"no session {rec.session_id!r}", session_id=rec.session_id)
        if outcome == "dispatched":
            if not self._store.enqueues:
                self.pw.backend.dispatcher.enqueue(run_id, 0, 0)
            return Cleared("dispatched", interrupt_id, run_id)
        if outcome == "resumed":
            return Cleared("resumed", interrupt_id, reply[1])
        if outcome == "still_parked":
            return Cleared("still_parked", interrupt_id, None, tuple(reply[1:]))
        if outcome in ("cleared", "already_cleared", "unknown"):
            return Cleared(outcome, interrupt_id)  # type: ignore[arg-type]
        raise ValidationError(f"unexpected reply {reply!r}")

    def answer_tool(
        self,
        session_id: str,
        tool_call_id: str,
        result: Any = None,
        *,
        error: str | None = None,
        caller: Caller = SYSTEM,
    ) -> ResumeResult:
        """Answer a deferred tool call (the policy's ``tool.defer``) with ``result`` or ``error``."""
        check_id(tool_call_id, "tool call id")
        check_depth(result, "tool result")
        rec = self._read(session_id, caller)
        check_may_clear(caller, "frontend", rec.fields["owner"], rec.fields["tenant"])
        found = self._waiting(
            rec, "tool_", lambda record: _meta(record).get("toolCallId") == tool_call_id
        )
        if found is not None:
            run_id, waiting, _ = found
            token = tokens.mint(self.pw.backend.options.secret, run_id, waiting)
            value = {"error": error} if error is not None else {"result": result}
            return self.pw.resume(token, value=value, responder=caller.name)
        return ResumeResult(outcome=ResumeOutcome.UNKNOWN, request_id=None)


def as_caller(value: Caller | Mapping[str, Any]) -> Caller:
    """A Caller from itself or ``{"role": ..., "owner": ..., "tenant": ...}``."""
    if isinstance(value, Caller):
        return value
    if isinstance(value, Mapping):
        return Caller(value.get("role"), value.get("owner"), value.get("tenant"))  # type: ignore[arg-type]
    raise ValidationError("caller must be a Caller or {'role', 'owner', 'tenant'}")


def _resumed(interrupt_id: str, payload: Any) -> dict[str, Any]:
    """The trigger a cleared session interrupt delivers to its branch."""
    return {"type": "interrupt.resumed", "interrupt_id": interrupt_id, "payload": payload}


RESERVED_PREFIXES = ("int_", "tool_", "si_", "machine-", "frontend-")
"""what a given session interrupt id may not start with: parkway's minted ids and the origins' namespaces"""


def _namespaced(interrupt_id: str, origin: str) -> str:
    """A given interrupt id in its origin's namespace (a system caller's as it is)."""
    if interrupt_id.startswith(RESERVED_PREFIXES):
        raise ValidationError(f"an interrupt id may not start with any of {', '.join(RESERVED_PREFIXES)}")
    return interrupt_id if origin == "system" else check_id(f"{origin}-{interrupt_id}", "interrupt id")


def _waits_on(waiting: str, prefix: str) -> bool:
    """Whether a run's ``waiting`` names an interrupt of the kind ``prefix`` marks: ``tool_`` a tool
    approval, ``int_`` a question, which is also any id parkway minted (``i<n>_<nonce>_<run id>``)."""
    return waiting.startswith(prefix) or (prefix == "int_" and telemetry.run_of_request(waiting) is not None)


def _meta(record: InterruptRecord) -> dict[str, Any]:
    """The interrupt's request's ``meta`` ({} for a record that kept no request)."""
    return record.request.meta if record.request is not None else {}
