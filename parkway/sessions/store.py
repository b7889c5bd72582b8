"""The session transitions on Redis: one script each (``lua/session_*.lua``), over the session's keys
and its branch runs' (they share the session's hash tag). Reads are one pipeline.

Built from a store's public parts (:class:`ScriptStore`: the Redis store has them): its client, its
limits, ``new_run``/``resume_call``/``hand_off`` (the arguments of the shared Lua functions that create
a run, answer an interrupt, enqueue a job) and ``call_script`` for the scripts registered here.

Scripts that must see the session's live runs get them from the caller (their run keys cannot be
named inside a script): the caller reads the live set, and the script answers ``retry`` when the
set changed meanwhile; the caller then reads again.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .._lazy import LazyModule
from ..adapters import codec
from ..adapters.limits import Limits
from ..adapters.redis import keys, layout
from ..adapters.redis.connection.connection import run_plan
from ..adapters.redis.connection.errors import translated
from ..adapters.redis.scripts.scripts import Args
from ..runtime.errors import CorruptRecord, SessionError, SessionNotFound, StoreError, ValidationError
from ..runtime.store import Answer, JournalEntry, NewRun, StoredEvent

if TYPE_CHECKING:
    import parkway.sessions.calls as calls  # `from . import calls` would name this package (tests/test_imports.py)

    from ..adapters.redis.scripts import calls as store_calls
else:  # the calls' classes (and this feature's scripts' folder) load with the first transition
    calls = LazyModule(f"{__package__}.calls")

SCRIPTS = tuple(f"session_{name}" for name in ("open", "send", "settle", "raise", "clear", "answer", "switch"))
"""the session transitions, ``lua/<name>.lua`` each (their arguments: :mod:`.calls`)"""


def branch_run_id(session_id: str) -> str:
    """A new branch run's id: its keys share the session's hash tag, so one script moves both."""
    return keys.tagged_run_id(session_id, uuid.uuid4().hex[:16])


def check_session_id(session_id: str, limit: int) -> None:
    """Refuse a session id (its name) that could not tag its branch runs' keys (too long, or a
    separator in it)."""
    if len(session_id) > limit or keys.CHILD_SEPARATOR in session_id:
        raise ValidationError(f"a session id is at most {limit} characters, without {keys.CHILD_SEPARATOR!r}")


@runtime_checkable
class ScriptStore(Protocol):
    """What the session transitions need of a store: the Redis store's public seam."""

    client: Any
    limits: Limits
    next_job: Any

    def add_scripts(self, names: Iterable[str], read_only: Iterable[str] = ()) -> None: ...

    def call_script(self, run_id: str | None, params: Args) -> Any: ...

    def hand_off(self, run_id: str) -> tuple[list[str], list[Any]]: ...

    def new_run(self, run: NewRun) -> store_calls.NewRun: ...

    def resume_call(self, run_id: str, answer: Answer) -> store_calls.Resume: ...


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class SessionRecords:
    """Everything a session holds, read at once."""

    session_id: str
    fields: dict[str, str]
    messages: dict[str, dict[str, Any]]
    """message id -> message (role, content, runId, at, ...; ``run`` in one stored before that name),
    with its ``parent``"""
    open: dict[str, str]
    interrupts: dict[str, dict[str, Any]]
    deliveries: dict[str, str]
    live: dict[str, str]
    runs: dict[str, dict[str, str]] = field(default_factory=dict)
    """live run id -> its status, waiting and step"""

    def kept_triggers(self, on: set[str] | frozenset[str]) -> list[tuple[str, str]]:
        """The triggers of interrupts cleared while the path they parked was still parked, kept
        for the messages in ``on`` (the active path): (seq, interrupt id), in clearing order."""
        out: list[tuple[int, str]] = []
        for name, value in self.fields.items():
            if name.startswith("t:") and name[2:].isdigit():
                leaf, _, interrupt_id = value.partition(" ")
                if leaf in on:
                    out.append((int(name[2:]), interrupt_id))
        return [(str(seq), interrupt_id) for seq, interrupt_id in sorted(out)]


BASIS_FIELDS = ("owner", "tenant", "agent", "head", "ttl")
"""the session hash's fields ``SessionStore.basis`` reads (``owner`` first: None means no session)"""


@dataclass(frozen=True)
class SendBasis:
    """What adding a message reads of a session (``SessionStore.basis``)."""

    session_id: str
    fields: dict[str, str]
    live: list[str]
    """the live set's run ids (runs that ended leave it when a transition sees them ended)"""
    edited: dict[str, Any] | None = None
    """the edited message with its ``parent`` (an edit only; None when there is no such message)"""


