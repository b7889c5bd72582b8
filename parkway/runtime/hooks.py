"""Hooks: what node code calls to pause, keep state and record side effects.

Replay, briefly. A node attempt runs the node function from its first line.
Every hook either finds its entry in the activation's journal and returns
what was recorded, or does its work for the first time and records it before
returning. Entries are keyed by the hook's stable name (``id=``/``key=``/
``name=``) or, without one, by the call's position among unnamed hook calls
(with a warning for interrupts). Each entry keeps its kind and what it asked
for; a replay that asks something else raises :class:`NondeterminismError`
instead of handing back a value recorded for a different question.

Rejected alternatives: snapshotting the Python frame (impossible to make
durable, and dangerous across deploys) and event-sourcing every line
(Temporal-style; too heavy for nodes that mostly call one model and wait).
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import time
import uuid
import warnings
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from . import journal, kinds
from .cancel import cancel_run
from .contracts import Contract
from .errors import (
    ChildFailed,
    InterruptCancelled,
    NondeterminismError,
    ParkwayError,
    RunNotFound,
    StoreUnavailable,
    ValidationError,
)
from .expiry import expiry_policy
from .kinds.contract import CONTRACT_SHAPE
from .logger import get_logger
from .protocol import MAX_TTL_MS, InterruptRequest, check_audience, check_depth, name_of
from .store import JournalEntry, Store
from .telemetry import check_capture
from .workflow import Workflow

T = TypeVar("T")
log = get_logger()

UNCONFIRMED_WRITE_S = 15.0
"""how long a hook's write whose outcome was unknown is tried again (the store's own bound for a
Redis that does not answer: a Sentinel failover fits inside it)"""
UNCONFIRMED_PAUSE_S = 0.2


class ParkwayWarning(UserWarning):
    """A use of parkway that works but is fragile."""


_PAUSE_KEY = object()


class Pause(BaseException):
    """Raised by ``use_interrupt`` to end the attempt; derives from BaseException so
    ``except Exception`` in node code cannot swallow it. Only parkway builds it."""

    def __init__(
        self,
        key: object,
        request: InterruptRequest,
        journal_field: str,
        name: str,
        ttl_ms: int | None,
        on_expire: dict[str, Any] | None = None,
        contract: Contract[Any, Any] | None = None,
        request_id: str | None = None,
        audience: str | None = None,
        child: ChildAsk | None = None,
        capture: tuple[str, ...] | None = None,
    ):
        if key is not _PAUSE_KEY:
            raise TypeError("Pause is raised by use_interrupt only")
        self.audience = audience
        """who is asked (``use_interrupt(audience=)``), None for nobody in particular"""
        self.child = child
        """use_first's child contender, started in the same step as the pause"""
        self.request_id = request_id
        """the request id to park under (session interrupts, deferred tools); None: a random one"""
        self.capture = capture
        """what this interrupt's lifecycle record may hold; None: the workflow's ``capture_content``"""
        super().__init__(f"paused at {name!r}")
        self.request = request
        self.journal_field = journal_field
        self.name = name
        self.ttl_ms = ttl_ms
        self.on_expire = on_expire
        self.contract = contract


@dataclass(frozen=True)
class ChildAsk:
    """A child run a node asks for (``use_workflow``, ``use_first(child=...)``), as its parent records it."""

    run_id: str
    workflow: str | Workflow
    input: dict[str, Any]
    name: str
    asked: JournalEntry
    """recorded at ``c:<name>`` when the child starts; a replay must ask for the same child"""

    @property
    def journal_field(self) -> str:
        """where the child's outcome goes in the parent's journal"""
        return journal.child(self.name)


class SpawnChild(BaseException):
    """Raised by ``use_workflow`` to end the attempt and park the run on a child run; like
    :class:`Pause`, built by parkway only and out of reach of ``except Exception``."""

    def __init__(self, key: object, child: ChildAsk):
        if key is not _PAUSE_KEY:
            raise TypeError("SpawnChild is raised by use_workflow only")
        super().__init__(f"waiting on child {child.run_id}")
        self.child = child


