"""The Redis Store: each transition is one Lua script over the run's keys.

Scripts live beside this module as ``.lua`` files (``_common.lua`` is
prepended to each) and are registered once per client. redis-py errors are
translated into parkway errors by :func:`~parkway.adapters.redis.errors.translated`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any, Literal, Protocol, TypeVar

import redis
import redis.exceptions as rex

from ...runtime import journal, telemetry
from ...runtime.errors import ValidationError
from ...runtime.executor import interrupt_event
from ...runtime.protocol import ID_PATTERN, ResumeOutcome
from ...runtime.store import (
    Advance,
    Answer,
    Attempt,
    Due,
    EventSpec,
    Expiry,
    FanOut,
    FanOutOutcome,
    ForkOutcome,
    IndexEntry,
    InterruptRecord,
    JournalEntry,
    Lookup,
    NewRun,
    Overdue,
    Park,
    Requeue,
    ResumeCommit,
    Spawn,
    Tallies,
)
from .. import codec
from ..limits import Limits
from . import keys, layout
from .connection import connect, run_script
from .connection import text as _text
from .errors import translated
from .listings import InterruptListings
from .records import RunRecords
from .replicas import ReplicaAcks

T = TypeVar("T")
WAIT_BUCKETS_S = (1, 10, 60, 300, 900, 3600, 4 * 3600, 24 * 3600, 7 * 24 * 3600)
"""upper bounds (seconds) of the resume-wait histogram's buckets, which resume.lua fills"""
READ_ONLY_SCRIPTS = frozenset({"lookup"})
"""scripts that write nothing: no replica acknowledgement is waited for after them"""
HOLD_CHUNK = 1000
"""runs whose records one round trip of ``hold_overdue`` keeps"""
_WAIT_BUCKETS_ARG = " ".join(str(b) for b in WAIT_BUCKETS_S)
_SCRIPTS = (
    "create",
    "begin",
    "record",
    "advance",
    "park",
    "first",
    "finish",
    "lookup",
    "resume",
    "recover",
    "redispatch",
    "expire",
    "escalate",
    "release",
    "spawn",
    "fanout",
    "fork",
    "refuse",
    "close_raced",
    "prune",
)


_FOLLOWED_BY = {"first": "park.lua"}
"""scripts made of a prelude and another transition's body: first.lua parks as park.lua does"""


_ANSWERING = ("resume",)
"""scripts that answer interrupts: _resume.lua's functions go before their body"""


NO_HAND_OFF = "function hand_off() return 0 end"
"""``hand_off`` for a store given no ``NextJob``: it enqueues nothing (the caller enqueues)"""


@functools.cache
def _source(name: str, hand_off: str) -> str:
    """The script ``name`` as loaded: the prelude (``_common.lua``, then ``hand_off``: the Lua that
    assigns the function _common.lua declares, ``NextJob.lua``), the shared parts it needs, its body."""
    shared = ["_resume.lua"] if name in _ANSWERING else []
    parts = [*shared, f"{name}.lua", *([_FOLLOWED_BY[name]] if name in _FOLLOWED_BY else [])]
    return "\n".join([_prelude(hand_off), *(shared_lua(part) for part in parts)])


def _prelude(hand_off: str) -> str:
    return "\n".join([shared_lua("_common.lua"), hand_off])


@functools.cache
def shared_lua(name: str) -> str:
    """The text of one of this folder's .lua files: a feature composes its scripts' bodies from the
    shared parts it needs (``_resume.lua``) and its own, and registers them (``RedisStore.add_scripts``,
    which puts the prelude every script starts with before each)."""
    return resources.files(__package__).joinpath(name).read_text()


@dataclass(frozen=True)
class ScriptCall:
    """One call of a transition's script: its name (the .lua file's), the run, KEYS and ARGV."""

    name: str
    run_id: str | None
    keys: list[str]
    args: list[Any]


def _pairs(flat: Sequence[Any]) -> dict[str, Any]:
    return {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}


def _fields(flat: Sequence[Any]) -> dict[bytes, Any]:
    """A hash as a script returns it (``HGETALL``'s flat reply) as ``HGETALL`` reads it."""
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


class NextJob(Protocol):
    """The job that carries a transition on, as the scripts that commit a start or a resume write
    it (``hand_off``, declared in ``_common.lua``): one round trip instead of two, and no window
    between the commit and the enqueue. Its format is RQ's, and so is the Lua that writes it:
    ``parkway.workers.rq_internals`` provides both (``JobHash``)."""

    lua: str
    """the Lua that assigns ``hand_off(keys, args, at, step, fence, last)``, loaded with every script"""

    def keys(self) -> list[str]:
        """``hand_off``'s KEYS: the queue, RQ's set of queues."""

    def args(self, run_id: str) -> list[str | bytes]:
        """``hand_off``'s ARGV for a job of ``run_id`` (the script adds the step and fence)."""


