"""The transitions: each method builds its script's typed call (:mod:`.calls`) from the runtime's
commit (keys from ``keys``, fields and blobs from ``layout``) and makes it (``_script``), one Lua
script, one round trip; then reads the reply. Part of ``RedisStore``, which sends the calls."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from ...._lazy import LazyModule
from ....runtime import features, journal, telemetry
from ....runtime.errors import ValidationError
from ....runtime.executor import interrupt_event
from ....runtime.protocol import ResumeOutcome
from ....runtime.store import (
    Advance,
    Answer,
    Attempt,
    EventSpec,
    Expiry,
    FanOut,
    FanOutOutcome,
    ForkOutcome,
    IndexEntry,
    InterruptRecord,
    JournalEntry,
    LazyState,
    Lookup,
    NewRun,
    Park,
    Requeue,
    ResumeCommit,
    Spawn,
)
from ... import codec
from ...limits import Limits
from .. import keys, layout
from ..connection.connection import function_missing
from ..connection.connection import text as _text
from ..connection.errors import translated
from ..formats import FormatGate
from ..scripts.scripts import Args

if TYPE_CHECKING:
    from ..scripts import calls
else:  # the calls' classes load with the first transition (see parkway._lazy)
    calls = LazyModule("parkway.adapters.redis.scripts.calls")


BEGUN_FORMAT = 3
"""the stored format of a queue element that carries the attempt its resume began (``begin_at_resume``)"""


class Transitions:
    """The run's transitions (``RedisStore``'s), one script each."""

    client: Any
    limits: Limits
    acks: Any
    next_job: Any
    begin_lease_ms: int | None
    """the lease a resume takes for the attempt it begins (format 3); None: it begins none"""
    _scripts: dict[str, Any]
    _script: Callable[[str | None, Args], Any]
    """make ``params``'s script call for a run (``RedisStore._script``)"""
    formats: FormatGate
    """the stored format this process creates records in (``formats.FormatGate``)"""
    _hand_off: Callable[[str], tuple[list[str], list[Any]]]
    """``hand_off``'s keys and arguments for a job of a run (``RedisStore._hand_off``)"""

    def _trimmed(self) -> bool:
        """Whether an interrupt's record is written trimmed (format 4: ``layout.interrupt_to_blob``); a
        reader of formats 1-3 reads it too, and is refused the run anyway when it is of format 4."""
        return self.formats.writes() >= layout.TRIMMED_FORMAT

    def _event(self, data: Mapping[str, Any]) -> bytes:
        return codec.encode(dict(data), what="event")

    def _filter_keys(self, record: InterruptRecord) -> list[str]:
        """The filter indexes an interrupt is in: one per attribute it has (audience, tenant, session)."""
        values = zip(keys.FILTERS, (record.audience, record.tenant, record.session), strict=True)
        return [keys.filter_index(kind, value) for kind, value in values if value]

    def create_run(self, run: NewRun) -> bool:
        queues, job = self._hand_off(run.run_id)
        return bool(self._script(run.run_id, calls.Create(self._new_run(run), queues, codec.authority_arg(run), job)))

    def new_run(self, run: NewRun) -> calls.NewRun:
        """``create_run``'s ``new_run`` block (see ``_common.lua``), for the session scripts that
        create a run as part of their transition (a session's send)."""
        return self._new_run(run)

    def _new_run(self, run: NewRun, started: Mapping[str, Any] | None = None) -> calls.NewRun:
        """The ``new_run`` block creating ``run`` (``started``: its run.started event, if not the usual)."""
        r = run.run_id
        if started is None:
            started = (
                {"workflow": run.workflow, "input": run.input}
                | ({"restartedFrom": run.restarted_from} if run.restarted_from else {})
                | ({"tenant": run.tenant} if run.tenant else {})
                | ({"forkedFrom": {"runId": run.forked_from[0], "step": run.forked_from[1]}} if run.forked_from else {})
            )
        return calls.NewRun(
            run=keys.run(r), summary=keys.summary(r), events=keys.events(r), outbox=keys.outbox(),
            runs=keys.runs(), run_id=r, workflow=run.workflow, ref=run.ref,
            node=run.start_node,
            input=codec.encode(run.input, limit=self.limits.max_payload_bytes, what="run input"),
            ttl=run.ttl_ms, now=run.now, retention=self.limits.retention_ms, maxlen=self.limits.max_events,
            started=self._event(started), member=keys.outbox_member(r, 0, 0), format=self.formats.writes(),
            trace=features.tracer().started(run.workflow, r) or "",
        )

    def _begin_call(
        self, r: str, step: int | None, fence: int, now: int, lease_until: int, taking: bool = False
    ) -> calls.Begin:
        return calls.Begin(
            run=keys.run(r), journal="" if step is None else keys.journal(r, step), leases=keys.leases(),
            outbox=keys.outbox(), metrics=keys.metrics(), events=keys.events(r),
            step="" if step is None else step, fence=fence, now=now, lease_until=lease_until, run_id=r,
            member="" if step is None else keys.outbox_member(r, step, fence), maxlen=self.limits.max_events,
            taking="1" if taking else "",
        )

    def begin_command(
        self, run_id: str, step: int | None, fence: int, now: int, lease_until: int, *, taking: bool = False
    ) -> tuple[tuple[Any, ...], Callable[[Any], Attempt]]:
        """This job's ``begin`` as a command for the caller to send with its own (in the worker's
        round trip that takes the job, saving one), and the function that turns its reply into
        the Attempt (``begin`` would return), raising what ``begin`` would raise. ``step`` None:
        the job is known by its run and fence alone, which name one activation; the script
        begins the run's step at that fence. ``taking``: the job is the queue element of an
        attempt its resume began (format 3: ``begun_attempt``), begun the old way: it may take
        over the lease that resume took (begin.lua)."""
        params = self._begin_call(run_id, step, fence, now, lease_until, taking)
        keys_, args = params.keys(), params.args()

        def attempt(reply: Any) -> Attempt:
            if function_missing(reply):  # a server without the function (restarted): call again, loading it
                reply = self._script(run_id, params)
            elif isinstance(reply, Exception):
                with translated(run_id):
                    raise reply
            return self._attempt(run_id, reply)

        return ("FCALL", self._scripts["begin"].name, len(keys_), *keys_, *args), attempt

    def begun_attempt(self, run_id: str, reply: bytes) -> Attempt:
        """The attempt a resume began (format 3: ``begin_at_resume`` in _resume.lua), from the begin's
        reply its queue element carries (layout.py's "Formats": ``<n> `` then length-prefixed strings,
        the run's n field/value items, then its journal's), as ``begin`` would return it."""
        head, _, rest = reply.partition(b" ")
        items: list[bytes] = []
        at, end = 0, len(rest)
        while at < end:
            colon = rest.index(b":", at)
            size = int(rest[at:colon])
            items.append(rest[colon + 1 : colon + 1 + size])
            at = colon + 1 + size
        n = int(head)
        return self._attempt(run_id, [items[:n], items[n:]])

    def begun_confirmed(self, run_id: str) -> list[tuple[Any, ...]]:
        """What a worker sends (riding its job's first round trip) once it runs an attempt its resume
        began: the run hash's mark of it (``rb``) dropped, so that a lapse of its lease from then on is
        a lost attempt like any other (recover.lua). Sent blind: should the fence have moved on to
        another begun attempt meanwhile, that one's lapse is counted, never the other way round."""
        return [("HDEL", keys.run(run_id), layout.BEGUN_FIELD)]

    def begin(self, run_id: str, step: int, fence: int, now: int, lease_until: int) -> Attempt:
        reply = self._script(run_id, self._begin_call(run_id, step, fence, now, lease_until))
        return self._attempt(run_id, reply)

    def _attempt(self, run_id: str, reply: Any) -> Attempt:
        run, journal = reply
        return Attempt(
            layout.run_record(run_id, _fields(run)),
            {k: layout.entry_from_blob(v) for k, v in _pairs(journal).items()},
            LazyState(lambda: self._workflow_state(run_id)),
        )

    def _workflow_state(self, run_id: str) -> dict[str, Any]:
        with translated(run_id):
            ws = self.client.hgetall(keys.workflow_state(run_id))
        return {_text(k): codec.decode(v, what="workflow state") for k, v in ws.items()}

    def write_entry(
        self,
        run_id: str,
        fence: int,
        step: int,
        scope: Literal["journal", "workflow"],
        name: str,
        value: Any,
        event: EventSpec | None,
        now: int,
        *,
        retried: str | None = None,
        again: bool = False,
    ) -> None:
        r = run_id
        if scope == "journal":
            blob, target = layout.entry_to_blob(value, self.limits.max_payload_bytes), keys.journal(r, step)
        else:
            blob = codec.encode(value, limit=self.limits.max_payload_bytes, what="workflow state value")
            target = keys.workflow_state(r)
        kind, data = (event[0], self._event(event[1])) if event else ("", b"")
        self._script(r, calls.WriteEntry(
            run=keys.run(r), target=target, journal=keys.journal(r, step), state=keys.workflow_state(r),
            events=keys.events(r), summary=keys.summary(r), metrics=keys.metrics(), fence=fence, field=name, blob=blob,
            event_type=kind, event=data, maxlen=self.limits.max_events, retention=self.limits.retention_ms,
            again=int(again), counts=layout.retry_counts(retried) if retried is not None else [],
        ))

    def advance(self, run_id: str, fence: int, step: int, commit: Advance) -> int:
        r = run_id
        ended = commit.next_node is None
        return int(self._script(r, calls.Advance(
            run=keys.run(r), journal=keys.journal(r, step) if commit.journal_written else "",
            state=keys.workflow_state(r), events=keys.events(r),
            summary=keys.summary(r), leases=keys.leases(), metrics=keys.metrics(), snapshots=keys.snapshots(r),
            parent=self._parent(r, "completed", commit.output, commit.now) if ended else None,
            fence=fence, step=step,
            data=codec.encode(commit.data, limit=self.limits.max_payload_bytes, what="run data"),
            next_node=commit.next_node or "", output=codec.encode(commit.output, what="run output"),
            now=commit.now, retention=self.limits.retention_ms, maxlen=self.limits.max_events, run_id=r,
            emitted=[x for kind, payload in commit.events for x in (kind, self._event(payload))],
            counts=layout.advance_counts(commit.workflow, commit.duration_ms, ended),
        )))

    def park(self, run_id: str, fence: int, step: int, commit: Park) -> int:
        parked = self._park(run_id, fence, step, commit)
        if commit.child is None:
            return int(self._script(run_id, parked))
        return int(self._script(run_id, self._racing_child(run_id, commit.child, parked)))

    def _park(self, run_id: str, fence: int, step: int, commit: Park) -> calls.Park:
        r, rec = run_id, commit.interrupt
        if (trace := features.tracer().current()) is not None:  # untraced: the record as it is, no copy
            rec = replace(rec, trace=trace)
        entry = codec.entry_of(rec)
        return calls.Park(
            run=keys.run(r), journal=keys.journal(r, step), state=keys.workflow_state(r), events=keys.events(r),
            newest=keys.index("newest", rec.workflow), expiring=keys.index("expiring", rec.workflow),
            leases=keys.leases(), summary=keys.summary(r), workflows=keys.workflows(), pauses=keys.pauses(),
            snapshots=keys.snapshots(r), notice=_notice(), filters=self._filter_keys(rec),
            ancestors=self._ancestors(commit.lineage),
            fence=fence, step=step, request_id=rec.request_id, short_id=layout.short_id(rec.request_id, r),
            token_field=layout.token_field(rec.token_hash), status_field=layout.status_field(rec.request_id, r),
            ttl=commit.ttl_ms, now=commit.now, expires=rec.expires_at,
            member_newest=codec.member(entry, "newest"), member_expiring=codec.member(entry, "expiring"),
            buckets=self._buckets(), event=self._event(layout.short_interrupt_event(rec)),
            maxlen=self.limits.max_events, grace=self.limits.expiry_grace_ms, run_id=r,
            retention=self.limits.retention_ms, workflow=rec.workflow,
            pauses_maxlen=keys.PAUSE_FEED_MAXLEN, paused=f"{step} {commit.version}" if commit.version else "",
            ancestor_event=self._event(commit.event) if commit.lineage else "",
            gate=commit.lineage[-1][1] if commit.lineage else "", record=layout.record_parts(rec, self._trimmed()),
        )

    def _buckets(self) -> str:
        """park's and escalate's ``buckets``: '1' once every live process reads format 4 (index members
        in buckets of listpack size: ``ix_add`` in _common.lua), else '' (the single zsets)."""
        return "1" if self.formats.writes() >= layout.BUCKETS_FORMAT else ""

    def _racing_child(self, run_id: str, spawn: Spawn, parked: calls.Park) -> calls.First:
        """``first.lua``'s call: the child that races the interrupt, then the park it carries."""
        child = spawn.child
        queues, job = self._hand_off(child.run_id)
        # its run.started names its parent, as spawn's does
        started = {"workflow": child.workflow, "input": child.input, "parentRunId": run_id}
        return calls.First(
            park=parked, child=self._new_run(child, started), queues=queues, child_id=child.run_id,
            check_field=spawn.asked_field,
            check_entry=layout.entry_to_blob(spawn.asked, self.limits.max_payload_bytes),
            started=self._event(spawn.event), lineage=layout.lineage_field(spawn.lineage),
            field=spawn.journal_field, job=job,
        )

    def _lifecycle(self, part: Mapping[str, Any]) -> bytes:
        return layout.lifecycle_blob(part, self.limits.max_payload_bytes)

    def _closing(
        self, entry: IndexEntry, record: InterruptRecord | None, status: str, end: Mapping[str, Any], now: int
    ) -> calls.Closing:
        """How a script that ends an interrupt writes its lifecycle record (a ``closing`` block): the
        closed index, its end's field and blob, the index member, then its first part's field and
        blob ('' when the run's records are gone). The first part is written here, at the end, not
        at park: while the interrupt is open its run's record says the same, and a parked run keeps
        a few hundred bytes less (``telemetry.created``)."""
        created = telemetry.created(record) if record else None
        return calls.Closing(
            index=keys.closed_index(status, entry.workflow),
            end_field=layout.lifecycle_field("e", entry.request_id, entry.run_id),
            ended=self._lifecycle(end),
            member=codec.closed_member(now, entry.run_id, entry.request_id),
            created_field=layout.lifecycle_field("i", entry.request_id, entry.run_id),
            created=self._lifecycle(created) if created is not None else "",
        )

    def finish(
        self,
        run_id: str,
        fence: int | None,
        status: Literal["failed", "cancelled"],
        error: Mapping[str, Any] | None,
        event: EventSpec,
        now: int,
        below: Sequence[tuple[str, str]] = (),
    ) -> None:
        r = run_id
        failed_replay, failed_type = self._failed_replay(status, error, now)
        self._script(r, calls.Finish(
            run=keys.run(r), state=keys.workflow_state(r), events=keys.events(r), summary=keys.summary(r),
            leases=keys.leases(), metrics=keys.metrics(), fanout=keys.fanout(r),
            parent=self._parent(r, status, dict(error) if error else None, now),
            below=[calls.Below(run=keys.run(c), state=keys.workflow_state(c), events=keys.events(c),
                               summary=keys.summary(c), fanout=keys.fanout(c), run_id=c, parent=p) for c, p in below],
            fence="" if fence is None else fence, status=status,
            error=codec.encode(dict(error), what="run error") if error else "", now=now,
            retention=self.limits.retention_ms, maxlen=self.limits.max_events, event_type=event[0],
            event=self._event(event[1]), done=self._event({"status": status}), run_id=r,
            failed_replay=failed_replay, failed_type=failed_type,
        ))

    def _failed_replay(self, status: str, error: Mapping[str, Any] | None, now: int) -> tuple[Any, Any]:
        """``finish.lua``'s lifecycle blobs for a replay after an answer that failed the run: with the
        error's message, and with its type only (for an interrupt whose output is not captured)."""
        if status != "failed" or not error:
            return "", ""
        kind, message = str(error.get("type", "")), str(error.get("message", ""))
        with_message, type_only = (self._lifecycle(telemetry.failure(now, kind, message, capture))
                                   for capture in (telemetry.CAPTURE_KINDS, ()))
        return with_message, type_only

    def spawn(self, run_id: str, fence: int, step: int, commit: Spawn) -> int:
        r = run_id
        queues, _ = self._hand_off(commit.child.run_id)
        return int(self._script(r, calls.Spawn(
            run=keys.run(r), journal=keys.journal(r, step), state=keys.workflow_state(r), events=keys.events(r),
            summary=keys.summary(r), leases=keys.leases(), outbox=keys.outbox(), runs=keys.runs(),
            snapshots=keys.snapshots(r),
            child=self._child(r, commit), queues=queues, fence=fence, step=step, now=commit.child.now, run_id=r,
            maxlen=self.limits.max_events, retention=self.limits.retention_ms, grace=self.limits.expiry_grace_ms,
        )))

    def _child(self, parent_id: str, spawn: Spawn) -> calls.Child:
        """The ``child`` block that ``spawn.lua`` and ``fanout.lua`` create a child run from: its keys,
        fields, run.started event, the parent's journal field for it (with the child's lineage, its
        answer field and what the parent asked), the parent's child.started, its first job."""
        child = spawn.child
        c = child.run_id
        return calls.Child(
            run=keys.run(c), summary=keys.summary(c), events=keys.events(c), run_id=c,
            workflow=child.workflow, ref=child.ref, node=child.start_node,
            input=codec.encode(child.input, limit=self.limits.max_payload_bytes, what="child workflow input"),
            ttl=child.ttl_ms,
            started=self._event({"workflow": child.workflow, "input": child.input, "parentRunId": parent_id}),
            field=spawn.journal_field, lineage=layout.lineage_field(spawn.lineage),
            check_field=spawn.asked_field,
            check_entry=layout.entry_to_blob(spawn.asked, self.limits.max_payload_bytes),
            parent_event=self._event(spawn.event), trace=features.tracer().started(child.workflow, c) or "",
            format=self.formats.writes(),
            job=self._hand_off(c)[1],
        )

    def fan_out(self, run_id: str, fence: int, step: int, commit: FanOut) -> FanOutOutcome:
        r = run_id
        queues, job = self._hand_off(r)
        reply = self._script(r, calls.FanOut(
            run=keys.run(r), journal=keys.journal(r, step), state=keys.workflow_state(r), events=keys.events(r),
            summary=keys.summary(r), leases=keys.leases(), outbox=keys.outbox(), runs=keys.runs(),
            snapshots=keys.snapshots(r),
            fanout=keys.fanout(r), queues=queues, children=[self._child(r, spawn) for spawn in commit.children],
            fence=fence, step=step, now=commit.now, run_id=r, maxlen=self.limits.max_events,
            retention=self.limits.retention_ms, grace=self.limits.expiry_grace_ms, live=commit.live,
            left=commit.left, job=job,
        ))
        return FanOutOutcome(_text(reply[0]) == "waiting", int(reply[1]))

    def fork(self, new: NewRun, step: int) -> ForkOutcome:
        """Create ``new``, re-opening activation ``step`` of ``new.forked_from``'s run (``fork.lua``):
        the new run starts at the node that step ran, with ``new.input`` as its data."""
        assert new.forked_from is not None
        old = new.forked_from[0]
        queues, job = self._hand_off(new.run_id)
        created = replace(self._new_run(new), node="")  # the step's node: the script reads it
        reply = self._script(old, calls.Fork(
            old_run=keys.run(old), old_summary=keys.summary(old), old_snapshots=keys.snapshots(old),
            new=created, queues=queues, step=step, job=job,
        ))
        outcome = _text(reply[0])
        if outcome == "forked":
            return ForkOutcome("forked", handed=bool(reply[1]))
        return ForkOutcome(outcome, current_step=int(reply[1]) if len(reply) > 1 else None)  # type: ignore[arg-type]

    def _ancestors(self, lineage: Sequence[tuple[str, int]]) -> list[calls.Ancestor]:
        """For ``park.lua`` and ``escalate.lua``: each ancestor's keys (an ``ancestor`` block)."""
        return [
            calls.Ancestor(events=keys.events(a), run=keys.run(a), journal=keys.journal(a, step),
                           state=keys.workflow_state(a), summary=keys.summary(a), fanout=keys.fanout(a))
            for a, step in lineage
        ]

    def _parent(self, run_id: str, status: str, value: Any, now: int) -> calls.Parent | None:
        """Where ``run_id``'s end goes (a ``parent`` block, for ``notify_parent`` in ``_common.lua``)
        when it ends ``status`` with ``value`` (its output, or its error); None for a root run. Where
        a child's outcome goes is written once, when the child is created, so reading it first is safe."""
        if keys.CHILD_SEPARATOR not in run_id:
            return None
        with translated(run_id):
            found = layout.parent_of(self.client.hmget(keys.run(run_id), *layout.PARENT_FIELDS))
        if found is None:
            return None
        p, step, field, own = found
        c = run_id
        name = journal.child_name(field)
        if status == "completed":
            entry = JournalEntry("workflow", name, value)
        else:
            entry = JournalEntry("workflow", name, {"childRunId": run_id, "error": value}, "", status)
        event: dict[str, Any] = {"childRunId": run_id, "id": name, "status": status}
        if isinstance(value, dict) and status != "completed":
            event["error"] = value.get("message")
        queues, job = self._hand_off(p)
        return calls.Parent(
            run=keys.run(p), journal=keys.journal(p, step), state=keys.workflow_state(p), events=keys.events(p),
            summary=keys.summary(p), outbox=keys.outbox(), fanout=keys.fanout(p), child_run=keys.run(c),
            child_events=keys.events(c), child_state=keys.workflow_state(c), child_snapshots=keys.snapshots(c),
            child_journal=keys.journal(c, own), queues=queues, run_id=p, child_id=run_id, field=field,
            entry=layout.entry_to_blob(entry, self.limits.max_payload_bytes),
            event_type="child.completed" if status == "completed" else "child.ended", event=self._event(event),
            now=now, maxlen=self.limits.max_events, retention=self.limits.retention_ms, job=job,
        )

    def release(self, run_id: str, fence: int, step: int, event: Mapping[str, Any], now: int) -> int:
        r = run_id
        return int(self._script(r, calls.Release(
            run=keys.run(r), events=keys.events(r), outbox=keys.outbox(), leases=keys.leases(),
            summary=keys.summary(r), metrics=keys.metrics(), fence=fence, step=step, now=now,
            maxlen=self.limits.max_events, event=self._event(event), run_id=r, retention=self.limits.retention_ms,
        )))

    def lookup(self, run_id: str, token_hash: str, now: int) -> Lookup:
        r = run_id
        reply = self._script(r, calls.Lookup(
            run=keys.run(r), summary=keys.summary(r), token_field=layout.token_field(token_hash), now=now,
            status_prefix=layout.STATUS_PREFIX,
        ))
        status, record = layout.looked_up(r, token_hash, reply)
        return Lookup(status, record)  # type: ignore[arg-type]

    def resume(self, run_id: str, answer: Answer) -> ResumeCommit:
        for _ in range(MAX_MOVES):
            reply = self._resume(run_id, answer)
            if _text(reply[0]) != "moved":
                break
            # escalated since it was read: answer the escalated one (the same question, moved)
            found = self.lookup(run_id, answer.token_hash, answer.now)
            if found.interrupt is None or found.interrupt.request_id != answer.interrupt.request_id:
                break
            answer = replace(answer, interrupt=found.interrupt)
        outcome = _text(reply[0])
        request_id = layout.full_id(_text(reply[1]), run_id) if len(reply) > 1 else None
        if outcome == "moved":
            outcome = "already_resolved"  # moved on again and again: taken as answered elsewhere
        if outcome == "mismatch":
            raise ValidationError(
                f"requestId {answer.request_id!r} does not match the token's interrupt", request_id=request_id
            )
        if outcome != "accepted":
            return ResumeCommit(ResumeOutcome(outcome), request_id=request_id)
        features.tracer().waited(answer.interrupt, answer.now, "cancelled" if answer.cancelled else "resumed",
                                answer.responder)
        return ResumeCommit(ResumeOutcome.ACCEPTED, int(reply[2]), int(reply[3]), request_id, bool(reply[4]))

    def _resume(self, run_id: str, answer: Answer) -> Any:
        return self._script(run_id, self._resume_params(run_id, answer, self._begin_until(answer)))

    def _begin_until(self, answer: Answer) -> int | str:
        """The lease's end for an attempt the resume begins itself (format 3: ``begin_at_resume`` in
        _resume.lua), by this process's clock; '' for none: a store that enqueues no job or knows no
        lease, a deployment with a process that reads no format 3, or one whose commits wait for
        replicas (the worker would run the node before the begin is acknowledged)."""
        if self.begin_lease_ms is None or not answer.dispatch or self.acks is not None or self.next_job is None:
            return ""
        if self.formats.known() < BEGUN_FORMAT:  # no round trip of its own: a first resume begins none
            return ""
        return answer.now + self.begin_lease_ms

    def resume_call(self, run_id: str, answer: Answer) -> calls.Resume:
        """resume.lua's arguments for ``answer``, for the session scripts that deliver answers
        (they run the same transition inside their own: a ``resume`` block in their headers; their
        resumes begin no attempt: the queue's next worker begins it, as before format 3)."""
        return self._resume_params(run_id, answer, "")

    def _resume_params(self, run_id: str, answer: Answer, begin_until: int | str) -> calls.Resume:
        r, rec = run_id, answer.interrupt
        queues, job = self._hand_off(r) if answer.dispatch else ([], [""])
        blob = layout.entry_to_blob(answer.entry, self.limits.max_answer_bytes)
        entry = codec.entry_of(rec)
        status, event = ("cancelled", "interrupt.cancelled") if answer.cancelled else ("resolved", "interrupt.resumed")
        failed = layout.lifecycle_field("x", rec.request_id, r)  # where finish.lua records a failed replay
        return calls.Resume(
            run=keys.run(r), journal=keys.journal(r, rec.step), state=keys.workflow_state(r), events=keys.events(r),
            summary=keys.summary(r), snapshots=keys.snapshots(r), outbox=keys.outbox(),
            newest=keys.index("newest", rec.workflow),
            expiring=keys.index("expiring", rec.workflow), metrics=keys.metrics(), leases=keys.leases(),
            closing=self._closing(entry, rec, status, answer.lifecycle, answer.now), notice=_notice(),
            filters=self._filter_keys(rec),
            queues=queues, token_field=layout.token_field(answer.token_hash),
            request_id=layout.short_id(answer.request_id, r) if answer.request_id else "", field=rec.journal_field,
            entry=blob, digest=layout.answer_digest(blob, answer.responder), event=self._event(answer.event),
            now=answer.now, member_newest=codec.member(entry, "newest"),
            member_expiring=codec.member(entry, "expiring"),
            run_id=r, maxlen=self.limits.max_events, status=status, event_type=event,
            retention=self.limits.retention_ms, buckets=_WAIT_BUCKETS_ARG, status_prefix=layout.STATUS_PREFIX,
            read_status=layout.status_field(rec.request_id, r),
            created=rec.created_at, expires=rec.expires_at,
            answered="" if answer.cancelled else f"{rec.step} {failed} {int('output' in rec.capture)}",
            begin_until=begin_until, job=job,
        )

    def recover(self, run_id: str, now: int, max_lost: int, error: Mapping[str, Any]) -> Requeue:
        r = run_id
        reply = self._script(r, calls.Recover(
            run=keys.run(r), events=keys.events(r), outbox=keys.outbox(), summary=keys.summary(r),
            leases=keys.leases(), metrics=keys.metrics(), parent=self._parent(r, "failed", dict(error), now),
            run_id=r, now=now, max_lost=max_lost, retention=self.limits.retention_ms, maxlen=self.limits.max_events,
            recovered=self._event({"reason": "worker lost"}), error=codec.encode(dict(error), what="run error"),
            failed_event=self._event({"error": dict(error)}), done=self._event({"status": "failed"}),
        ))
        return _requeue(reply)

    def redispatch(self, run_id: str, step: int, fence: int, now: int) -> Requeue:
        r = run_id
        reply = self._script(r, calls.Redispatch(
            run=keys.run(r), outbox=keys.outbox(), run_id=r, step=step, fence=fence, now=now,
            member=keys.outbox_member(r, step, fence),
        ))
        return _requeue(reply)

    def expire(self, entry: IndexEntry, now: int) -> Expiry:
        r = entry.run_id
        with translated(r):
            fields = self.client.hgetall(keys.run(r))
        request_id = entry.request_id or layout.waiting(fields, r)
        record = layout.interrupt_in(r, request_id, fields) if request_id else None
        entry = replace(entry, request_id=request_id)
        policy = (record.on_expire if record else None) or {"action": "expire"}
        action = str(policy.get("action", "expire"))
        if action == "escalate" and record is not None:
            return self._escalate(record, policy, entry, now, layout.run_lineage(fields))
        journal_blob, error_blob, failed_blob = b"", b"", b""
        if action == "answer":
            journal_blob = layout.entry_to_blob(JournalEntry(*policy["entry"]), self.limits.max_answer_bytes)
        elif action == "cancel" and record is not None:
            journal_blob = layout.entry_to_blob(record.cancellation("expired"), self.limits.max_answer_bytes)
        elif action == "timer" and record is not None:  # use_first: the timer came first
            won = JournalEntry("interrupt", record.hook_name, None, record.request_kind, "timer")
            journal_blob = layout.entry_to_blob(won, self.limits.max_answer_bytes)
        elif action == "fail":
            error = {
                "message": f"interrupt {entry.request_id} expired unanswered",
                "type": "parkway.InterruptExpired",
                "traceback": "",
                "node": record.node if record else None,
            }
            error_blob, failed_blob = codec.encode(error, what="run error"), self._event({"error": error})
        step = record.step if record else 0
        ended = "cancelled" if action == "timer" else "expired"
        reason = {"timer": "timer", "expire": None}.get(action, action)
        end = telemetry.ended(ended, now, record.created_at if record else entry.created_at,
                              record.capture if record else (), reason=reason, reason_is_content=False)
        if action == "fail":
            parent = self._parent(r, "failed", error, now)
        elif action == "expire":
            parent = self._parent(r, "expired", None, now)
        else:
            parent = None
        reply = self._script(r, calls.Expire(
            run=keys.run(r), events=keys.events(r), summary=keys.summary(r),
            newest=keys.index("newest", entry.workflow), expiring=keys.index("expiring", entry.workflow),
            journal=keys.journal(r, step), state=keys.workflow_state(r), outbox=keys.outbox(), metrics=keys.metrics(),
            closing=self._closing(entry, record, ended, end, now), notice=_notice(),
            filters=self._filter_keys(record) if record else [], parent=parent, request_id=entry.request_id,
            now=now, member_newest=codec.member(entry, "newest"), member_expiring=codec.member(entry, "expiring"),
            retention=self.limits.retention_ms, maxlen=self.limits.max_events,
            expired_event=self._event({"requestId": entry.request_id, "expiresAt": entry.expires_at, "action": action}),
            done=self._event({"status": "failed" if action == "fail" else "expired"}), action=action,
            field=record.journal_field if record else "", entry=journal_blob, error=error_blob,
            failed_event=failed_blob, run_id=r, status_field=layout.status_field(entry.request_id, r),
            expires=entry.expires_at,
        ))
        outcome = _text(reply[0])
        if outcome == "expired" and record is not None:
            features.tracer().waited(record, now, ended, None)
        if outcome != "expired" or len(reply) < 4:
            return Expiry(outcome, _text(reply[1]) if len(reply) > 1 else "")  # type: ignore[arg-type]
        return Expiry("expired", _text(reply[1]), int(reply[2]), int(reply[3]))

    def _escalate(
        self,
        record: InterruptRecord,
        policy: Mapping[str, Any],
        entry: IndexEntry,
        now: int,
        lineage: Sequence[tuple[str, int]],
    ) -> Expiry:
        """Ask ``record``'s question again of the policy's next audience (escalate.lua); a child
        run's ``lineage`` gets the new interrupt event too, as at its park."""
        # how many escalations this one makes (records written before the rename call it "step")
        escalation = int(policy.get("escalation", policy.get("step", 0))) + 1
        r, to = record.run_id, list(policy["to"])
        ttl_ms = int(policy["ttl_ms"])
        rest = {k: v for k, v in policy.items() if k != "step"} | {"to": to[1:], "escalation": escalation}
        moved = replace(
            record,
            expires_at=now + ttl_ms,
            audience=to[0],
            on_expire=rest if to[1:] else policy.get("then"),  # the last escalation: then its `then`
        )
        new_entry = codec.entry_of(moved)
        expired = {
            "requestId": record.request_id,
            "expiresAt": record.expires_at,
            "action": "escalate",
            "escalation": escalation,
            "audience": moved.audience,
            "from": record.audience,
            "newExpiresAt": moved.expires_at,
        }
        event = interrupt_event(moved, telemetry.public_request(record.request)) | {"escalation": escalation}
        reply = self._script(r, calls.Escalate(
            run=keys.run(r), events=keys.events(r), summary=keys.summary(r),
            newest=keys.index("newest", record.workflow), expiring=keys.index("expiring", record.workflow),
            journal=keys.journal(r, record.step), state=keys.workflow_state(r), pauses=keys.pauses(),
            snapshots=keys.snapshots(r), notice=_notice(), left=self._filter_keys(record),
            joined=self._filter_keys(moved),
            ancestors=self._ancestors(lineage), request_id=record.request_id,
            short_id=layout.short_id(record.request_id, r), now=now,
            member_newest=codec.member(entry, "newest"), member_expiring=codec.member(entry, "expiring"),
            new_member_newest=codec.member(new_entry, "newest"),
            new_member_expiring=codec.member(new_entry, "expiring"), buckets=self._buckets(),
            status_field=layout.status_field(record.request_id, r), expires=entry.expires_at,
            new_expires=moved.expires_at, maxlen=self.limits.max_events, expired_event=self._event(expired),
            event=self._event(event), ttl=ttl_ms, grace=self.limits.expiry_grace_ms,
            retention=self.limits.retention_ms, workflow=record.workflow, pauses_maxlen=keys.PAUSE_FEED_MAXLEN,
            run_id=r, record=layout.record_parts(moved, self._trimmed()),
        ))
        outcome = _text(reply[0])
        if outcome != "escalated":
            return Expiry(outcome)  # type: ignore[arg-type]
        return Expiry("escalated", "escalate", record.step, int(reply[1]))

    def close_raced(self, run_id: str, now: int) -> bool:
        r = run_id
        with translated(r):
            record = layout.latest_record(r, self.client.hgetall(keys.run(r)))
        if record is None:
            return False
        entry = codec.entry_of(record)
        end = telemetry.ended("cancelled", now, record.created_at, record.capture, reason="child",
                              reason_is_content=False)
        return bool(self._script(r, calls.CloseRaced(
            run=keys.run(r), summary=keys.summary(r), newest=keys.index("newest", record.workflow),
            expiring=keys.index("expiring", record.workflow),
            closing=self._closing(entry, record, "cancelled", end, now), filters=self._filter_keys(record),
            status_field=layout.status_field(record.request_id, r), member_newest=codec.member(entry, "newest"),
            member_expiring=codec.member(entry, "expiring"),
        )))

    def refuse(self, run_id: str, token_hash: str, request_id: str, error: Mapping[str, Any], now: int) -> int:
        r, req = run_id, request_id
        return int(self._script(r, calls.Refuse(
            run=keys.run(r), summary=keys.summary(r), token_field=layout.token_field(token_hash), now=now,
            status_field=layout.status_field(req, r), request_id=layout.short_id(req, r),
            count_field=layout.lifecycle_field("f", req, r), last_field=layout.lifecycle_field("fl", req, r),
            refusal=self._lifecycle(error),
        )))


@functools.cache
def _notice() -> calls.Notice:
    """The ``notice`` block every call that raises or ends an interrupt carries (see ``_common.lua``)."""
    return calls.Notice(on=keys.notify_on(), stream=keys.notices())


_WAIT_BUCKETS_ARG = " ".join(str(b) for b in layout.WAIT_BUCKETS_S)


def _pairs(flat: Sequence[Any]) -> dict[str, Any]:
    return {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}


def _fields(flat: Sequence[Any]) -> dict[bytes, Any]:
    """A hash as a script returns it (``HGETALL``'s flat reply) as ``HGETALL`` reads it."""
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


MAX_MOVES = 5
"""how many escalations one resume follows before it gives up (each one is a reconciler's pass)"""


def _requeue(reply: Sequence[Any]) -> Requeue:
    outcome = _text(reply[0])
    if len(reply) == 1:
        return Requeue(outcome)  # type: ignore[arg-type]
    return Requeue(outcome, int(reply[1]), int(reply[2]))  # type: ignore[arg-type]