class SpawnChildren(BaseException):
    """Raised by ``use_workflows`` to end the attempt, start the next children of its fan-out and
    park the run on them; built by parkway only, out of reach of ``except Exception``."""

    def __init__(self, key: object, children: list[ChildAsk], live: int, left: int):
        if key is not _PAUSE_KEY:
            raise TypeError("SpawnChildren is raised by use_workflows only")
        super().__init__(f"waiting on {live + len(children)} children")
        self.children, self.live, self.left = children, live, left


def pause_for(
    request: InterruptRequest, journal_field: str, name: str, contract: Contract[Any, Any], request_id: str
) -> Pause:
    """A pause under a chosen request id, for the agent hooks (``parkway.runtime.agents``)."""
    return Pause(_PAUSE_KEY, request, journal_field, name, None, None, contract, request_id)


class Held(BaseException):
    """An observer held the run: the job ends, the run waits (the observer's store call committed
    the hold). Out of reach of ``except Exception``, like a pause."""


class RunObserver:
    """One feature's view of one run's job; every hook is a no-op (override the ones you need)."""

    def before_attempt(self, ctx: NodeContext, data: dict[str, Any]) -> dict[str, Any]:
        """Before each attempt of a node: the data the node receives (``data`` as it is, here)."""
        return data

    def before_call(self, ctx: NodeContext) -> None:
        """Before a hook calls out (a model, a tool)."""

    def on_settle(
        self, ctx: NodeContext, field_name: str, entry: JournalEntry, mode: str, message: Mapping[str, Any] | None
    ) -> bool:
        """A hook's call settled with ``entry`` for journal field ``field_name``; ``mode``: ``void`` (a
        reply the run may drop and ask again) or ``keep`` (a result that must be kept); ``message``:
        what the call adds to a conversation, if anything. Whether this observer committed it."""
        return False

    def on_park(self, ctx: NodeContext, pause: Pause) -> None:
        """The node asked a question (``pause.request``), not yet committed."""

    def after_attempt(self, ctx: NodeContext, outcome: str) -> None:
        """An attempt ended: ``outcome`` says how, once its commit is done (``completed``, ``parked``,
        ``waiting``, ``held``, ``cancelled``, ``failed``, ``deferred``, ``stale``; ``retried``: a
        retry follows; ``lost``: its commit raised, the store's trouble)."""