class RedisStore(RunRecords, InterruptListings):
    """Store on a Redis server (or a Redis-compatible one with Lua and streams): the transitions
    here, the reads of a run's records (``RunRecords``) and the interrupt listings
    (``InterruptListings``) in modules of their own, on the connection of ``connection``."""

    def __init__(
        self,
        client: redis.Redis,
        limits: Limits | None = None,
        next_job: NextJob | None = None,
        acks: ReplicaAcks | None = None,
    ) -> None:
        # redis-py types replies as unions of sync and async shapes; they are checked where decoded
        self.client: Any = client
        self.limits = limits or Limits()
        self.acks = acks
        """what each committing script waits for (``WAIT`` in its round trip); None: nothing"""
        self.next_job = next_job
        """how ``create_run`` and ``resume`` enqueue the job they call for; None: they enqueue none"""
        hand_off = next_job.lua if next_job is not None else NO_HAND_OFF
        self._prelude = _prelude(hand_off)
        self._scripts = {name: client.register_script(_source(name, hand_off)) for name in _SCRIPTS}
        self._around: Callable[[ScriptCall, Callable[[], Any]], Any] | None = None
        self._read_only = set(READ_ONLY_SCRIPTS)

    @classmethod
    def from_url(cls, url: str, limits: Limits | None = None, acks: ReplicaAcks | None = None) -> RedisStore:
        return cls(connect(url), limits, acks=acks)

    def add_scripts(self, bodies: Mapping[str, str], read_only: Iterable[str] = ()) -> None:
        """Register a feature's scripts (name -> Lua body, after the prelude every script starts with:
        ``_common.lua`` and this store's ``hand_off``) on this store's client, once: ``call_script``
        then calls them like the store's own (translated errors, replica waits unless ``read_only``,
        ``around_scripts``)."""
        for name, body in bodies.items():
            if name not in self._scripts:
                self._scripts[name] = self.client.register_script("\n".join([self._prelude, body]))
        self._read_only.update(read_only)

    def call_script(self, name: str, run_id: str | None, keys_: list[str], args: list[Any]) -> Any:
        """Call the script ``name`` (the store's or one ``add_scripts`` registered) for ``run_id``."""
        return self._call(name, run_id, keys_, args)

    def hand_off(self, run_id: str) -> tuple[list[str], list[Any]]:
        """The keys and arguments a script's ``hand_off`` takes to enqueue a job of ``run_id`` (see
        ``_common.lua``): none and one empty argument when this store enqueues no jobs."""
        return self._hand_off(run_id)

    def _hand_off(self, run_id: str) -> tuple[list[str], list[Any]]:
        """The keys and arguments a script's ``hand_off`` takes (see ``_common.lua``)."""
        if self.next_job is None:
            return [], [""]
        return self.next_job.keys(), self.next_job.args(run_id)

    def _call(self, name: str, run_id: str | None, keys_: list[str], args: list[Any]) -> Any:
        call = ScriptCall(name, run_id, keys_, args)
        if self._around is not None:
            return self._around(call, lambda: self._run(call))
        return self._run(call)

    def _run(self, call: ScriptCall) -> Any:
        with translated(call.run_id):
            acks = None if call.name in self._read_only else self.acks
            return run_script(self.client, self._scripts[call.name], call.keys, call.args, acks)

    @contextmanager
    def around_scripts(self, around: Callable[[ScriptCall, Callable[[], Any]], Any]) -> Iterator[None]:
        """Inside this block, every transition's script call goes to ``around(call, run)`` instead,
        which returns the reply (``run()`` makes the call). For tools that record or batch the real
        path's calls (bench/populate.py); see ``queue_script``."""
        self._around = around
        try:
            yield
        finally:
            self._around = None

    def queue_script(self, pipeline: Any, call: ScriptCall) -> None:
        """Queue ``call`` on ``pipeline`` (a pipeline of this store's client) instead of making it."""
        self._scripts[call.name](keys=call.keys, args=call.args, client=pipeline)

    def _event(self, data: Mapping[str, Any]) -> bytes:
        return codec.encode(dict(data), what="event")

    def _ending_keys(self, run_id: str, step: int) -> list[str]:
        """The keys of an activation a script ends (advance, spawn): run, journal, state, events, summary."""
        r = run_id
        return [keys.run(r), keys.journal(r, step), keys.workflow_state(r), keys.events(r), keys.summary(r)]

    def _index_keys(self, workflow: str) -> list[str]:
        """The workflow's two indexes of pending interrupts (there is no index across workflows: a
        listing of every workflow merges theirs)."""
        return [keys.index("newest", workflow), keys.index("expiring", workflow)]

    def _filter_keys(self, record: InterruptRecord) -> list[str]:
        """The filter indexes an interrupt is in: one per attribute it has (audience, tenant, session)."""
        values = zip(keys.FILTERS, (record.audience, record.tenant, record.session), strict=True)
        return [keys.filter_index(kind, value) for kind, value in values if value]

    # --- transitions ----------------------------------------------------

    def create_run(self, run: NewRun) -> bool:
        run_keys, run_args = self.new_run(run)
        hand_keys, hand_args = self._hand_off(run.run_id)
        args = [*run_args, codec.authority_arg(run), *hand_args]
        return bool(self._call("create", run.run_id, [*run_keys, *hand_keys], args))

    def new_run(self, run: NewRun) -> tuple[list[str], list[Any]]:
        """``create_run``'s keys (run, summary, events, outbox) and arguments (see ``_common.lua``),
        for the scripts that create a run as part of their transition (a session's send)."""
        blob = codec.encode(run.input, limit=self.limits.max_payload_bytes, what="run input")
        r = run.run_id
        return [keys.run(r), keys.summary(r), keys.events(r), keys.outbox()], [
            run.workflow,
            run.ref,
            run.start_node,
            blob,
            run.ttl_ms,
            run.now,
            self.limits.retention_ms,
            self.limits.max_events,
            self._event(
                {"workflow": run.workflow, "input": run.input}
                | ({"restartedFrom": run.restarted_from} if run.restarted_from else {})
                | ({"tenant": run.tenant} if run.tenant else {})
                | ({"forkedFrom": {"runId": run.forked_from[0], "step": run.forked_from[1]}} if run.forked_from else {})
            ),
            f"{r}:0:0",
        ]

    def _begin_call(
        self, r: str, step: int | None, fence: int, now: int, lease_until: int
    ) -> tuple[list[str], list[Any]]:
        return (
            [
                keys.run(r),
                "" if step is None else keys.journal(r, step),
                keys.workflow_state(r),
                keys.leases(),
                keys.outbox(),
                keys.metrics(),
                keys.events(r),
            ],
            [
                "" if step is None else step,
                fence,
                now,
                lease_until,
                r,
                "" if step is None else f"{r}:{step}:{fence}",
                self.limits.max_events,
            ],
        )

    def begin_command(
        self, run_id: str, step: int | None, fence: int, now: int, lease_until: int
    ) -> tuple[tuple[Any, ...], Callable[[Any], Attempt]]:
        """This job's ``begin`` as a command for the caller to send with its own (in the worker's
        round trip that takes the job, saving one), and the function that turns its reply into
        the Attempt (``begin`` would return), raising what ``begin`` would raise. ``step`` None:
        the job is known by its run and fence alone, which name one activation; the script
        begins the run's step at that fence."""
        keys_, args = self._begin_call(run_id, step, fence, now, lease_until)

        def attempt(reply: Any) -> Attempt:
            if isinstance(reply, rex.NoScriptError):  # a server that lost its scripts: call again
                reply = self._call("begin", run_id, keys_, args)
            elif isinstance(reply, Exception):
                with translated(run_id):
                    raise reply
            return self._attempt(run_id, reply)

        return ("EVALSHA", self._scripts["begin"].sha, len(keys_), *keys_, *args), attempt

    def begin(self, run_id: str, step: int, fence: int, now: int, lease_until: int) -> Attempt:
        reply = self._call("begin", run_id, *self._begin_call(run_id, step, fence, now, lease_until))
        return self._attempt(run_id, reply)

    def _attempt(self, run_id: str, reply: Any) -> Attempt:
        run, journal, ws = reply
        return Attempt(
            layout.run_record(run_id, _fields(run)),
            {k: layout.entry_from_blob(v) for k, v in _pairs(journal).items()},
            {k: codec.decode(v, what="workflow state") for k, v in _pairs(ws).items()},
        )

    def heartbeat(self, run_ids: Sequence[str], lease_until: int) -> None:
        if run_ids:
            with translated():
                self.client.zadd(keys.leases(), dict.fromkeys(run_ids, lease_until), xx=True)

    def record(
        self,
        run_id: str,
        fence: int,
        step: int,
        scope: Literal["journal", "workflow"],
        name: str,
        value: Any,
        event: EventSpec | None,
        now: int,
    ) -> None:
        r = run_id
        if scope == "journal":
            blob, target = layout.entry_to_blob(value, self.limits.max_payload_bytes), keys.journal(r, step)
        else:
            blob = codec.encode(value, limit=self.limits.max_payload_bytes, what="workflow state value")
            target = keys.workflow_state(r)
        kind, data = (event[0], self._event(event[1])) if event else ("", b"")
        self._call(
            "record",
            r,
            [keys.run(r), target, keys.journal(r, step), keys.workflow_state(r), keys.events(r), keys.summary(r)],
            [fence, name, blob, kind, data, self.limits.max_events, self.limits.retention_ms],
        )

    def advance(self, run_id: str, fence: int, step: int, commit: Advance) -> int:
        r = run_id
        data = codec.encode(commit.data, limit=self.limits.max_payload_bytes, what="run data")
        args: list[Any] = [
            fence,
            step,
            data,
            commit.next_node or "",
            codec.encode(commit.output, what="run output"),
            commit.now,
            self.limits.retention_ms,
            self.limits.max_events,
            r,
            len(commit.events),
        ]
        for kind, payload in commit.events:
            args += [kind, self._event(payload)]
        ended = commit.next_node is None
        parent_keys, parent_args = self._parent_tail(r, "completed", commit.output, commit.now) if ended else ([], [""])
        return int(
            self._call(
                "advance",
                r,
                [*self._ending_keys(r, step), keys.leases(), keys.metrics(), keys.snapshots(r), *parent_keys],
                [*args, *parent_args],
            )
        )

    def park(self, run_id: str, fence: int, step: int, commit: Park) -> int:
        r, rec = run_id, commit.interrupt
        entry = codec.entry_of(rec)
        child_keys, child_args = self._racing_child(r, step, commit.child) if commit.child else ([], [])
        return int(
            self._call(
                "first" if commit.child else "park",
                r,
                [
                    keys.run(r),
                    keys.journal(r, step),
                    keys.workflow_state(r),
                    keys.events(r),
                    *self._index_keys(rec.workflow),
                    keys.leases(),
                    keys.summary(r),
                    keys.workflows(),
                    keys.pauses(),
                    *self._filter_keys(rec),
                    *self._ancestor_keys(commit.lineage),
                    keys.snapshots(r),
                    *child_keys,
                ],
                [
                    fence,
                    step,
                    rec.request_id,
                    layout.token_field(rec.token_hash),
                    layout.status_field(rec.request_id, r),
                    commit.ttl_ms,
                    commit.now,
                    rec.expires_at,
                    codec.member(entry, "newest"),
                    codec.member(entry, "expiring"),
                    self._event(layout.short_interrupt_event(rec)),
                    self.limits.max_events,
                    self.limits.expiry_grace_ms,
                    r,
                    self.limits.retention_ms,
                    rec.workflow,
                    keys.PAUSE_FEED_MAXLEN,
                    f"{step} {commit.version}" if commit.version else "",
                    len(self._filter_keys(rec)),
                    self._event(commit.event) if commit.lineage else "",
                    *layout.record_parts(rec),
                    *child_args,
                ],
            )
        )

    def _racing_child(self, run_id: str, step: int, spawn: Spawn) -> tuple[list[str], list[Any]]:
        """``first.lua``'s keys and arguments for the child that races the interrupt (after park's)."""
        child = spawn.child
        run_keys, run_args = self.new_run(child)
        # its run.started names its parent, as spawn's does
        run_args[8] = self._event({"workflow": child.workflow, "input": child.input, "parentRunId": run_id})
        hand_keys, hand_args = self._hand_off(child.run_id)
        args = [
            child.run_id,
            spawn.asked_field,
            layout.entry_to_blob(spawn.asked, self.limits.max_payload_bytes),
            self._event(spawn.event),
            layout.lineage_field(spawn.lineage),
            spawn.journal_field,
            *run_args,
            *hand_args,
        ]
        return [*run_keys, *hand_keys], [*args, len(args), len(hand_keys)]

    def _lifecycle(self, part: Mapping[str, Any]) -> bytes:
        return layout.lifecycle_blob(part, self.limits.max_payload_bytes)

    def _closing(
        self, entry: IndexEntry, record: InterruptRecord | None, status: str, end: Mapping[str, Any], now: int
    ) -> tuple[str, list[Any]]:
        """The closed index and the arguments a script that ends an interrupt writes its lifecycle
        record with: its end's field and blob, the index member, the oldest end time kept, then its
        first part's field and blob ('' when the run's records are gone). The first part is written
        here, at the end, not at park: while the interrupt is open its run's record says the same,
        and a parked run keeps a few hundred bytes less (``telemetry.created``)."""
        created = telemetry.created(record) if record else None
        return keys.closed_index(status, entry.workflow), [
            layout.lifecycle_field("e", entry.request_id, entry.run_id),
            self._lifecycle(end),
            codec.closed_member(now, entry.run_id, entry.request_id),
            codec.time_floor(max(0, now - self.limits.retention_ms)),
            layout.lifecycle_field("i", entry.request_id, entry.run_id),
            self._lifecycle(created) if created is not None else "",
        ]

    def finish(
        self,
        run_id: str,
        fence: int | None,
        status: Literal["failed", "cancelled"],
        error: Mapping[str, Any] | None,
        event: EventSpec,
        now: int,
    ) -> None:
        r = run_id
        parent_keys, parent_args = self._parent_tail(r, status, dict(error) if error else None, now)
        self._call(
            "finish",
            r,
            [
                keys.run(r),
                keys.workflow_state(r),
                keys.events(r),
                keys.summary(r),
                keys.leases(),
                keys.metrics(),
                *parent_keys,
            ],
            [
                "" if fence is None else fence,
                status,
                codec.encode(dict(error), what="run error") if error else "",
                now,
                self.limits.retention_ms,
                self.limits.max_events,
                event[0],
                self._event(event[1]),
                self._event({"status": status}),
                r,
                *self._failed_replay(status, error, now),
                *parent_args,
            ],
        )

    def _failed_replay(self, status: str, error: Mapping[str, Any] | None, now: int) -> list[Any]:
        """``finish.lua``'s lifecycle blobs for a replay after an answer that failed the run: with the
        error's message, and with its type only (for an interrupt whose output is not captured)."""
        if status != "failed" or not error:
            return ["", ""]
        kind, message = str(error.get("type", "")), str(error.get("message", ""))
        return [self._lifecycle(telemetry.failure(now, kind, message, capture))
                for capture in (telemetry.CAPTURE_KINDS, ())]

    def spawn(self, run_id: str, fence: int, step: int, commit: Spawn) -> int:
        r, child = run_id, commit.child
        c = child.run_id
        hand_keys, hand_args = self._hand_off(c)
        return int(
            self._call(
                "spawn",
                r,
                [
                    *self._ending_keys(r, step),
                    keys.leases(),
                    keys.run(c),
                    keys.summary(c),
                    keys.events(c),
                    keys.outbox(),
                    keys.snapshots(r),
                    *hand_keys,
                ],
                [
                    fence,
                    step,
                    child.now,
                    r,
                    c,
                    self._event(commit.event),
                    self.limits.max_events,
                    self.limits.retention_ms,
                    self.limits.expiry_grace_ms,
                    *self._child_fields(r, commit),
                    *hand_args,
                ],
            )
        )

    def _child_fields(self, parent_id: str, spawn: Spawn) -> list[Any]:
        """What ``spawn.lua`` and ``fanout.lua`` take of a child they create, in this order: its
        workflow, ref, start node, input, TTL, run.started event, and the parent's journal field for it
        (with the child's lineage, its answer field and what the parent asked)."""
        child = spawn.child
        return [
            child.workflow,
            child.ref,
            child.start_node,
            codec.encode(child.input, limit=self.limits.max_payload_bytes, what="child workflow input"),
            child.ttl_ms,
            self._event({"workflow": child.workflow, "input": child.input, "parentRunId": parent_id}),
            spawn.journal_field,
            layout.lineage_field(spawn.lineage),
            spawn.asked_field,
            layout.entry_to_blob(spawn.asked, self.limits.max_payload_bytes),
        ]

    def fan_out(self, run_id: str, fence: int, step: int, commit: FanOut) -> FanOutOutcome:
        r = run_id
        hand_keys, parent_job = self._hand_off(r)
        blocks: list[Any] = []
        child_keys: list[str] = []
        for spawn in commit.children:
            child = spawn.child
            c = child.run_id
            _, job = self._hand_off(c)
            child_keys += [keys.run(c), keys.summary(c), keys.events(c)]
            blocks.append([c, *self._child_fields(r, spawn), self._event(spawn.event), *job])
        per_child = len(blocks[0]) if blocks else 0
        reply = self._call(
            "fanout",
            r,
            [
                keys.run(r),
                keys.journal(r, step),
                keys.workflow_state(r),
                keys.events(r),
                keys.summary(r),
                keys.leases(),
                keys.outbox(),
                keys.snapshots(r),
                keys.fanout(r),
                *(hand_keys or ["", ""]),
                *child_keys,
            ],
            [
                fence,
                step,
                commit.now,
                r,
                self.limits.max_events,
                self.limits.retention_ms,
                self.limits.expiry_grace_ms,
                commit.live,
                commit.left,
                len(blocks),
                per_child,
                len(parent_job),
                *parent_job,
                *(arg for block in blocks for arg in block),
            ],
        )
        return FanOutOutcome(_text(reply[0]) == "waiting", int(reply[1]))

    def fork(self, new: NewRun, step: int) -> ForkOutcome:
        """Create ``new``, re-opening activation ``step`` of ``new.forked_from``'s run (``fork.lua``):
        the new run starts at the node that step ran, with ``new.input`` as its data."""
        assert new.forked_from is not None
        old = new.forked_from[0]
        run_keys, run_args = self.new_run(new)
        hand_keys, hand_args = self._hand_off(new.run_id)
        run_args[2] = ""  # the step's node: the script reads it
        reply = self._call(
            "fork",
            old,
            [keys.run(old), keys.summary(old), keys.snapshots(old), *run_keys, *hand_keys],
            [step, *run_args, *hand_args],
        )
        outcome = _text(reply[0])
        if outcome == "forked":
            return ForkOutcome("forked", handed=bool(reply[1]))
        return ForkOutcome(outcome, current_step=int(reply[1]) if len(reply) > 1 else None)  # type: ignore[arg-type]

    def _ancestor_keys(self, lineage: Sequence[tuple[str, int]]) -> list[str]:
        """For ``park.lua``: each ancestor's events, run, journal of its waiting step, workflow state,
        summary, fan-out set (``ANCESTOR_KEYS`` in ``_common.lua``)."""
        out: list[str] = []
        for a, step in lineage:
            out += [keys.events(a), keys.run(a), keys.journal(a, step), keys.workflow_state(a), keys.summary(a),
                    keys.fanout(a)]
        return out

    def _parent_tail(self, run_id: str, status: str, value: Any, now: int) -> tuple[list[str], list[Any]]:
        """The parent's keys and arguments for ``notify_parent`` (``_common.lua``) when ``run_id``
        ends ``status`` with ``value`` (its output, or its error); ``[""]`` for a root run. Where a
        child's outcome goes is written once, when the child is created, so reading it first is safe."""
        if keys.CHILD_SEPARATOR not in run_id:
            return [], [""]
        with translated(run_id):
            found = layout.parent_of(self.client.hmget(keys.run(run_id), *layout.PARENT_FIELDS))
        if found is None:
            return [], [""]
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
        hand_keys, hand_args = self._hand_off(p)
        return (
            [
                keys.run(p),
                keys.journal(p, step),
                keys.workflow_state(p),
                keys.events(p),
                keys.summary(p),
                keys.outbox(),
                keys.fanout(p),
                keys.run(c),
                keys.events(c),
                keys.workflow_state(c),
                keys.snapshots(c),
                keys.journal(c, own),
                *hand_keys,
            ],
            [
                p,
                run_id,
                field,
                layout.entry_to_blob(entry, self.limits.max_payload_bytes),
                "child.completed" if status == "completed" else "child.ended",
                self._event(event),
                now,
                self.limits.max_events,
                self.limits.retention_ms,
                *hand_args,
            ],
        )

    def release(self, run_id: str, fence: int, step: int, event: Mapping[str, Any], now: int) -> int:
        r = run_id
        return int(
            self._call(
                "release",
                r,
                [keys.run(r), keys.events(r), keys.outbox(), keys.leases(), keys.summary(r), keys.metrics()],
                [fence, step, now, self.limits.max_events, self._event(event), r, self.limits.retention_ms],
            )
        )

    def lookup(self, run_id: str, token_hash: str, now: int) -> Lookup:
        r = run_id
        reply = self._call(
            "lookup",
            r,
            [keys.run(r), keys.summary(r)],
            [layout.token_field(token_hash), now, layout.STATUS_PREFIX],
        )
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
        return ResumeCommit(ResumeOutcome.ACCEPTED, int(reply[2]), int(reply[3]), request_id, bool(reply[4]))

    def _resume(self, run_id: str, answer: Answer) -> Any:
        return self._call("resume", run_id, *self.resume_call(run_id, answer))

    def resume_call(self, run_id: str, answer: Answer) -> tuple[list[str], list[Any]]:
        """resume.lua's KEYS and ARGV for ``answer`` (the session scripts that deliver answers run
        the same transition inside their own: ``_resume.lua``)."""
        r, rec = run_id, answer.interrupt
        hand_keys, hand_args = self._hand_off(r) if answer.dispatch else ([], [""])
        entry = codec.entry_of(rec)
        status, event = ("cancelled", "interrupt.cancelled") if answer.cancelled else ("resolved", "interrupt.resumed")
        closed, closing = self._closing(entry, rec, status, answer.lifecycle, answer.now)
        failed = layout.lifecycle_field("x", rec.request_id, r)  # where finish.lua records a failed replay
        answered = "" if answer.cancelled else f"{rec.step} {failed} {int('output' in rec.capture)}"
        return (
            [
                keys.run(r),
                keys.journal(r, rec.step),
                keys.workflow_state(r),
                keys.events(r),
                keys.summary(r),
                keys.outbox(),
                *self._index_keys(rec.workflow),
                keys.metrics(),
                closed,
                *self._filter_keys(rec),
                *hand_keys,
            ],
            [
                layout.token_field(answer.token_hash),
                layout.short_id(answer.request_id, r) if answer.request_id else "",
                rec.journal_field,
                layout.entry_to_blob(answer.entry, self.limits.max_answer_bytes),
                self._event(answer.event),
                answer.now,
                codec.member(entry, "newest"),
                codec.member(entry, "expiring"),
                r,
                self.limits.max_events,
                status,
                event,
                self.limits.retention_ms,
                _WAIT_BUCKETS_ARG,
                layout.STATUS_PREFIX,
                rec.created_at,
                rec.expires_at,
                len(self._filter_keys(rec)),
                *closing,
                answered,
                *hand_args,
            ],
        )

    def recover(self, run_id: str, now: int, max_lost: int, error: Mapping[str, Any]) -> Requeue:
        r = run_id
        parent_keys, parent_args = self._parent_tail(r, "failed", dict(error), now)
        reply = self._call(
            "recover",
            r,
            [keys.run(r), keys.events(r), keys.outbox(), keys.summary(r), keys.leases(), keys.metrics(), *parent_keys],
            [
                r,
                now,
                max_lost,
                self.limits.retention_ms,
                self.limits.max_events,
                self._event({"reason": "worker lost"}),
                codec.encode(dict(error), what="run error"),
                self._event({"error": dict(error)}),
                self._event({"status": "failed"}),
                *parent_args,
            ],
        )
        return _requeue(reply)

    def redispatch(self, run_id: str, step: int, fence: int, now: int) -> Requeue:
        r = run_id
        reply = self._call("redispatch", r, [keys.run(r), keys.outbox()], [r, step, fence, now, f"{r}:{step}:{fence}"])
        return _requeue(reply)

    def expire(self, entry: IndexEntry, now: int) -> Expiry:
        r = entry.run_id
        with translated(r):
            fields = self.client.hgetall(keys.run(r))
        request_id = entry.request_id or layout.waiting(fields)
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
            won = JournalEntry("interrupt", record.hook_name, None, record.request.get("kind", ""), "timer")
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
        closed, closing = self._closing(entry, record, ended, end, now)
        if action == "fail":
            parent_keys, parent_args = self._parent_tail(r, "failed", error, now)
        elif action == "expire":
            parent_keys, parent_args = self._parent_tail(r, "expired", None, now)
        else:
            parent_keys, parent_args = [], [""]
        reply = self._call(
            "expire",
            r,
            [
                keys.run(r),
                keys.events(r),
                keys.summary(r),
                *self._index_keys(entry.workflow),
                keys.journal(r, step),
                keys.workflow_state(r),
                keys.outbox(),
                keys.metrics(),
                closed,
                *(filters := self._filter_keys(record) if record else []),
                *parent_keys,
            ],
            [
                entry.request_id,
                now,
                codec.member(entry, "newest"),
                codec.member(entry, "expiring"),
                self.limits.retention_ms,
                self.limits.max_events,
                self._event({"requestId": entry.request_id, "expiresAt": entry.expires_at, "action": action}),
                self._event({"status": "failed" if action == "fail" else "expired"}),
                action,
                record.journal_field if record else "",
                journal_blob,
                error_blob,
                failed_blob,
                r,
                layout.status_field(entry.request_id, r),
                entry.expires_at,
                len(filters),
                *closing,
                *parent_args,
            ],
        )
        outcome = _text(reply[0])
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
        r, to, step = record.run_id, list(policy["to"]), int(policy.get("step", 0)) + 1
        ttl_ms = int(policy["ttl_ms"])
        rest = {**policy, "to": to[1:], "step": step}
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
            "escalation": step,
            "audience": moved.audience,
            "from": record.audience,
            "newExpiresAt": moved.expires_at,
        }
        event = interrupt_event(moved, telemetry.public_request(record.request)) | {"escalation": step}
        left, joined = self._filter_keys(record), self._filter_keys(moved)
        parts = layout.record_parts(moved)  # rq and its id first: escalate.lua checks the run still holds it
        reply = self._call(
            "escalate",
            r,
            [
                keys.run(r),
                keys.events(r),
                keys.summary(r),
                *self._index_keys(record.workflow),
                keys.journal(r, record.step),
                keys.workflow_state(r),
                keys.pauses(),
                *left,
                *joined,
                *self._ancestor_keys(lineage),
                keys.snapshots(r),
            ],
            [
                record.request_id,
                now,
                codec.member(entry, "newest"),
                codec.member(entry, "expiring"),
                codec.member(new_entry, "newest"),
                codec.member(new_entry, "expiring"),
                layout.status_field(record.request_id, r),
                entry.expires_at,
                moved.expires_at,
                self.limits.max_events,
                self._event(expired),
                self._event(event),
                ttl_ms,
                self.limits.expiry_grace_ms,
                self.limits.retention_ms,
                record.workflow,
                len(left),
                len(joined),
                keys.PAUSE_FEED_MAXLEN,
                r,
                *parts,
            ],
        )
        outcome = _text(reply[0])
        if outcome != "escalated":
            return Expiry(outcome)  # type: ignore[arg-type]
        return Expiry("escalated", "escalate", record.step, int(reply[1]))

    def due(self, now: int, outbox_age_ms: int, limit: int) -> Due:
        """One round trip: the leases and the outbox entries due."""
        with translated():
            pipe = self.client.pipeline(transaction=False)
            pipe.zrangebyscore(keys.leases(), "-inf", now, start=0, num=limit)
            pipe.zrangebyscore(keys.outbox(), "-inf", now - outbox_age_ms, start=0, num=limit)
            leases, outbox = pipe.execute()
        stale = []
        for m in outbox:
            run_id, step, fence = _text(m).rsplit(":", 2)
            stale.append((run_id, int(step), int(fence)))
        return Due([_text(m) for m in leases], stale)

    def _due_members(self, before: int, count: int) -> list[IndexEntry]:
        """The first ``count`` members of each workflow's expiring index that expired before
        ``before`` (they sort first there), merged earliest first. Two round trips."""
        with translated():
            workflows = sorted(_text(n) for n in self.client.smembers(keys.workflows()))
            if not workflows:
                return []
            pipe = self.client.pipeline(transaction=False)
            for wf in workflows:
                pipe.zrangebylex(keys.index("expiring", wf), "-", b"(" + codec.time_floor(before), start=0, num=count)
            found = pipe.execute()
        due = [codec.parse_member(m, "expiring", wf) for wf, ms in zip(workflows, found, strict=True) for m in ms]
        due.sort(key=lambda e: e.expires_at)
        return due

    def claim_due(self, now: int, limit: int, claim_ms: int) -> list[IndexEntry]:
        """Reads as many more members than ``limit`` as there are live claims (those it skips), then
        claims each with ZADD NX: a run another reconciler claimed first is left to it. Lapsed
        claims are dropped first. Four round trips."""
        with translated():
            pipe = self.client.pipeline(transaction=False)
            pipe.zremrangebyscore(keys.expiry_claims(), "-inf", now)
            pipe.zcard(keys.expiry_claims())
            held = int(pipe.execute()[1])
        due = self._due_members(now, limit + held)[: limit + held]
        if not due:
            return []
        with translated():
            pipe = self.client.pipeline(transaction=False)
            for entry in due:
                pipe.zadd(keys.expiry_claims(), {entry.run_id: now + claim_ms}, nx=True)
            won = pipe.execute()
        return [entry for entry, added in zip(due, won, strict=True) if added][:limit]

    def release_claims(self, run_ids: Sequence[str]) -> None:
        if run_ids:
            with translated():
                self.client.zrem(keys.expiry_claims(), *run_ids)

    def hold_overdue(self, now: int, before: int, until: int, limit: int) -> int:
        """Reads each run's step and lineage, then extends (PEXPIREAT GT: never shortens, never
        revives) what its expiry needs: its hash, the journal of its step, its workflow state,
        snapshots and stream, its ancestors' (``_ancestor_keys``, as park keeps them), and the
        summaries to the retention past them. A run that moved on meanwhile keeps its records a little longer, no
        more. Two round trips, then two per ``HOLD_CHUNK`` runs."""
        due = self._due_members(before, limit)[:limit]
        for at in range(0, len(due), HOLD_CHUNK):
            self._hold(due[at : at + HOLD_CHUNK], until)
        return len(due)

    def _hold(self, due: Sequence[IndexEntry], until: int) -> None:
        with translated():
            pipe = self.client.pipeline(transaction=False)
            for entry in due:
                pipe.hmget(keys.run(entry.run_id), *layout.HOLD_FIELDS)
            found = pipe.execute()
            pipe = self.client.pipeline(transaction=False)
            for entry, values in zip(due, found, strict=True):
                held = layout.held_step(values)
                if held is None:  # its records are gone already: nothing to keep
                    continue
                r, (step, ancestors) = entry.run_id, held
                kept = [keys.run(r), keys.journal(r, step), keys.workflow_state(r), keys.snapshots(r),
                        keys.events(r), keys.summary(r), *self._ancestor_keys(ancestors)]
                summaries = {keys.summary(r), *(keys.summary(a) for a, _ in ancestors)}
                for key in kept:
                    pipe.pexpireat(key, until + self.limits.retention_ms if key in summaries else until, gt=True)
            pipe.execute()

    def overdue(self, now: int) -> Overdue:
        """Two round trips: the workflows' names, then each one's count of due members and its first."""
        with translated():
            workflows = sorted(_text(n) for n in self.client.smembers(keys.workflows()))
            if not workflows:
                return Overdue()
            pipe = self.client.pipeline(transaction=False)
            for wf in workflows:
                self._read_overdue(pipe, wf, now)
            replies = pipe.execute()
        return _overdue(replies)

    def _read_overdue(self, pipe: Any, workflow: str, now: int) -> None:
        """Queue on ``pipe`` the two reads ``_overdue`` sums: the workflow's due members and its first."""
        key = keys.index("expiring", workflow)
        pipe.zlexcount(key, "-", b"(" + codec.time_floor(now))
        pipe.zrangebylex(key, "-", b"(" + codec.time_floor(now), start=0, num=1)

    def reclaim_folded(self, now: int, limit: int = 1000) -> int:
        """Touch the streams of the runs parked (by the pause feed) from where the last pass stopped
        up to ``now`` less ``FOLD_WAKE_MS`` and a margin: a park that folded a run's events into its
        hash left its stream to expire then, and Redis drops an expired key when it is read, where
        its own sampling of expiring keys could take minutes in a large keyspace. A live stream (not
        folded, or refilled since) is only read. Parks the feed trimmed before a pass reached them
        are left to Redis. Three round trips (two when the feed holds no new park)."""
        until = now - layout.FOLD_WAKE_MS - keys.RECLAIM_MARGIN_MS
        with translated():
            after = self.client.get(keys.reclaimed())
            start = "(" + _text(after) if after else "-"
            entries = self.client.xrange(keys.pauses(), start, str(max(0, until)), count=limit)
            if not entries:
                return 0
            pipe = self.client.pipeline(transaction=False)
            for _, fields in entries:
                run_id = _text(fields.get(b"r", b""))
                if ID_PATTERN.fullmatch(run_id):
                    pipe.exists(keys.events(run_id))
            pipe.set(keys.reclaimed(), entries[-1][0])
            pipe.execute()
        return len(entries)

    def prune_idle(self, now: int) -> list[str]:
        """Drop what no run holds any more (``prune.lua``): each workflow's closed interrupts past
        the retention; a workflow with none left in any index; the pause feed once no workflow is
        left. The workflows it forgot. Two round trips, one script per workflow."""
        floor = codec.time_floor(max(0, now - self.limits.retention_ms))
        with translated():
            workflows = sorted(_text(n) for n in self.client.smembers(keys.workflows()))
            if not workflows:
                return []
            pipe = self.client.pipeline(transaction=False)
            for wf in workflows:
                closed = [keys.closed_index(status, wf) for status in telemetry.CLOSED_STATUSES]
                call = ScriptCall("prune", None, [keys.workflows(), *self._index_keys(wf), *closed,
                                                  keys.pauses(), keys.reclaimed()], [wf, floor])
                self.queue_script(pipe, call)
            pruned = pipe.execute()
        return [wf for wf, gone in zip(workflows, pruned, strict=True) if gone]

    def try_lock(self, owner: str, ttl_ms: int) -> bool:
        with translated():
            if self.client.set(keys.reconciler_lock(), owner, nx=True, px=ttl_ms):
                return True
            if _text(self.client.get(keys.reconciler_lock()) or b"") == owner:
                self.client.pexpire(keys.reconciler_lock(), ttl_ms)
                return True
            return False

    def ping(self) -> None:
        """Raise StoreUnavailable unless Redis answers (within the bound of ``connect``)."""
        with translated():
            self.client.ping()

    def close_raced(self, run_id: str, now: int) -> bool:
        r = run_id
        with translated(r):
            record = layout.held_record(r, self.client.hgetall(keys.run(r)))
        if record is None:
            return False
        entry = codec.entry_of(record)
        end = telemetry.ended("cancelled", now, record.created_at, record.capture, reason="child",
                              reason_is_content=False)
        closed, closing = self._closing(entry, record, "cancelled", end, now)
        return bool(
            self._call(
                "close_raced",
                r,
                [keys.run(r), keys.summary(r), *self._index_keys(record.workflow), closed, *self._filter_keys(record)],
                [
                    layout.status_field(record.request_id, r),
                    codec.member(entry, "newest"),
                    codec.member(entry, "expiring"),
                    *closing,
                ],
            )
        )

    def refuse(self, run_id: str, token_hash: str, request_id: str, error: Mapping[str, Any], now: int) -> int:
        r, req = run_id, request_id
        return int(
            self._call(
                "refuse",
                r,
                [keys.run(r), keys.summary(r)],
                [
                    layout.token_field(token_hash),
                    now,
                    layout.status_field(req, r),
                    layout.short_id(req, r),
                    layout.lifecycle_field("f", req, r),
                    layout.lifecycle_field("fl", req, r),
                    self._lifecycle(error),
                ],
            )
        )

    def tallies(self, now: int) -> Tallies:
        """Two round trips: the counters, the workflows' names, the leases' and the outbox's sizes and
        the outbox's oldest entry, then per workflow a ZLEXCOUNT on its expiring index from now on
        (O(log N) each; expired members await the reconciler) and the reads of its backlog
        (``overdue``)."""
        with translated():
            pipe = self.client.pipeline(transaction=False)
            pipe.hgetall(keys.metrics())
            pipe.smembers(keys.workflows())
            pipe.zcard(keys.leases())
            pipe.zcard(keys.outbox())
            pipe.zrange(keys.outbox(), 0, 0, withscores=True)
            counters, names, running, outstanding, oldest = pipe.execute()
            workflows = sorted(_text(n) for n in names)
            pipe = self.client.pipeline(transaction=False)
            for wf in workflows:
                pipe.zlexcount(keys.index("expiring", wf), b"[" + codec.time_floor(now + 1), "+")
                self._read_overdue(pipe, wf, now)
            replies = pipe.execute() if workflows else []
        counts = replies[0::3]
        overdue = _overdue([r for i, r in enumerate(replies) if i % 3])
        return Tallies(
            {_text(k): int(v) for k, v in counters.items()},
            WAIT_BUCKETS_S,
            dict(zip(workflows, counts, strict=True)),
            running=int(running),
            outstanding=int(outstanding),
            oldest_outstanding_at=int(oldest[0][1]) if oldest else None,
            overdue=overdue.count,
            overdue_ms=overdue.age_ms(now),
        )


def _overdue(replies: Sequence[Any]) -> Overdue:
    """The backlog from ``_read_overdue``'s replies, two per workflow."""
    count, oldest = 0, None
    for i in range(0, len(replies), 2):
        count += int(replies[i])
        if replies[i + 1]:
            first = codec.parse_member(replies[i + 1][0], "expiring", "").expires_at
            oldest = first if oldest is None else min(oldest, first)
    return Overdue(count, oldest)


MAX_MOVES = 5
"""how many escalations one resume follows before it gives up (each one is a reconciler's pass)"""


def _requeue(reply: Sequence[Any]) -> Requeue:
    outcome = _text(reply[0])
    if len(reply) == 1:
        return Requeue(outcome)  # type: ignore[arg-type]
    return Requeue(outcome, int(reply[1]), int(reply[2]))  # type: ignore[arg-type]