def _resumed_event(trigger: Mapping[str, Any]) -> dict[str, Any]:
    """The ``interrupt.resumed`` event a delivered trigger writes on its run's stream: camelCase, as
    every event (the trigger itself, which the policy and ``use_triggers`` read, keeps the seed's
    ``interrupt_id``)."""
    return {"interruptId": trigger.get("interrupt_id"), "payload": trigger.get("payload")}


def _trigger_entry(trigger: Mapping[str, Any]) -> JournalEntry:
    """How a trigger delivered to a branch run is recorded in its journal (``g:<seq>``)."""
    return JournalEntry("trigger", str(trigger.get("type", "")), dict(trigger))


def session_store(store: object) -> SessionStore:
    """The session transitions on ``store``; over shards (``ShardedStore``), one per shard, each
    session's calls on its id's shard (its branch runs, ``<session>--<hex>``, share its hash tag)."""
    shards = getattr(store, "stores", None)
    if shards is None:
        return SessionStore(store)
    return ShardedSessionStore(store, [SessionStore(s) for s in shards])  # type: ignore[return-value]


class ShardedSessionStore:
    """:class:`SessionStore`'s methods, each called on the shard of its first argument (the session id)."""

    def __init__(self, router: Any, stores: list[SessionStore]) -> None:
        self.router, self.stores = router, stores

    @property
    def enqueues(self) -> bool:
        return self.stores[0].enqueues

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or not callable(getattr(SessionStore, name, None)):
            raise AttributeError(name)

        def routed(session_id: str, *args: Any, **kwargs: Any) -> Any:
            return getattr(self.stores[self.router.shard_of(session_id)], name)(session_id, *args, **kwargs)

        return routed