@dataclass
class NodeContext:
    """The state of one node attempt; hooks find it through a contextvar."""

    store: Store
    run_id: str
    workflow: str
    node: str
    step: int
    fence: int
    journal: dict[str, JournalEntry]
    workflow_state: MutableMapping[str, Any]
    clock: Callable[[], int]
    position: int = 0
    observers: tuple[RunObserver, ...] = ()
    """the features' observers of this job (``parkway.runtime.observers``)"""
    definition: Workflow | None = None
    """the running workflow (its tools and policy, for ``use_tool``)"""
    triggers: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """the triggers delivered to this activation (``agents.delivered``): set by an observer"""
    consumed: set[str] = field(default_factory=set)
    """the journal fields a hook read in this attempt (see ``unconsumed_answers``)"""

    def next_position(self) -> str:
        field_name = journal.position(self.position)
        self.position += 1
        return field_name

    def recorded(self, field_name: str) -> JournalEntry | None:
        """The journal's record at ``field_name`` (None: none), read by a hook: a record read is
        consumed (see ``unconsumed_answers``)."""
        self.consumed.add(field_name)
        return self.journal.get(field_name)

    def unconsumed_answers(self) -> list[tuple[str, JournalEntry]]:
        """The answers recorded in this activation's journal that no hook of this attempt asked
        for: after an attempt that ran to its end or paused, an interrupt whose answer was taken
        and that the code no longer reaches (its id renamed by a deploy, say)."""
        return sorted(
            (name, entry)
            for name, entry in self.journal.items()
            if entry.kind == "interrupt" and name not in self.consumed
        )

    def unconsumed_error(self) -> NondeterminismError | None:
        """The error an attempt that left answers unconsumed ends with (None: it left none)."""
        left = self.unconsumed_answers()
        if not left:
            return None
        name, entry = left[0]
        named = f"interrupt {entry.name!r}" if entry.name else "an unnamed interrupt"
        return NondeterminismError(
            f"run {self.run_id} node {self.node!r}: the journal holds the answer {entry.value!r:.200} to {named} "
            f"(at {name}) but no hook asked for it on this replay; did the interrupt's id change? The answer "
            "stays in the journal: deploy code whose hook asks for it and the run goes on",
            run_id=self.run_id,
            node=self.node,
            position=name,
            expected="a hook asking for it",
            recorded=_describe(entry.kind, entry.name, entry.detail),
        )

    def replayed(self, field_name: str, kind: str, name: str, detail: str = "") -> JournalEntry | None:
        entry = self.recorded(field_name)
        if entry is None:
            return None
        if entry.kind != kind or entry.name != name or entry.detail != detail:
            raise NondeterminismError(
                f"run {self.run_id} node {self.node!r} at {field_name}: the journal recorded "
                f"{_describe(entry.kind, entry.name, entry.detail)} but the node now asks for "
                f"{_describe(kind, name, detail)}; did the node's code change, or branch on "
                "something that differs between attempts?",
                run_id=self.run_id,
                node=self.node,
                position=field_name,
                expected=_describe(kind, name, detail),
                recorded=_describe(entry.kind, entry.name, entry.detail),
            )
        return entry

    def write(self, field_name: str, entry: JournalEntry, event: tuple[str, dict[str, Any]] | None = None) -> None:
        """Record ``entry`` in the step's journal (with ``event``, if any).

        A write whose outcome is unknown (``StoreUnavailable``: the connection lost, or no replica
        confirmed it, as when the primary fails over) is written again, for up to
        ``UNCONFIRMED_WRITE_S`` from the first try: this attempt holds what it records (a step's
        result, whose outside effect is done), and giving up would have the replay do the effect
        again. Repeating is safe: the fence still guards it (once the attempt lost its claim the
        write raises ``StaleFence``), and a repeat that finds its field written adds no second event.
        """
        started, again = time.monotonic(), False
        while True:
            try:
                self.store.write_entry(self.run_id, self.fence, self.step, "journal", field_name, entry, event,
                                       self.clock(), again=again)
                break
            except StoreUnavailable as exc:
                if time.monotonic() - started + UNCONFIRMED_PAUSE_S >= UNCONFIRMED_WRITE_S:
                    raise
                log.warning("write_unconfirmed", run_id=self.run_id, node=self.node, field=field_name,
                            error=exc.message, retry="written again, its field read first")
                time.sleep(UNCONFIRMED_PAUSE_S)
                again = True
        self.journal[field_name] = entry


def _describe(kind: str, name: str, detail: str) -> str:
    return f"{kind} {name!r}" + (f" ({detail})" if detail else "")


_current: contextvars.ContextVar[NodeContext] = contextvars.ContextVar("parkway_node")


def current() -> NodeContext:
    try:
        return _current.get()
    except LookupError:
        raise ParkwayError("parkway hooks can only be called inside a running node") from None


def activate(ctx: NodeContext) -> contextvars.Token[NodeContext]:
    return _current.set(ctx)


def deactivate(token: contextvars.Token[NodeContext]) -> None:
    _current.reset(token)


