"""The Store contract: one method per atomic transition of a run.

The runtime knows a store only through this Protocol. Every method that
changes a run is one atomic step in the store (one Lua script on Redis, the
in-process one of embedded mode included): it checks the run's *fence* first and raises
:class:`~parkway.runtime.errors.StaleFence` without changing anything when
the caller's fence is not the run's current one. Every write applies the
run's TTL in the same step.

Records crossing this boundary are frozen dataclasses of plain values; the
stores encode them with msgpack.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from . import journal
from .protocol import InterruptRequest, ResumeOutcome, RunStatus

EventSpec = tuple[str, Mapping[str, Any]]
"""An event to append: ``(type, data)``; the store adds id, run id and timestamp."""

Ancestor = tuple[str, int]
"""An ancestor of a child run: its run id, and the step of the activation that waits on the child."""


@dataclass(frozen=True)
class NewRun:
    run_id: str
    workflow: str
    ref: str
    start_node: str
    input: Any
    ttl_ms: int
    now: int
    restarted_from: str | None = None
    """the run whose expired interrupt this one was started in place of (``resume_or_start``)"""
    tenant: str | None = None
    """the tenant a root run belongs to (``start(tenant=)``): its interrupts are listed under it"""
    forked_from: tuple[str, int] | None = None
    """the run and step this one re-opens (``fork``)"""
    owner: str | None = None
    """the user whose run it is (a user's key started it), None for a tenant's (or the deployment's)"""
    origin: str = "system"
    """the rank of the caller that started it: ``system``, ``machine`` or ``frontend`` (a user)"""


@dataclass(frozen=True)
class ForkOutcome:
    """What ``Store.fork`` did: ``forked``, or why not (see ``fork.lua``)."""

    outcome: Literal["forked", "unknown", "expired", "child", "range", "lost", "exists"]
    handed: bool = False
    """the new run's first job was enqueued with it"""
    current_step: int | None = None
    """for ``range``: the old run's step (the last that can be forked)"""


@dataclass(frozen=True)
class RunRecord:
    """A run as stored (or, after its TTL, as its summary remembers it)."""

    run_id: str
    workflow: str
    status: RunStatus
    ref: str = ""
    node: str | None = None
    step: int = 0
    fence: int = 0
    input: Any = None
    data: dict[str, Any] = field(default_factory=dict)
    output: Any = None
    error: dict[str, Any] | None = None
    created_at: int = 0
    updated_at: int = 0
    ttl_ms: int = 0
    expires_at: int | None = None
    waiting_on: str | None = None
    """request id of the open interrupt while the run is waiting, or ``child:<run id>`` while it
    waits on a child run"""
    lineage: tuple[Ancestor, ...] = ()
    """a child run's ancestors, its parent first and the root last; () for a root run"""
    paused_version: str | None = None
    """the workflow's version when the current activation last paused (None if it did not)"""
    tenant: str | None = None
    """the tenant given at ``start`` (None for none)"""
    racing: str | None = None
    """the child run racing the interrupt the run waits on (``use_first(child=...)``), while that
    interrupt is pending"""
    owner: str | None = None
    """the user whose run it is (``NewRun.owner``; a branch run's: its session's owner)"""
    origin: str | None = None
    """the rank of the caller that started it (None: a run written before parkway kept it)"""
    session: str | None = None
    """the session whose branch run it is, or whose branch run's child (written at creation)"""
    leaf: str | None = None
    """a session's branch run's message: the one it was dispatched for, where the path it reads
    ends (written at creation by the session's script; None for every other run)"""
    trace: str | None = None
    """the trace context (W3C ``traceparent``) its spans descend from, written at its creation
    (``runtime.tracing``); None: not traced"""
    paused_trace: str | None = None
    """the trace context of the span that made the current activation's last pause, if traced: the
    span its replay after the answer is linked to"""


@dataclass(frozen=True)
class JournalEntry:
    """One thing a hook recorded in an activation: kind, name and value."""

    kind: str
    name: str
    value: Any
    detail: str = ""
    """what the hook asked for (e.g. the request kind), compared on replay"""
    status: str = ""
    """"" for a recorded value; "cancelled" for an interrupt cancelled instead of answered"""


@dataclass(frozen=True)
class Attempt:
    """Everything one node attempt needs, read in the same step that marks the run running (the
    workflow state when a node first asks for it)."""

    run: RunRecord
    journal: dict[str, JournalEntry]
    workflow_state: MutableMapping[str, Any]


class LazyState(MutableMapping[str, Any]):
    """A run's workflow state for one job, read by ``load`` when a node first asks for it: most runs
    keep none, so beginning a node reads nothing of it. Only the run's one attempt writes it (the
    job's own writes land here too), so a later read sees what a read at the begin would have."""

    def __init__(self, load: Callable[[], dict[str, Any]]) -> None:
        self._load: Callable[[], dict[str, Any]] | None = load
        self._values: dict[str, Any] = {}

    def _read(self) -> dict[str, Any]:
        if self._load is not None:
            self._values, self._load = self._load(), None
        return self._values

    def __getitem__(self, key: str) -> Any:
        return self._read()[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._read()[key] = value

    def __delitem__(self, key: str) -> None:
        del self._read()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())


@dataclass(frozen=True)
class Advance:
    """A node completed: merge its data and go to ``next_node``, or finish with ``output``."""

    data: dict[str, Any]
    next_node: str | None
    output: Any
    events: Sequence[EventSpec]
    now: int
    workflow: str = ""
    """the run's workflow (what the counters count it under)"""
    duration_ms: float | None = None
    """how long the node's attempt ran (the node-duration histogram)"""
    journal_written: bool = True
    """whether the step's journal may hold entries (its attempt read or wrote some); False: it holds
    none, so the store has nothing of it to delete"""


InterruptStatus = Literal["pending", "resolved", "cancelled", "expired"]


@dataclass(frozen=True)
class Lifecycle:
    """An interrupt's lifecycle record, as its run's summary keeps it (``parkway.runtime.telemetry``)."""

    status: InterruptStatus
    presentation: str
    option_count: int
    created_at: int
    capture: tuple[str, ...]
    schema_id: str | None = None
    schema_version: int | None = None
    outcome: str | None = None
    """resumed | resume_failed | cancelled | expired; None while it is open"""
    ended_at: int | None = None
    wait_ms: int | None = None
    responder: str | None = None
    reason: str | None = None
    answer: Any = None
    """the answer, if captured (``output``)"""
    request: dict[str, Any] | None = None
    """the request as clients saw it, if captured (``input``)"""
    failures: int = 0
    """answers refused while it was open"""
    last_failure: str | None = None
    last_failure_at: int | None = None


@dataclass(frozen=True)
class InterruptRecord:
    """An interrupt as stored (the token only as its hash)."""

    request_id: str
    run_id: str
    workflow: str
    node: str
    step: int
    journal_field: str
    request: InterruptRequest | None
    """what the node asked, as validated when it paused (its stored form's reader builds it: the one place
    a stored request is checked); None for an ended interrupt whose lifecycle record did not capture it"""
    created_at: int
    expires_at: int
    token_hash: str
    on_expire: dict[str, Any] | None = None
    """what the reconciler does at expiry (see ``hooks.use_interrupt``): None ends the run expired;
    ``{"action": "fail"}``, ``{"action": "cancel"}``, ``{"action": "answer", "entry": <journal entry>}``,
    ``{"action": "timer"}`` (``use_first``) or ``{"action": "escalate", "to": [audience, ...], "ttl_ms": N,
    "escalation": how many made so far, "then": <one of these, or None>}`` (the next escalation's audience first)"""
    root_run_id: str | None = None
    """for an interrupt of a child run: the root of its tree"""
    parent_run_id: str | None = None
    """for an interrupt of a child run: the run waiting on it"""
    version: str | None = None
    """the workflow's version when it paused (``Workflow.version_of``)"""
    audience: str | None = None
    """who is asked (``use_interrupt(audience=)``, e.g. ``team:ops``); an escalation changes it"""
    tenant: str | None = None
    """its run's tenant (``start(tenant=)``)"""
    capture: tuple[str, ...] = ("input", "output")
    """what its lifecycle record may hold (``parkway.runtime.telemetry``)"""
    lifecycle: Lifecycle | None = None
    """its lifecycle record, when read with it (``get_interrupt``, listings)"""
    ref: str = ""
    """its run's workflow reference (``module:attribute``), when read from the run's records ('' else)"""
    trace: str | None = None
    """the trace context of the span that paused (``runtime.tracing``), None if not traced: its wait's
    span descends from it"""

    @property
    def session(self) -> str | None:
        """The session of a session branch run's interrupt (``request.meta.session``), else None."""
        value = self.request.meta.get("session") if self.request is not None else None
        return value if isinstance(value, str) else None

    @property
    def request_kind(self) -> str:
        """Its request's kind, what its journal entry records as ``detail`` ("" if it kept no request)."""
        return self.request.kind if self.request is not None else ""

    @property
    def hook_name(self) -> str:
        """The ``id=`` the node gave ``use_interrupt`` ("" for one matched by call order)."""
        return journal.interrupt_name(self.journal_field)

    def cancellation(self, reason: str | None) -> JournalEntry:
        """What a cancel records where the answer would go: the replayed ``use_interrupt`` raises."""
        return JournalEntry("interrupt", self.hook_name, reason, self.request_kind, "cancelled")


@dataclass(frozen=True)
class Expiry:
    """What the reconciler did with an interrupt past its TTL, and the job to enqueue if the run goes on."""

    outcome: Literal["expired", "escalated", "pending", "gone"]
    action: str = ""
    step: int = 0
    fence: int = 0


@dataclass(frozen=True)
class Park:
    """A node paused: store the interrupt, index it, and publish its event, atomically."""

    interrupt: InterruptRecord
    ttl_ms: int
    event: Mapping[str, Any]
    now: int
    lineage: tuple[Ancestor, ...] = ()
    """a child run's ancestors: the interrupt event goes to their streams too, and their records
    are kept at least as long as the interrupt's"""
    version: str | None = None
    """the code's version, kept on the run (with the step) for the replay to compare"""
    child: Spawn | None = None
    """``use_first``'s child contender: created in the same step, racing the interrupt"""


@dataclass(frozen=True)
class Spawn:
    """A node called ``use_workflow``: park the parent on the child and create the child, atomically.

    The child's records remember where its outcome goes (the parent, its step and journal field),
    and the script that ends the child records it there and queues the parent, in one step."""

    child: NewRun
    journal_field: str
    lineage: tuple[Ancestor, ...]
    """the child's ancestors, its parent first and the root last"""
    event: Mapping[str, Any]
    """the parent's ``child.started`` event"""
    asked: JournalEntry = JournalEntry("child", "", "")
    """what the parent asked for (``c:<id>`` in its journal: the child's workflow and a hash of its
    input), which a replay of ``use_workflow`` must ask for again"""

    @property
    def asked_field(self) -> str:
        """The parent's journal field recording ``asked`` (``c:<id>``)."""
        return journal.child_asked(journal.child_name(self.journal_field))


@dataclass(frozen=True)
class FanOut:
    """A node called ``use_workflows``: start the next children of its fan-out and park the run on
    them, atomically (or queue it again at once when children it counted as running ended since)."""

    children: tuple[Spawn, ...]
    """the children to start now (none when every slot is taken)"""
    live: int
    """the children the attempt counted as started and not ended (from the journal it read)"""
    left: int
    """the children left to start after these"""
    now: int


@dataclass(frozen=True)
class FanOutOutcome:
    waiting: bool
    """parked on its children (False: queued again for a replay, some having ended meanwhile)"""
    fence: int



@dataclass(frozen=True)
class Answer:
    """An accepted answer, recorded in the journal of the interrupt's activation."""

    interrupt: InterruptRecord
    """the record ``lookup`` returned, which the answer was validated against"""
    token_hash: str
    request_id: str | None
    """when given, must name the interrupt the token belongs to"""
    entry: JournalEntry
    event: Mapping[str, Any]
    now: int
    dispatch: bool = True
    """False: no job replays the node (the caller ends the run next: cancelling a waiting run)"""
    lifecycle: Mapping[str, Any] = field(default_factory=dict)
    """how the interrupt ended, for its lifecycle record (``telemetry.ended``)"""

    @property
    def cancelled(self) -> bool:
        return self.entry.status == "cancelled"

    @property
    def responder(self) -> str | None:
        """who gave it, as its lifecycle record names them (``telemetry.ended``'s ``r``)"""
        responder = self.lifecycle.get("r")
        return responder if isinstance(responder, str) else None


@dataclass(frozen=True)
class Lookup:
    """What the store knows of a token: the interrupt, its status, or why there is none."""

    outcome: Literal["pending", "resolved", "cancelled", "expired", "unknown"]
    interrupt: InterruptRecord | None = None


@dataclass(frozen=True)
class ResumeCommit:
    outcome: ResumeOutcome
    step: int = 0
    fence: int = 0
    request_id: str | None = None
    handed_off: bool = False
    """the job for (step, fence) was enqueued in the same atomic step (else the caller enqueues it)"""


@dataclass(frozen=True)
class Requeue:
    """What recover/redispatch did: requeued under (step, fence), failed the run, or found nothing to do."""

    outcome: Literal["requeued", "failed", "alive", "gone"]
    step: int = 0
    fence: int = 0


@dataclass(frozen=True)
class Due:
    """What the reconciler should look at now."""

    expired_leases: list[str]
    """run ids whose worker stopped renewing their lease"""
    stale_outbox: list[tuple[str, int, int]]
    """(run id, step, fence) dispatched a while ago and not begun"""


@dataclass(frozen=True)
class Overdue:
    """The interrupts past their expiry whose expiry is not recorded yet (the reconcilers' backlog)."""

    count: int = 0
    oldest: int | None = None
    """the earliest expiry among them (ms), None when there are none"""

    def age_ms(self, now: int) -> int:
        """How long the oldest has waited past its expiry at ``now`` (0 when none has)."""
        return 0 if self.oldest is None else max(0, now - self.oldest)


@dataclass(frozen=True)
class IndexEntry:
    """One pending interrupt as the listing indexes know it (see adapters.codec for its members)."""

    created_at: int
    expires_at: int
    workflow: str
    run_id: str
    request_id: str = ""
    """"" when read from an index (its members name the run, which waits on one interrupt at a time)"""


@dataclass(frozen=True)
class StoredEvent:
    id: str
    type: str
    ts: int
    data: dict[str, Any]


@dataclass(frozen=True)
class InterruptQuery:
    workflow: str | None = None
    run_id: str | None = None
    order: Literal["newest", "expiring"] = "newest"
    limit: int = 50
    cursor: str | None = None
    now: int = 0
    watch: bool = False
    """also read the pause feed's position, before the listing (for a listing that will wait)"""
    wait_after: str | None = None
    """first wait up to ``wait_ms`` for a pause after this position of the pause feed (any pause:
    the listing filters), then list, in one round trip; implies ``watch``"""
    wait_ms: int = 0
    audience: str | None = None
    tenant: str | None = None
    session: str | None = None
    """with any of these three: read from that attribute's index (audience first, then session,
    then tenant) and keep only the interrupts matching the others (newest order only)"""
    created_after: int | None = None
    """only interrupts created at or after this time (epoch ms)"""
    created_before: int | None = None
    """only interrupts created before this time (epoch ms)"""
    status: InterruptStatus = "pending"
    """pending: the open interrupts (the indexes above); else those that ended so, newest end first,
    within the retention (``order`` is then ``newest``; none of the filters above)"""
    scan: int = 2000
    """the most index members a filtered listing reads in one call: past it the page ends short,
    its cursor at the last member read"""

    @property
    def filtered(self) -> bool:
        """Whether the listing reads a filter index (audience, session or tenant) instead of the workflows'."""
        return self.audience is not None or self.tenant is not None or self.session is not None


@dataclass(frozen=True)
class RunIndexQuery:
    """A page of the store-wide run index, newest first, each filter read from the run's records
    (the run hash while it lasts, else its summary) before paging."""

    limit: int = 50
    cursor: str | None = None
    """the store's position (the client seals and unseals it)"""
    now: int = 0
    status: str | None = None
    """a ``RunStatus`` value"""
    workflow: str | None = None
    workflow_prefix: str | None = None
    tenant: str | None = None
    owner: str | None = None
    """only runs this user owns (a user caller's listing)"""
    created_after: int | None = None
    """created at or after (epoch ms)"""
    created_before: int | None = None
    """created before (epoch ms)"""
    scan: int = 5000
    """the most index members one call reads: past it the page ends short, with a cursor"""


@dataclass(frozen=True)
class RunIndexPage:
    items: list[RunRecord]
    next_cursor: str | None
    missing: tuple[int, ...] = ()
    """shards that did not answer in time (``InterruptListing.missing``)"""


@dataclass(frozen=True)
class InterruptListing:
    items: list[InterruptRecord]
    next_cursor: str | None
    feed: str | None = None
    """with ``watch``: the pause feed's position read before the listing; a pause the listing
    missed comes after it"""
    read: int = 0
    """how many index members the listing read (what a caller's read budget counts)"""
    missing: tuple[int, ...] = ()
    """shards (their places in ``PARKWAY_SHARDS``) that did not answer in time: the listing holds
    what the others hold"""


@dataclass(frozen=True)
class Tallies:
    """What ``/metrics`` reads: the counters the transitions keep (``counters``, by the field names of
    ``keys.metrics``' table), the resume-wait buckets' upper bounds in seconds, and each workflow's
    unexpired pending interrupts."""

    counters: dict[str, int]
    wait_buckets: tuple[int, ...]
    pending: dict[str, int]
    running: int = 0
    """activations executing now: runs holding a live or lapsed lease the reconciler has not taken back"""
    outstanding: int = 0
    """jobs enqueued (or to enqueue) and not yet begun (the outbox)"""
    oldest_outstanding_at: int | None = None
    """when the oldest of those was enqueued (epoch ms)"""
    overdue: int = 0
    """the interrupts past their expiry awaiting a reconciler, across workflows"""
    overdue_ms: int = 0
    """how long the oldest of them has waited past its expiry (0: none)"""
    node_buckets: tuple[float, ...] = ()
    """the node-duration histogram's upper bounds in seconds"""
    notices: int = 0
    """notifications written and not yet delivered or dead-lettered"""
    notices_dead: int = 0
    """notifications given up on (dead letters)"""


class RunReads(Protocol):
    """A run's record and one of its interrupts, read back: what the executor and the client both read."""

    def get_run(self, run_id: str, now: int) -> RunRecord | None:
        """The run, or what its summary remembers after the TTL, or None."""

    def get_interrupt(self, run_id: str, request_id: str) -> InterruptRecord | None:
        """An interrupt record by its public request id."""


class StepStore(RunReads, Protocol):
    """What the executor needs (``runtime/executor.py``, ``runtime/journal.py``): an attempt begun,
    each step's entries written, and the run advanced, parked, spawned, fanned out or finished."""

    def begin(self, run_id: str, step: int, fence: int, now: int, lease_until: int) -> Attempt:
        """Mark the run running under a lease, drop its outbox entry, return the activation's journal."""

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
        """Write one journal entry (``scope="journal"``) or workflow state value, maybe with an event;
        ``retried``: the entry records a failed attempt of a node of that workflow that is retried
        (counted as a retry and a failure); ``again``: a repeat of a journal write whose outcome was
        unknown (``StoreUnavailable``): when its field is already there the first one landed, and its
        event and counts are not added twice."""

    def advance(self, run_id: str, fence: int, step: int, commit: Advance) -> int:
        """Commit a completed node; return the new fence."""

    def park(self, run_id: str, fence: int, step: int, commit: Park) -> int:
        """Commit a pause; return the new fence. A child run's interrupt event is also appended to
        the streams of its ancestors (``Park.lineage``), whose records then live at least as long as
        the interrupt's."""

    def spawn(self, run_id: str, fence: int, step: int, commit: Spawn) -> int:
        """Park the run on a new child run (waiting ``child:<child run id>``, lease released) and
        create the child with its first job; return the parent's new fence. When a child ends
        (completed, failed, cancelled, expired), the same atomic step records its outcome in the
        parent's journal and queues the parent."""

    def fan_out(self, run_id: str, fence: int, step: int, commit: FanOut) -> FanOutOutcome:
        """Start ``commit.children`` (each with its first job, in the run's fan-out set) and park the
        run waiting on its children (``waiting`` = ``children``, lease released); a child's end
        records its outcome in the run's journal, leaves the set and queues the run when none is
        left running or some are left to start. When fewer than ``commit.live`` children were left
        running, the run is queued for a replay at once instead."""

    def runs_below(self, run_id: str) -> list[tuple[str, str]]:
        """The runs below a run that may still run, whatever its status, each with the run it is
        below, parents first: the children of its fan-out started and not yet ended
        (``use_workflows``), the child it waits on (``use_workflow``), the child that raced its
        interrupt (``use_first``: it runs on after an answer wins, until the run's replay cancels
        it), and the same of each of those, down its tree."""

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
        """End a queued or running run (at ``fence``, or whatever is current when None), and in the
        same step each run of ``below`` (``runs_below``, read after ``fence``) whose parent ends and
        that is queued, running or waiting on runs below it: none of them begins or commits a node
        after this returns. Refused (``StaleFence``) when a run that would end has started a child
        ``below`` does not name."""

    def release(self, run_id: str, fence: int, step: int, event: Mapping[str, Any], now: int) -> int:
        """Give a running activation back unrun: queued at a new fence (returned), an outbox entry
        for the reconciler to enqueue it again, the lease released, a ``node.deferred`` event."""

    def read_activation(self, run_id: str, step: int) -> tuple[dict[str, JournalEntry], dict[str, Any]]:
        """The journal of activation ``step`` and the run's workflow state, read only (``replay``)."""

    def close_raced(self, run_id: str, now: int) -> bool:
        """After a child won the ``use_first`` race of the run's latest interrupt (which its end
        recorded cancelled): take the interrupt out of its indexes and end its lifecycle record
        (cancelled, reason ``child``), once; False when there was nothing to do."""


class ClientStore(RunReads, Protocol):
    """What the client needs (``client/``, the HTTP API): runs created and forked, answers looked up
    and committed, runs, interrupts and events read and listed, the tallies counted."""

    def create_run(self, run: NewRun) -> bool:
        """Write a queued run with its summary, first events and outbox entry; the run id must be new.
        Returns whether the run's first job was enqueued in the same atomic step (a store may enqueue
        the job that carries a transition on; when it does not, the caller enqueues it)."""

    def fork(self, new: NewRun, step: int) -> ForkOutcome:
        """Create ``new`` re-opening activation ``step`` of the run ``new.forked_from`` names, at
        the node that step ran; refused (nothing written) for an unknown, expired or child run,
        a step past the run's, or a new run id that is taken."""

    def fork_point(self, run_id: str, step: int) -> Any:
        """The data activation ``step`` of ``run_id`` started with, or None if there is none."""

    def lookup(self, run_id: str, token_hash: str, now: int) -> Lookup:
        """Read the interrupt a token hash names, without changing anything."""

    def resume(self, run_id: str, answer: Answer) -> ResumeCommit:
        """Answer the interrupt if still pending before its expiry at ``answer.now`` (exactly once),
        record the answer (or cancellation), bump the fence, write the outbox
        (and, if the store can and ``answer.dispatch``, enqueue the job for the new fence: ``handed_off``)."""

    def list_runs(self, query: RunIndexQuery) -> RunIndexPage:
        """A page of runs from the store-wide run index, newest first (see :class:`RunIndexQuery`)."""

    def authorities(self, run_ids: Sequence[str]) -> dict[str, tuple[str | None, str | None]]:
        """Whose each run is, ``run id -> (tenant, owner)``, from its summary (runs without one left out)."""

    def births(self, run_ids: Sequence[str]) -> dict[str, str]:
        """When each run was created, ``run id -> created`` as its summary keeps it (runs without
        one left out): which run holds an id now."""

    def gate_steps(self, run_id: str, below: int) -> list[int]:
        """The activations before ``below`` that are gates, oldest first: whose interrupt ended (a
        person answered or cancelled it, or it expired into its policy), or in which a run below
        this one (a child, a grandchild, at any depth) paused."""

    def read_interrupt(self, run_id: str, request_id: str, now: int) -> InterruptRecord | None:
        """An interrupt with its lifecycle record, open or ended, while its run's records or its
        summary last (after the run's TTL, from the lifecycle record alone)."""

    def refuse(self, run_id: str, token_hash: str, request_id: str, error: Mapping[str, Any], now: int) -> int:
        """Count a refused answer in the open interrupt's lifecycle record, with ``error`` (a
        lifecycle part: ``telemetry.failure``) as the last; returns the count (0: not open)."""

    def list_interrupts(self, query: InterruptQuery) -> InterruptListing:
        """Pending, unexpired interrupts from the index, one page at a time; with ``watch``, also the
        pause feed's position read before the listing; with ``wait_after``, after a wait for a pause."""

    def read_events(self, run_id: str, after: str, block_ms: int | None, count: int) -> list[StoredEvent]:
        """Events after position ``after`` ("0" for all); block up to ``block_ms`` for new ones."""

    def tallies(self, now: int) -> Tallies:
        """The deployment's counters and pending interrupts by workflow, for ``/metrics``."""


class UpkeepStore(Protocol):
    """What the worker's upkeep and the reconciler need (``workers/``): leases kept, lost runs
    recovered, due and overdue interrupts expired, and what no run holds any more pruned."""

    def heartbeat(self, run_ids: Sequence[str], lease_until: int) -> None:
        """Extend the leases of runs this worker is executing."""

    def recover(self, run_id: str, now: int, max_lost: int, error: Mapping[str, Any]) -> Requeue:
        """Requeue a running run whose lease expired, or fail it after ``max_lost`` lost attempts."""

    def redispatch(self, run_id: str, step: int, fence: int, now: int) -> Requeue:
        """Move a queued run whose job was lost to a new fence and outbox entry."""

    def expire(self, entry: IndexEntry, now: int) -> Expiry:
        """Record the expiry of an interrupt past its TTL and apply its ``on_expire`` policy: end the
        run expired or failed, or record a cancellation or a default answer and queue the run at a
        new fence (returned, with its outbox entry, for the caller to enqueue)."""

    def due(self, now: int, outbox_age_ms: int, limit: int) -> Due:
        """Expired leases and old outbox entries, for the reconciler."""

    def claim_due(self, now: int, limit: int, claim_ms: int) -> list[IndexEntry]:
        """Up to about ``limit`` interrupts past their expiry at ``now``, earliest first, that no other
        reconciler holds, each claimed for ``claim_ms`` (so reconcilers running together share the
        due range); a claim that lapses is another's to take. ``release_claims`` ends them."""

    def release_claims(self, run_ids: Sequence[str]) -> None:
        """End the claims ``claim_due`` took on these runs' interrupts."""

    def extend_overdue(self, now: int, before: int, until: int, limit: int) -> int:
        """Keep the records of the runs whose interrupt expired before ``before`` and is not recorded
        yet (and of their ancestors) until ``until`` at least, so its expiry can still be recorded
        however late; the earliest ``limit`` of them. How many it extended."""

    def overdue(self, now: int) -> Overdue:
        """The interrupts past their expiry at ``now`` whose expiry is not recorded yet."""

    def try_lock(self, owner: str, ttl_ms: int) -> bool:
        """Take (or keep) the reconciler lock for ``ttl_ms``."""

    def prune_runs(self, now: int, limit: int) -> int:
        """Drop from the run index the runs whose summary is gone, looking at up to ``limit`` of its
        runs created before ``now`` less the retention, from where the last look stopped (a walk that
        starts again from the oldest once it reaches that bound); how many it dropped."""

    def prune_idle(self, now: int) -> list[str]:
        """Drop the cross-run records no run holds any more at ``now`` (closed interrupts past the
        retention, workflows with no interrupt left, the pause feed once none is left), so an idle
        deployment returns to its fixed keys; the workflows it forgot."""

    def reclaim_folded(self, now: int, limit: int) -> int:
        """Have the store free what the parks before ``now`` left to expire (a parked run's stream,
        kept a moment for its blocked readers); how many parks it looked at."""

    def ping(self) -> None:
        """Raise StoreUnavailable unless the store answers."""


class Store(StepStore, ClientStore, UpkeepStore, Protocol):
    """The atomic transitions of a run, every caller's part of them; implemented by the Redis store
    (on a server, or in-process) and the sharded store over several."""