class SessionStore:
    """The session transitions and reads, on a store's client and scripts."""

    def __init__(self, store: object) -> None:
        if not isinstance(store, ScriptStore):
            raise StoreError(f"sessions need a store that runs their scripts (the Redis store), not {store!r:.80}")
        store.add_scripts(SCRIPTS)
        self.store = store

    @property
    def enqueues(self) -> bool:
        """Whether the scripts enqueue the jobs they call for (else the caller does)."""
        return self.store.next_job is not None

    def _maxlen(self) -> int:
        return self.store.limits.max_events

    def _event(self, data: Mapping[str, Any]) -> bytes:
        return codec.encode(dict(data), what="event")

    def _session(self, s: str) -> calls.Session:
        """The session's keys, which every session script takes first."""
        return calls.Session(
            hash=keys.session(s), messages=keys.session_messages(s), up=keys.session_up(s),
            open=keys.session_open(s), interrupts=keys.session_interrupts(s),
            deliveries=keys.session_deliveries(s), live=keys.session_live(s), events=keys.session_events(s),
            path=keys.session_path(s), ended=keys.ended_summaries(s),
        )

    # --- reads -------------------------------------------------------------------------------

    def read(self, session_id: str, *, contents: bool = True) -> SessionRecords:
        """The session's records; without ``contents``, its messages are their ids and parents only
        (``{"parent": ...}``: a long conversation's text is not read; ``message_contents`` reads it)."""
        k = self._session(session_id)
        pipe = self.store.client.pipeline(transaction=True)
        for key in (k.hash, k.up, k.open, k.interrupts, k.deliveries, k.live, *([k.messages] if contents else [])):
            pipe.hgetall(key)

        with translated():
            fields, up, open_, interrupts, deliveries, live, *stored = pipe.execute()
        messages = stored[0] if contents else dict.fromkeys(up)
        if not fields:
            raise SessionNotFound(f"no session {session_id!r}", session_id=session_id)
        layout.record_format(fields.get(b"fmt"), f"session {session_id}")  # a later version's: refused
        runs: dict[str, dict[str, str]] = {}
        if live:
            pipe = self.store.client.pipeline(transaction=False)
            ids = [_text(r) for r in live]
            for r in ids:
                pipe.hmget(keys.run(r), "status", "waiting", "step")
            with translated():
                for r, (status, waiting, step) in zip(ids, pipe.execute(), strict=True):
                    runs[r] = {
                        "status": _text(status) if status else "gone",
                        "waiting": layout.full_id(_text(waiting or b""), r),
                        "step": _text(step or b"0"),
                    }
        decoded = {}
        for mid, blob in messages.items():
            message = layout.with_runs(session_id, self._decode(blob, "session message")) if blob is not None else {}
            message["parent"] = _text(up.get(mid, b""))
            decoded[_text(mid)] = message
        return SessionRecords(
            session_id,
            {_text(a): _text(b) for a, b in fields.items()},
            decoded,
            {_text(a): _text(b) for a, b in open_.items()},
            {_text(a): self._decode(b, "session interrupt") for a, b in interrupts.items()},
            {_text(a): _text(b) for a, b in deliveries.items()},
            {_text(a): _text(b) for a, b in live.items()},
            runs,
        )

    def message_contents(self, session_id: str, ids: Sequence[str], max_chars: int) -> dict[str, dict[str, Any]]:
        """The stored messages ``ids`` (without their parents), in their order, as many as fit in
        ``max_chars`` of stored size (at least the first): their sizes are read first, so a page of
        large messages reads no more than it returns. Two round trips."""
        if not ids:
            return {}
        k = self._session(session_id)
        pipe = self.store.client.pipeline(transaction=False)
        for mid in ids:
            pipe.hstrlen(k.messages, mid)
        with translated():
            sizes = pipe.execute()
        chosen: list[str] = []
        total = 0
        for mid, size in zip(ids, sizes, strict=True):
            if chosen and total + int(size) > max_chars:
                break
            chosen.append(mid)
            total += int(size)
        with translated():
            blobs = self.store.client.hmget(k.messages, chosen)
        return {mid: layout.with_runs(session_id, self._decode(blob, "session message"))
                for mid, blob in zip(chosen, blobs, strict=True) if blob is not None}

    def basis(self, session_id: str, edited: str = "") -> SendBasis:
        """What adding a message needs, in one round trip and whatever the session's length: its
        hash's fields, its live runs' ids and, for an edit, the edited message (None when there is
        no such message)."""
        k = self._session(session_id)
        pipe = self.store.client.pipeline(transaction=True)
        pipe.hmget(k.hash, *BASIS_FIELDS)
        pipe.hkeys(k.live)
        if edited:
            pipe.hget(k.messages, edited)
            pipe.hget(k.up, edited)
        with translated():
            found, live, *rest = pipe.execute()
        if found[0] is None:
            raise SessionNotFound(f"no session {session_id!r}", session_id=session_id)
        fields = {name: _text(value) for name, value in zip(BASIS_FIELDS, found, strict=True) if value is not None}
        message = None
        if edited and rest[0] is not None:
            message = layout.with_runs(session_id, self._decode(rest[0], "session message"))
            message["parent"] = _text(rest[1] or b"")
        return SendBasis(session_id, fields, [_text(r) for r in live], message)

    def _decode(self, blob: bytes, what: str) -> dict[str, Any]:
        value = codec.decode(blob, what=what)
        if not isinstance(value, dict):
            raise CorruptRecord(f"{what} is not a map")
        return value

    def whose(self, session_id: str) -> tuple[str, str, str] | None:
        """The session's owner, tenant and incarnation (a nonce written when it was opened: an id
        opened again after it expired is another incarnation), or None when there is no such session."""
        with translated():
            owner, tenant, inc = self.store.client.hmget(keys.session(session_id), "owner", "tenant", "inc")
        if owner is None or tenant is None:
            return None
        return _text(owner), _text(tenant), _text(inc) if inc is not None else ""

    def leaf(self, session_id: str, run_id: str) -> str:

        with translated(run_id):
            value = self.store.client.hget(keys.session_live(session_id), run_id)
        return _text(value) if value is not None else ""

    def begin(
        self, session_id: str, run_id: str, fence: int, step: int, leaf: str, now: int
    ) -> list[dict[str, Any]] | None:
        """An attempt's first step, in one round trip: hold the run if its branch is parked (None),
        else the messages from the first to ``leaf`` (``{id, role, content}``), oldest first, for
        the live branch run ``run_id`` (StoreError for any other run)."""
        check = layout.entry_to_blob(JournalEntry("check", "", None), self.store.limits.max_payload_bytes)
        held = self._event({"runId": run_id, "reason": "the branch is parked", "voided": False})
        reply = self.store.call_script(run_id, calls.SessionSettle(
            self._session(session_id), run=keys.run(run_id), journal=keys.journal(run_id, step),
            events=keys.events(run_id), leases=keys.leases(), fence=fence, step=step, run_id=run_id, mode="check",
            field="", entry=check, message_id="", message=b"", now=now, maxlen=self._maxlen(), added=b"", held=held,
            path_to=leaf,
        ))
        if not isinstance(reply, list):
            return None  # held
        out = []
        for i in range(1, len(reply), 2):
            message = self._decode(reply[i + 1], "session message") if reply[i + 1] else {}
            out.append({"id": _text(reply[i]), "role": message.get("role"), "content": message.get("content")})
        return out

    def events(self, session_id: str, after: str, block_ms: int | None, count: int) -> list[StoredEvent]:

        with translated():
            return run_plan(self.store.client, layout.read_session_events(session_id, after, block_ms, count))

    # --- transitions -------------------------------------------------------------------------

    def open(
        self, session_id: str, agent_ref: str, workflow: str, owner: str, tenant: str, ttl_ms: int, now: int
    ) -> None:
        inc = uuid.uuid4().hex[:16]
        event = {"sessionId": session_id, "owner": owner, "tenant": tenant, "workflow": workflow, "incarnation": inc}
        try:
            self.store.call_script(None, calls.SessionOpen(
                self._session(session_id), agent=agent_ref, workflow=workflow, owner=owner, tenant=tenant,
                ttl=ttl_ms, now=now, maxlen=self._maxlen(), event=self._event(event), incarnation=inc,
            ))
        except ValidationError:
            raise SessionError(f"session id {session_id!r} is taken", session_id=session_id) from None

    def send(
        self,
        session_id: str,
        mode: str,
        edited: str,
        parent: str,
        message: Mapping[str, Any],
        run: NewRun,
        live: Sequence[str],
        now: int,
    ) -> list[str]:
        """``session_send.lua``'s reply: ``ok``, ``retry``, ``parked`` + ids, ``busy`` + run id,
        ``no_message``, ``gone``."""
        queues, job = self.store.hand_off(run.run_id)
        body = layout.run_reference(session_id, {key: value for key, value in message.items() if key != "id"})
        added = layout.message_reference(message["id"])
        dispatched = layout.run_reference(
            session_id, {"runId": run.run_id, "leaf": message["id"], "trigger": "user.message"}
        )
        reply = self.store.call_script(run.run_id, calls.SessionSend(
            self._session(session_id), new=self.store.new_run(run), queues=queues,
            live=[calls.Live(run=keys.run(r), events=keys.events(r), snapshots=keys.snapshots(r),
                             summary=keys.summary(r), run_id=r)
                  for r in live],
            mode=mode, edited=edited, parent=parent,
            message_id=message["id"],
            message=codec.encode(body, limit=self.store.limits.max_payload_bytes, what="message"),
            now=now, maxlen=self._maxlen(), added=self._event(added), dispatched=self._event(dispatched),
            run_id=run.run_id, session_id=session_id, job=job,
        ))
        return [_text(x) for x in reply]

    def settle(
        self,
        session_id: str,
        run_id: str,
        fence: int,
        step: int,
        mode: str,
        journal_field: str,
        entry: JournalEntry,
        message: Mapping[str, Any] | None,
        now: int,
    ) -> str:
        r = run_id
        blob = layout.entry_to_blob(entry, self.store.limits.max_payload_bytes)
        if message is not None:
            body = layout.run_reference(
                session_id, {key: value for key, value in message.items() if key != "id"} | {"at": now}
            )
            message_id, message_blob = (
                message["id"],
                codec.encode(body, limit=self.store.limits.max_payload_bytes, what="message"),
            )
            added = self._event(layout.message_reference(message_id))
        else:
            message_id, message_blob, added = "", b"", b""
        held = self._event({"runId": r, "reason": "the branch is parked", "voided": mode == "void"})
        reply = self.store.call_script(r, calls.SessionSettle(
            self._session(session_id), run=keys.run(r), journal=keys.journal(r, step), events=keys.events(r),
            leases=keys.leases(), fence=fence, step=step, run_id=r, mode=mode, field=journal_field, entry=blob,
            message_id=message_id, message=message_blob, now=now, maxlen=self._maxlen(), added=added, held=held,
        ))
        return _text(reply)

    def raise_(self, session_id: str, interrupt_id: str, anchor: str, record: Mapping[str, Any], now: int) -> str:
        event = {
            "interruptId": interrupt_id,
            "anchor": anchor,
            "scope": "session",
            **{key: record[key] for key in ("reason", "payload", "origin", "raisedBy") if key in record},
        }
        reply = self.store.call_script(None, calls.SessionRaise(
            self._session(session_id), interrupt_id=interrupt_id, anchor=anchor,
            record=codec.encode(dict(record), limit=self.store.limits.max_payload_bytes, what="interrupt"),
            event=self._event(event), now=now, maxlen=self._maxlen(),
        ))
        return _text(reply)

    def clear(
        self,
        session_id: str,
        interrupt_id: str,
        record: Mapping[str, Any],
        head: str,
        live: Mapping[str, int],
        run: NewRun,
        trigger: Mapping[str, Any],
        kept: Sequence[tuple[str, Mapping[str, Any]]],
        now: int,
    ) -> list[str]:
        """``session_clear.lua``'s reply: ``resumed`` + run id, ``dispatched`` + run id, ``cleared``,
        ``still_parked`` + ids, ``already_cleared``, ``unknown``, ``retry``, ``gone``.
        ``live``: the live runs with their steps as read; ``kept``: the triggers kept for the head's
        path (seq, trigger), in clearing order."""
        queues, job = self.store.hand_off(run.run_id)
        limit = self.store.limits.max_answer_bytes
        cleared = {"interruptId": interrupt_id, "clearedBy": record.get("clearedBy"), "payload": record.get("answer")}
        dispatched = layout.run_reference(
            session_id, {"runId": run.run_id, "leaf": head, "trigger": "interrupt.resumed"}
        )
        reply = self.store.call_script(None, calls.SessionClear(
            self._session(session_id), new=self.store.new_run(run), queues=queues,
            live=[
                calls.LiveAt(run=keys.run(r), events=keys.events(r), snapshots=keys.snapshots(r),
                             summary=keys.summary(r), journal=keys.journal(r, step), run_id=r, step=step,
                             job=self.store.hand_off(r)[1])
                for r, step in live.items()
            ],
            interrupt_id=interrupt_id,
            record=codec.encode(dict(record), limit=self.store.limits.max_payload_bytes, what="interrupt"),
            now=now, maxlen=self._maxlen(), cleared=self._event(cleared), resumed=self._event(_resumed_event(trigger)),
            head=head, run_id=run.run_id, dispatched=self._event(dispatched),
            entry=layout.entry_to_blob(_trigger_entry(trigger), limit), session_id=session_id,
            kept=[
                calls.Kept(seq=seq, entry=layout.entry_to_blob(_trigger_entry(t), limit),
                           event=self._event(_resumed_event(t)))
                for seq, t in kept
            ],
            job=job,
        ))
        return [_text(x) for x in reply]

    def answer(self, session_id: str, run_id: str, answer: Answer, record: Mapping[str, Any], now: int) -> list[str]:
        """``session_answer.lua``'s reply for the answer to a branch run's interrupt: ``accepted`` +
        request id, step, fence, handed off, ids still parking the head; ``kept``;
        ``already_cleared``; ``not_live``; ``gone``; or resume.lua's refusal."""
        request_id = answer.interrupt.request_id
        cleared = {"interruptId": request_id, "clearedBy": record.get("clearedBy")}
        reply = self.store.call_script(run_id, calls.SessionAnswer(
            self._session(session_id), resume=self.store.resume_call(run_id, answer), request_id=request_id,
            run_id=run_id,
            record=codec.encode(dict(record), limit=self.store.limits.max_payload_bytes, what="interrupt"),
            now=now, maxlen=self._maxlen(), delivered=self._event({**cleared, "delivered": True}),
            kept=self._event({**cleared, "delivered": False}),
        ))
        return [_text(x) for x in reply]

    def switch(
        self, session_id: str, head: str, now: int, deliveries: Sequence[tuple[str, str, Answer | None]]
    ) -> list[str]:
        """``session_switch.lua``'s reply: ``ok`` + (request id, run id, step, fence, handed off) per
        delivery (step '' when it was dropped), ``retry``, ``gone`` or ``no_message``.
        ``deliveries``: each kept answer due on the new head's path, with its answer prepared (None:
        the run can no longer take it)."""
        prepared = []
        for request_id, run_id, answer in deliveries:
            event = {"interruptId": request_id, "runId": run_id}
            prepared.append(calls.Delivery(
                resume=self.store.resume_call(run_id, answer) if answer is not None else None,
                request_id=request_id, run_id=run_id, delivered=self._event(event),
                undelivered=self._event({**event, "reason": "the run no longer waits on it"}),
            ))
        reply = self.store.call_script(None, calls.SessionSwitch(
            self._session(session_id), deliveries=prepared, head=head, now=now, maxlen=self._maxlen(),
            switched=self._event({"head": head}),
        ))
        return [_text(x) for x in reply]