def _name(value: str | None, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > 200:
        raise ValidationError(f"{what} must be a non-empty string of at most 200 characters")
    return value


def use_interrupt(
    request: InterruptRequest | Mapping[str, Any] | BaseModel | None = None,
    *,
    id: str | None = None,
    ttl_ms: int | None = None,
    contract: Contract[Any, Any] | None = None,
    on_expire: str | Mapping[str, Any] | None = None,
    audience: str | None = None,
    capture_content: tuple[str, ...] | None = None,
) -> Any:
    """Pause the run until a person answers ``request``; on replay, return the answer.

    Returns what the request's kind records (:mod:`parkway.runtime.kinds`): the option id
    (``choice``), a list of ids (``multi-choice``), the text (``text``); with ``contract=``,
    ``request`` is the contract's request
    (a model or a dict) and the answer is the contract's validated response
    model. Raises :class:`InterruptCancelled` if the interrupt was
    cancelled: catch it to take a "denied" path; uncaught, the run ends
    ``cancelled``. Give every interrupt a stable ``id``: without one, answers
    are matched by call order, which breaks when the node's code changes.

    ``on_expire`` says what the reconciler does when nobody answered within the TTL
    (default: the workflow's ``on_expire``, else ``"expire"``): ``"expire"`` ends the run
    expired; ``"fail"`` ends it failed; ``"cancel"`` replays the node with this interrupt
    cancelled (``InterruptCancelled``, reason ``"expired"``); ``{"answer": value}`` replays it
    with ``value`` as the answer (checked now, like any answer); ``{"escalate": {...}}`` asks
    again, the same question under the same token, to another audience with a new TTL, a bounded
    number of times, then applies its ``then`` (see :func:`expiry_policy`).

    ``audience`` says who is asked: a tag or an assignee, one concept (``"team:ops"``,
    ``"user:ann"``, see ``protocol.AUDIENCE_PATTERN``); listings filter on it.

    ``capture_content`` (default: the workflow's) says what this interrupt's lifecycle record may
    hold: ``("input", "output")``, one of them, or ``()`` (see :mod:`parkway.runtime.telemetry`).
    """
    if audience is not None:
        check_audience(audience)
    capture = check_capture(capture_content) if capture_content is not None else None
    entry, contract_ = _ask(request, id, ttl_ms, contract, on_expire, timer=False, audience=audience, capture=capture)
    return contract_.answer(entry.value) if contract_ is not None else entry.value


@dataclass(frozen=True)
class First:
    """What :func:`use_first` waited for: which came first (``kind``) and its value."""

    kind: str
    """``"interrupt"`` (answered; ``value`` is the answer), ``"timer"`` (``value`` is None) or
    ``"child"`` (``value`` is the child run's output)"""
    value: Any = None


def use_first(
    interrupt: InterruptRequest | Mapping[str, Any] | BaseModel | None = None,
    *,
    timer_ms: int,
    id: str,
    contract: Contract[Any, Any] | None = None,
    child: tuple[Workflow | str, Mapping[str, Any] | None] | None = None,
) -> First:
    """Pause until the first of an answer to ``interrupt``, a timer of ``timer_ms`` (at least
    1000) and, with ``child=(workflow, input)``, the end of a child run; on replay, return which
    came first: ``First("interrupt", answer)``, ``First("timer")`` or ``First("child", output)``.

    The interrupt is parked and the child started in one step. The losers are cancelled cleanly
    and never fire later: once the timer fired, the interrupt is recorded cancelled (its token
    reads ``already_resolved`` and answers nothing); once the interrupt is answered, the timer
    (the interrupt's deadline) is gone; once the child ended, the interrupt is recorded cancelled
    and its token answers nothing; once the answer or the timer came first, the child run (and
    the runs below it) is cancelled when the node replays, and its end no longer moves this run.
    A child that failed, was cancelled or expired before the others came raises
    :class:`ChildFailed`, as with ``use_workflow``. The reconciler fires the timer (within about
    a second of it). A cancelled interrupt (``cancel_interrupt``) raises InterruptCancelled, as
    with ``use_interrupt``. ``id`` names the interrupt and the child: a replay never starts a
    second child, and one asking for another child or input raises NondeterminismError.
    """
    if isinstance(timer_ms, bool) or not isinstance(timer_ms, int) or timer_ms < 1000:
        raise ValidationError("use_first timer_ms must be an integer of at least 1000")
    ask = None
    if child is not None:
        if not isinstance(child, tuple) or len(child) != 2:
            raise ValidationError("use_first child= takes a (workflow, input) pair")
        ask = _child_ask(child[0], child[1], _name(id, "use_first id") or "", "use_first child")
    try:
        entry, contract_ = _ask(interrupt, id, timer_ms, contract, None, timer=True, child=ask)
    except InterruptCancelled:
        if ask is not None:  # the race is over: the node takes its "cancelled" path, or the run ends
            _cancel_loser(ask, "the interrupt's cancellation")
        raise
    if ask is not None and entry.kind == "workflow":
        _close_lost_interrupt(ask)
        return First("child", _child_output(ask, entry))
    if ask is not None:
        _cancel_loser(ask, "the timer" if entry.status == "timer" else "the answer")
    if entry.status == "timer":
        return First("timer")
    return First("interrupt", contract_.answer(entry.value) if contract_ is not None else entry.value)


def _close_lost_interrupt(ask: ChildAsk) -> None:
    """The child won: take the interrupt it raced out of the listings and end its lifecycle record
    (cancelled, reason ``child``), as a timer's win does, once (``Store.close_raced``; a replay
    finds the record)."""
    ctx = current()
    field_name = journal.race(ask.name)
    if ctx.replayed(field_name, "closed", ask.name) is not None:
        return
    ctx.store.close_raced(ctx.run_id, ctx.clock())
    ctx.write(field_name, JournalEntry("closed", ask.name, None))


def _cancel_loser(ask: ChildAsk, winner: str) -> None:
    """Cancel the child that lost a use_first race (and its tree), once: a replay finds the record."""
    ctx = current()
    field_name = journal.race(ask.name)
    if ctx.replayed(field_name, "cancelled", ask.name) is not None:
        return
    try:
        cancel_run(ctx.store, ask.run_id, f"use_first {ask.name!r}: {winner} came first", None, ctx.clock)
    except RunNotFound:
        pass  # its records (and its summary) are gone: nothing is left to cancel
    ctx.write(field_name, JournalEntry("cancelled", ask.name, ask.run_id))


def _ask(
    request: InterruptRequest | Mapping[str, Any] | BaseModel | None,
    id: str | None,
    ttl_ms: int | None,
    contract: Contract[Any, Any] | None,
    on_expire: str | Mapping[str, Any] | None,
    *,
    timer: bool,
    audience: str | None = None,
    child: ChildAsk | None = None,
    capture: tuple[str, ...] | None = None,
) -> tuple[JournalEntry, Contract[Any, Any] | None]:
    """The interrupt's journal entry on replay (raising InterruptCancelled for a cancelled one), or
    the Pause; ``timer``: the interrupt races a timer (its TTL), and ``child`` a child run (whose
    outcome's entry is returned if it came first), see ``use_first``."""
    ctx = current()
    kind = _kind_of(request, contract)
    if ttl_ms is not None and (isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int)
                               or not 1000 <= ttl_ms <= MAX_TTL_MS):
        raise ValidationError(f"use_interrupt ttl_ms must be an integer from 1000 to {MAX_TTL_MS}")
    name = _name(id, "interrupt id")
    if name is None:
        warnings.warn(
            f"use_interrupt without id= in node {ctx.node!r}: answers are matched by call order; "
            "give each interrupt a stable id",
            ParkwayWarning,
            stacklevel=3,
        )
        field_name, name = ctx.next_position(), ""
    else:
        field_name = journal.interrupt(name)
    if child is not None:  # the same child as recorded, or nondeterminism
        ctx.replayed(journal.child_asked(child.name), "child", child.name, child.asked.detail)
    entry = ctx.replayed(field_name, "interrupt", name, kind)
    if entry is not None and entry.status == "cancelled":
        reason = entry.value if isinstance(entry.value, str) else None
        raise InterruptCancelled(
            f"interrupt {name or field_name!r} of node {ctx.node!r} was cancelled" + (f": {reason}" if reason else ""),
            run_id=ctx.run_id,
            node=ctx.node,
            reason=reason,
        )
    if entry is not None:
        return entry, contract
    if child is not None:
        won = ctx.replayed(child.journal_field, "workflow", child.name)
        if won is not None:
            return won, contract
    req = _request_of(request, contract)  # validated here, where it is made: once, when the node pauses
    policy = expiry_policy(req, on_expire, contract) if on_expire is not None else None
    if timer:
        policy = {"action": "timer"}  # at the deadline the reconciler records the timer's win
    raise Pause(
        _PAUSE_KEY, req, field_name, name, ttl_ms, policy, contract, audience=audience, child=child, capture=capture
    )


def _kind_of(
    request: InterruptRequest | Mapping[str, Any] | BaseModel | None, contract: Contract[Any, Any] | None
) -> str:
    """The kind of request ``use_interrupt`` asks, all that replay compares with its journal entry:
    read without building the request (``_request_of``, only when the node pauses). A kind that
    validation would not read as one raises as building the request does."""
    if contract is not None:
        return "contract"
    if isinstance(request, InterruptRequest):
        return request.kind
    if not isinstance(request, Mapping):
        raise ValidationError("use_interrupt takes a request dict or InterruptRequest, or contract= and its request")
    kind = InterruptRequest.kind_of(request)
    return kind if kind is not None else InterruptRequest.model_validate(request).kind


def _request_of(
    request: InterruptRequest | Mapping[str, Any] | BaseModel | None, contract: Contract[Any, Any] | None
) -> InterruptRequest:
    """The request ``use_interrupt`` asks, validated (a contract's payload against its request model)."""
    if contract is not None:
        return InterruptRequest.model_validate(
            {
                "kind": "contract",
                "question": contract.question or contract.schema_id,
                "schemaId": contract.schema_id,
                "schemaVersion": contract.version,
                "contractRef": contract.ref(),
                "payload": contract.check_request(request if request is not None else {}),
            }
        )
    asked = request if isinstance(request, InterruptRequest) else InterruptRequest.model_validate(request)
    if kinds.get(asked.kind).needs_contract and asked.contract_ref is None:  # answers are checked against it
        raise ValidationError(CONTRACT_SHAPE)
    return asked


CHILD_SEPARATOR = "--"
"""a child's run id is ``<root run id>--<hash>``: the part before the first ``--`` is the tree's root"""
MAX_ROOT_ID = 46
"""a root run id (its name: a tenant's run is ``<tenant>~<name>``) of at most this length leaves
room for its children's (an id's name is at most 64)"""


def child_run_id(parent_run_id: str, step: int, name: str) -> str:
    """The run id of the child ``use_workflow(..., id=name)`` starts in activation ``step``: the same
    on every replay, so a replay finds the child instead of starting another."""
    root = parent_run_id.split(CHILD_SEPARATOR, 1)[0]
    digest = hashlib.sha256(f"{parent_run_id}:{step}:{name}".encode()).hexdigest()[:16]
    return f"{root}{CHILD_SEPARATOR}{digest}"


def use_workflow(workflow: Workflow | str, input: Mapping[str, Any] | None = None, *, id: str) -> Any:
    """Run ``workflow`` as a child of this run and return its output.

    The first call starts the child (``workflow`` is a Workflow defined at module level, or
    ``"module:attribute"``) and parks this run without compute until the child ends; the node
    then replays and the call returns the child's output. The child's interrupts show on this
    run's stream (and its root's) and are answered with their own tokens. Raises
    :class:`ChildFailed` when the child failed, was cancelled or expired. ``id`` names the
    child within this activation: the same id never starts a second child. A replay that asks
    under the same id for another child workflow or another input than was recorded raises
    :class:`NondeterminismError`. The input has run input's bounds (size and nesting).
    """
    name = _name(id, "child workflow id")
    assert name is not None
    ask = _child_ask(workflow, input, name, "use_workflow")
    ctx = current()
    # the same child as recorded, or nondeterminism
    ctx.replayed(journal.child_asked(name), "child", name, ask.asked.detail)
    entry = ctx.replayed(ask.journal_field, "workflow", name)
    if entry is None:
        raise SpawnChild(_PAUSE_KEY, ask)
    return _child_output(ask, entry)


def _child_ask(workflow: Workflow | str, input: Mapping[str, Any] | None, name: str, what: str) -> ChildAsk:
    """The child run this activation asks for under ``name``, checked."""
    ctx = current()
    if not isinstance(workflow, Workflow | str):
        raise ValidationError(f"{what} takes a Workflow or 'module:attribute'")
    if input is not None and not isinstance(input, Mapping):
        raise ValidationError(f"child workflow input must be a dict, not {type(input).__name__}")
    check_depth(input, "child workflow input")  # its size is bounded where it is encoded, as a run's
    root = ctx.run_id.split(CHILD_SEPARATOR, 1)[0]
    if len(name_of(root)) > MAX_ROOT_ID:
        raise ValidationError(f"a run that starts child workflows needs a run id (its name, after a tenant's "
                              f"'~') of at most {MAX_ROOT_ID} characters")
    child = child_run_id(ctx.run_id, ctx.step, name)
    detail = workflow if isinstance(workflow, str) else workflow.name
    asked = JournalEntry("child", name, child, f"{detail}, input {_digest(input or {})}")
    return ChildAsk(child, workflow, dict(input or {}), name, asked)


MAX_FAN_OUT = 1000
"""the most children one ``use_workflows`` call starts"""
FAN_OUT_LIMIT = 10
"""how many children of one ``use_workflows`` call run at a time, unless it says otherwise"""


def use_workflows(
    calls: Sequence[tuple[Workflow | str, Mapping[str, Any] | None]], *, id: str, limit: int = FAN_OUT_LIMIT
) -> list[Any]:
    """Run child workflows side by side and return, once every one has settled, their outputs in
    the order of ``calls`` (``(workflow, input)`` pairs, at most 1000).

    At most ``limit`` children (1 to 1000, default 10) run at a time: the first call starts that
    many and parks this run without compute; as children end, the node replays and starts the
    next ones, until all have ended. A child that failed, was cancelled or expired does not raise:
    its place in the list holds a :class:`ChildFailed` (as ``asyncio.gather(...,
    return_exceptions=True)`` does); raise it to fail the node. The children's interrupts show on
    this run's stream and under its root's ``list_interrupts(run_id=)``; cancelling this run
    cancels every child still running. A child's records go when it ends (its output is in this
    run's journal; its summary keeps its status). ``id`` names the fan-out within the activation;
    child ``i`` is ``<id>.<i>``, and a replay asking for other children raises
    :class:`NondeterminismError`."""
    name = _name(id, "fan-out id")
    assert name is not None
    if not isinstance(calls, list | tuple) or not 1 <= len(calls) <= MAX_FAN_OUT:
        raise ValidationError(f"use_workflows takes a list of 1 to {MAX_FAN_OUT} (workflow, input) pairs")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_FAN_OUT:
        raise ValidationError(f"use_workflows limit must be an integer from 1 to {MAX_FAN_OUT}")
    ctx = current()
    asks, results, fresh, live = [], [], [], 0
    for i, call in enumerate(calls):
        if not isinstance(call, tuple) or len(call) != 2:
            raise ValidationError("use_workflows takes (workflow, input) pairs")
        ask = _child_ask(call[0], call[1], f"{name}.{i}", "use_workflows")
        started = ctx.replayed(journal.child_asked(ask.name), "child", ask.name, ask.asked.detail)
        entry = ctx.replayed(ask.journal_field, "workflow", ask.name)
        asks.append(ask)
        results.append(entry)
        if entry is None and started is not None:
            live += 1
        elif entry is None:
            fresh.append(ask)
    if all(entry is not None for entry in results):
        return [_child_outcome(ask, entry) for ask, entry in zip(asks, results, strict=True) if entry is not None]
    start = fresh[: max(0, limit - live)]
    raise SpawnChildren(_PAUSE_KEY, start, live, len(fresh) - len(start))


def _child_output(ask: ChildAsk, entry: JournalEntry) -> Any:
    """The child's output from its outcome's journal entry; ChildFailed if it did not complete."""
    outcome = _child_outcome(ask, entry)
    if isinstance(outcome, ChildFailed) and entry.status:
        raise outcome
    return outcome


def _child_outcome(ask: ChildAsk, entry: JournalEntry) -> Any:
    """The child's output from its outcome's journal entry, or the ChildFailed saying how it ended."""
    if not entry.status:
        return entry.value
    ctx = current()
    detail = ask.workflow if isinstance(ask.workflow, str) else ask.workflow.name
    error = (entry.value or {}).get("error") if isinstance(entry.value, dict) else None
    message = error.get("message", "") if isinstance(error, dict) else ""
    return ChildFailed(
        f"child run {ask.run_id} ({detail}) of run {ctx.run_id} {entry.status}" + (f": {message}" if message else ""),
        run_id=ctx.run_id,
        child_run_id=ask.run_id,
        status=entry.status,
        error_message=message,
    )


def _digest(value: Any) -> str:
    """A short digest of plain data (run input): the same for equal values, whatever the key order."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def use_node_state(initial: T, *, key: str | None = None) -> tuple[T, Callable[[T | Callable[[T], T]], None]]:
    """State of this activation that survives pause and replay; durable the moment it is set.

    The setter takes a new value, or a function of the current one (``set_n(lambda n: n + 1)``)."""
    ctx = current()
    name = _name(key, "node state key")
    field_name = journal.node_state(name) if name else ctx.next_position()
    entry = ctx.replayed(field_name, "state", name or "")
    current_value: list[T] = [entry.value if entry is not None else initial]

    def set_value(new: T | Callable[[T], T]) -> None:
        value = new(current_value[0]) if callable(new) else new
        ctx.write(field_name, JournalEntry("state", name or "", value))
        current_value[0] = value

    return current_value[0], set_value


def use_workflow_state(
    key: str, initial: T | None = None
) -> tuple[T | None, Callable[[T | Callable[[T | None], T]], None]]:
    """State shared by every node of the run; durable the moment it is set.

    The setter takes a new value, or a function of the current one."""
    ctx = current()
    name = _name(key, "workflow state key")
    assert name is not None
    value = ctx.workflow_state.get(name, initial)

    def set_value(new: T | Callable[[T | None], T]) -> None:
        if callable(new):
            new = new(ctx.workflow_state.get(name, initial))
        ctx.store.write_entry(ctx.run_id, ctx.fence, ctx.step, "workflow", name, new, None, ctx.clock())
        ctx.workflow_state[name] = new

    return value, set_value


def use_step(name: str, fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` once and record its result; replays return the record."""
    ctx = current()
    checked = _name(name, "step name")
    entry = ctx.replayed(journal.step(str(checked)), "step", checked or "")
    if entry is not None:
        return entry.value  # type: ignore[no-any-return]
    result = fn(*args)
    ctx.write(journal.step(str(checked)), JournalEntry("step", checked or "", result))
    return result


def use_stable_id(name: str) -> str:
    """A random id chosen on the first attempt and returned unchanged on every replay."""
    return use_step(f"id:{name}", lambda: uuid.uuid4().hex)


def use_now(name: str) -> int:
    """The time (epoch ms, by the run's clock) at the first attempt, returned unchanged on every replay."""
    return use_step(f"now:{name}", current().clock)


def emit(data_type: str, data: Mapping[str, Any], *, stream_id: str | None = None) -> None:
    """Append a ``data`` event to the run's stream, once: a replay does not emit it again."""
    ctx = current()
    checked = _name(data_type, "data type")
    field_name = ctx.next_position()
    if ctx.replayed(field_name, "emit", checked or "") is not None:
        return
    payload = {"dataType": checked, "streamId": stream_id, "node": ctx.node, "data": dict(data)}
    ctx.write(field_name, JournalEntry("emit", checked or "", None), ("data", payload))


def complete_response(data: Mapping[str, Any] | None = None) -> None:
    """End delivery to the client while the run goes on: a ``done`` event with
    ``status: "delivered"`` (once: a replay does not send it again).

    A client streaming the run (``stream``, ``parkway run``) stops at the first ``done``: so
    ``done`` means "delivery finished", not "execution succeeded". Execution continues to its
    real end, and ``run.completed`` (or ``run.failed``) and a final ``done`` still follow for
    whoever streams on from the delivered one (``stream(run_id, after=its id)``)."""
    ctx = current()
    field_name = ctx.next_position()
    if ctx.replayed(field_name, "emit", "done") is not None:
        return
    payload = {"status": "delivered", "execution": "continuing", "node": ctx.node, "data": dict(data or {})}
    ctx.write(field_name, JournalEntry("emit", "done", None), ("done", payload))


def idempotency_key(name: str) -> str:
    """A key for calls into outside services, the same on every attempt of this activation."""
    ctx = current()
    checked = _name(name, "idempotency key name")
    return f"{ctx.run_id}:{ctx.step}:{checked}"
