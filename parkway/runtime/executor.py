"""Run one job: node attempts against a Store until the run pauses, ends or fails.

A job carries ``(run_id, step, fence)``. :func:`execute` begins the
activation (refused if the fence is stale), runs the node, and commits the
outcome in one atomic store call. A node followed by another without a pause
needs no new job: the same call goes on with the new fence.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import os
import time
import traceback as tb
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from . import journal as journal_fields
from . import telemetry, tokens
from .clock import now_ms
from .errors import (
    ChildFailed,
    CorruptRecord,
    InterruptCancelled,
    NondeterminismError,
    ParkwayError,
    RunGone,
    StaleFence,
    StoreUnavailable,
    ValidationError,
    VersionNotReplayed,
    WorkflowError,
    WorkflowUnavailable,
)
from .expiry import expiry_policy
from .hooks import (
    ChildAsk,
    Held,
    NodeContext,
    Pause,
    SpawnChild,
    SpawnChildren,
    activate,
    deactivate,
)
from .loading import WorkflowModules
from .logger import get_logger
from .observers import Extension, after_attempt, before_attempt, on_park
from .store import (
    Advance,
    Attempt,
    FanOut,
    InterruptRecord,
    JournalEntry,
    NewRun,
    Park,
    RunRecord,
    Spawn,
    Store,
)
from .workflow import Result, Workflow, as_result

log = get_logger()


class JobEnd(StrEnum):
    COMPLETED = "completed"
    WAITING = "waiting"
    FAILED = "failed"
    CANCELLED = "cancelled"
    STALE = "stale"
    DEFERRED = "deferred"


@dataclass(frozen=True)
class Options:
    """What the executor needs besides the store."""

    secret: bytes
    clock: Callable[[], int] = now_ms
    loader: Callable[[str], Workflow] = WorkflowModules().load
    """finds a run's workflow by reference; raises WorkflowUnavailable when this process cannot"""
    lease_ms: int = 5000
    """how long a worker may go silent before its attempt is taken as lost"""
    refer: Callable[[Workflow], str] | None = None
    """the reference a child run of this workflow records (``use_workflow``), findable by ``loader``;
    None: ``Workflow.ref`` (its module-level name)"""
    extensions: tuple[Extension, ...] = ()
    """the features observing runs (``parkway.runtime.observers``), in the order their hooks run"""


@functools.cache
def _contextvars() -> Any:
    """structlog's contextvars module, imported on first use (as parkway's logger imports structlog:
    see ``runtime.logger``), then kept: an import statement per bind cost a job about 1 us each."""
    import structlog.contextvars

    return structlog.contextvars


def _bind(**context: Any) -> None:
    """Bind ``context`` to this job's log lines (structlog's contextvars)."""
    _contextvars().bind_contextvars(**context)


def _unbind(*names: str) -> None:
    _contextvars().unbind_contextvars(*names)


def execute(
    store: Store,
    options: Options,
    run_id: str,
    step: int | None,
    fence: int,
    began: Callable[[], Attempt] | None = None,
    last: Store | None = None,
) -> JobEnd:
    """Carry the run from activation ``step`` until it pauses, ends or fails.

    ``began``, when given, returns the attempt of a ``begin`` the caller already sent (the worker
    sends it in the round trip that takes the job); it raises what ``Store.begin`` would. ``step``
    may then be None: the worker knew the job by its run and fence alone. ``last``, when given, is
    the store the job's last commit goes through (its park, its final advance, its finish...; the
    worker's, which sends its next dequeue with it): the same store, with the same replies and errors."""
    _bind(run_id=run_id)
    if step is not None:  # else bound once the run is read (``_carry``)
        _bind(step=step)
    try:
        if began is not None:
            attempt = began()
        elif step is None:
            raise ValueError("a job without its step needs the begin its worker sent")
        else:
            now = options.clock()
            attempt = store.begin(run_id, step, fence, now, now + options.lease_ms)
        return _carry(store, options, attempt, fence, store if last is None else last)
    except RunGone as exc:  # a job for a run whose records expired while it waited, or one written by hand
        log.warning("job_for_no_run", reason=exc.message)
        return JobEnd.STALE
    except StaleFence as exc:
        log.info("job_stale", reason=exc.message)
        return JobEnd.STALE
    except CorruptRecord as exc:
        # unreadable records end this run, not the worker
        log.error("run_corrupt", error=exc.message)
        try:
            store.finish(
                run_id, None, "failed", _error(exc, None), ("run.failed", {"error": exc.message}), options.clock()
            )
        except (StaleFence, CorruptRecord):
            pass
        return JobEnd.FAILED
    finally:
        _unbind("run_id", "workflow", "node", "step", "request_id")


def _carry(store: Store, options: Options, attempt: Attempt, fence: int, last: Store) -> JobEnd:
    """Run the activation ``attempt`` began, and the ones after it without a pause; each commit
    that ends the job goes through ``last``, the others through ``store``."""
    run = attempt.run
    try:
        workflow = options.loader(run.ref)
    except WorkflowUnavailable as exc:
        return _defer(last, options, run.run_id, fence, run.step, exc)
    except WorkflowError as exc:
        return _fail(last, options, run.run_id, fence, exc, run.node)
    if run.node not in workflow.nodes:  # code deployed without the node the run is at: maybe rolled back
        missing = WorkflowUnavailable(f"workflow {run.ref!r} has no node {run.node!r} (the run is at it)")
        return _defer(last, options, run.run_id, fence, run.step, missing)
    if run.paused_version is not None:
        refused = check_version(workflow, run.run_id, run.node or "", run.paused_version, "replay")
        if refused is not None:  # a worker running that version may take it (a rolling deploy)
            return _defer(last, options, run.run_id, fence, run.step, refused)
    data, journal, node, step = dict(run.data), attempt.journal, run.node or "", run.step
    observers = tuple(o for e in options.extensions if (o := e.observe(store, run)) is not None)
    _bind(workflow=workflow.name, node=node, step=step)
    while True:
        started = time.perf_counter()
        ctx = NodeContext(
            store, run.run_id, workflow.name, node, step, fence, journal, attempt.workflow_state, options.clock,
            observers=observers, definition=workflow,
        )
        outcome = _attempt(workflow, ctx, data)
        ended = "lost"  # what the observers are told if the commit raises (the store's trouble)
        try:
            end, fence, next_node = _settle(store, last, options, ctx, outcome, run, workflow, data, started)
            ended = _attempt_outcome(outcome, end)
        except StaleFence:
            ended = "stale"
            raise
        finally:
            after_attempt(ctx, ended)
        if end is not None or next_node is None:
            return end or JobEnd.COMPLETED
        node, step, journal = next_node, step + 1, {}
        _bind(node=node, step=step)


def _settle(
    store: Store,
    last: Store,
    options: Options,
    ctx: NodeContext,
    outcome: Result | Pause | SpawnChild | SpawnChildren | Held | BaseException,
    run: RunRecord,
    workflow: Workflow,
    data: dict[str, Any],
    started: float,
) -> tuple[JobEnd | None, int, str | None]:
    """Commit an attempt's outcome: how the job ends (None: it goes on to the next node), the
    run's fence after the commit, and the next node. A commit that ends the job goes through
    ``last``; an advance to a next node, through ``store``."""
    fence, node, step = ctx.fence, ctx.node, ctx.step
    ran = isinstance(outcome, Pause | SpawnChild) or not isinstance(outcome, BaseException)
    left = ctx.unconsumed_error() if ran else None  # (not after a hold: the node stopped short)
    if left is not None:  # an answer taken that this code no longer asks for: never dropped
        return _defer(last, options, run.run_id, fence, step, left), fence, None
    if isinstance(outcome, Held):
        log.info("run_held", reason=str(outcome))  # the observer's store call committed the hold
        return JobEnd.WAITING, fence, None
    if isinstance(outcome, Pause):
        try:
            _park(last, options, ctx, outcome, run, workflow)
        except (WorkflowError, ValidationError) as exc:
            if outcome.child is None:
                raise
            # use_first's child cannot start
            return _fail(last, options, run.run_id, fence, exc, node), fence, None
        return JobEnd.WAITING, fence, None
    if isinstance(outcome, SpawnChild):
        try:
            _spawn(last, options, ctx, outcome, run)
        except (WorkflowError, ValidationError) as exc:  # a child that cannot start: an unknown
            return _fail(last, options, run.run_id, fence, exc, node), fence, None  # workflow, too big an input
        return JobEnd.WAITING, fence, None
    if isinstance(outcome, SpawnChildren):
        try:
            _fan_out(last, options, ctx, outcome, run)
        except (WorkflowError, ValidationError) as exc:  # a child that cannot start
            return _fail(last, options, run.run_id, fence, exc, node), fence, None
        return JobEnd.WAITING, fence, None
    if _cancelled(outcome):
        assert isinstance(outcome, ParkwayError)
        last.finish(
            run.run_id, fence, "cancelled", None, ("run.cancelled", {"reason": outcome.message}), options.clock()
        )
        log.info("run_cancelled", reason=outcome.message)
        return JobEnd.CANCELLED, fence, None
    if isinstance(outcome, BaseException):
        return _fail(last, options, run.run_id, fence, outcome, node), fence, None
    try:
        next_node = workflow.next_node(node, outcome)
    except WorkflowError as exc:
        return _fail(last, options, run.run_id, fence, exc, node), fence, None
    data.update(outcome.data or {})
    commit = _advance(workflow, node, step, next_node, data, options, _since(started), bool(ctx.journal))
    fence = (store if next_node is not None else last).advance(run.run_id, fence, step, commit)
    log.info("node_completed", next=next_node, duration_ms=_since(started))
    if next_node is None:
        log.info("run_completed")
        return JobEnd.COMPLETED, fence, None
    return None, fence, next_node


def _attempt_outcome(outcome: object, end: JobEnd | None) -> str:
    """An attempt's outcome as its observers are told it: ``completed`` (the node's: the run may go
    on), ``parked`` (a question), ``waiting`` (a child), ``held``, or how the job ended."""
    if end is None or end is JobEnd.COMPLETED:
        return "completed"
    if end is JobEnd.WAITING:
        return "held" if isinstance(outcome, Held) else "parked" if isinstance(outcome, Pause) else "waiting"
    return end.value


def check_version(workflow: Workflow, run_id: str, node: str, recorded: str, when: str) -> VersionNotReplayed | None:
    """Compare the version a pause of ``node`` was made under with this code's: a difference is
    logged (``version_mismatch``, with both); one this code does not replay (``Workflow.replays``)
    is returned as the error to refuse with (None when it may go on)."""
    current = workflow.version_of(node)
    if recorded == current:
        return None
    replayed = workflow.replays_version(recorded, node)
    log.warning("version_mismatch", run_id=run_id, node=node, recorded=recorded, current=current, at=when,
                replayed=replayed)
    if replayed:
        return None
    return VersionNotReplayed(
        f"run {run_id} paused at node {node!r} under version {recorded!r}; this code is version {current!r} "
        f"and replays {list(workflow.replays or ())}: resume it where version {recorded!r} runs, or add it to replays",
        run_id=run_id,
        node=node,
        recorded=recorded,
        current=current,
    )


def _cancelled(outcome: object) -> bool:
    """An uncaught cancellation ends the run cancelled: its own interrupt's, or its child's."""
    if isinstance(outcome, ChildFailed):
        return outcome.status == "cancelled"
    return isinstance(outcome, InterruptCancelled)


def _defer(
    store: Store, options: Options, run_id: str, fence: int, step: int, exc: WorkflowUnavailable | NondeterminismError
) -> JobEnd:
    """This process cannot load the run's workflow (a worker started elsewhere, a missing --path, an
    allow-list, a module whose import raises, a workflow or node renamed by a deploy), or its code
    left an answer the journal holds unconsumed (an interrupt renamed by a deploy): give the
    activation back, queued, for the reconciler to enqueue again in a few seconds, with the error
    on the run's stream (``node.deferred``). A resume's answer stays in the journal: the replay
    finds it once a worker runs code that asks for it."""
    event = {"step": step, "reason": exc.message, "error": type(exc).__name__}
    store.release(run_id, fence, step, event, options.clock())
    what = "answer_unconsumed" if isinstance(exc, NondeterminismError) else "workflow_unavailable"
    log.error(what, error=exc.message, retry="the run stays queued and is enqueued again")
    return JobEnd.DEFERRED


def _since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


def _fail(store: Store, options: Options, run_id: str, fence: int, exc: BaseException, node: str | None) -> JobEnd:
    error = _error(exc, node)
    store.finish(run_id, fence, "failed", error, ("run.failed", {"error": error}), options.clock())
    log.error("run_failed", error=repr(exc), exc_info=exc)  # with its traceback: the worker's log alone may show it
    return JobEnd.FAILED


def _attempt(
    workflow: Workflow, ctx: NodeContext, data: dict[str, Any]
) -> Result | Pause | SpawnChild | SpawnChildren | Held | BaseException:
    """Run the node, retrying per its policy; return its result, its pause, or its final error."""
    spec = workflow.nodes[ctx.node]
    attempts = spec.retry.attempts if spec.retry else 1
    for number in range(1, attempts + 1):
        ctx.position = 0
        token = activate(ctx)
        try:
            view = before_attempt(ctx, data)  # what the node receives, once the features had their say
            value = spec.fn(copy.deepcopy(view))
            if inspect.isawaitable(value):
                value = _run_async(value)
            return as_result(value, ctx.node)
        except (Pause, SpawnChild, SpawnChildren, Held) as pause:
            # control flow, not an error: its traceback holds the node's frames, whose callers hold
            # it (a cycle that only the collector frees, a gen-0 pass every few jobs): dropped
            return pause.with_traceback(None)
        except (StoreUnavailable, StaleFence) as exc:
            # the store's trouble, not the node's: a hook's write that Redis did not confirm, or an
            # attempt that lost its claim. The attempt ends committing nothing; the run is not failed
            # (its lease lapses and the reconciler replays the node, or a newer attempt carries it)
            after_attempt(ctx, "stale" if isinstance(exc, StaleFence) else "lost")
            raise
        except ParkwayError as exc:
            return exc  # nondeterminism, invalid state: retrying cannot help
        except Exception as exc:
            retryable = spec.retry is not None and isinstance(exc, spec.retry.on) and number < attempts
            if not retryable:
                return exc
            attempt = _record_retry(ctx, exc, spec.retry.delay if spec.retry else 0, attempts)
            after_attempt(ctx, "retried")
            log.warning("node_retry", attempt=attempt, error=repr(exc))
            time.sleep(spec.retry.delay if spec.retry else 0)
        finally:
            deactivate(token)
    raise AssertionError("unreachable")


def _record_retry(ctx: NodeContext, exc: BaseException, delay: float, attempts: int) -> int:
    """Record that this attempt failed and is retried: a ``node.retry`` event (the attempt's number
    in the activation, counting those of earlier jobs its journal holds, the policy's attempts, the
    delay and the error with its traceback) and a journal entry (``r:<n>``), in one fence-checked
    step that counts a retry and a failure. The attempt's number."""
    attempt = 1 + sum(1 for name in ctx.journal if name.startswith(journal_fields.RETRY))
    error = _error(exc, ctx.node)
    event = {"node": ctx.node, "step": ctx.step, "attempt": attempt, "attempts": attempts, "delayS": delay,
             "error": error}
    entry = JournalEntry("retry", str(attempt), {"type": error["type"], "message": error["message"][:1000]})
    field = journal_fields.retry(attempt)
    ctx.store.write_entry(ctx.run_id, ctx.fence, ctx.step, "journal", field, entry, ("node.retry", event), ctx.clock(),
                     retried=ctx.workflow)
    ctx.journal[field] = entry
    return attempt


def _run_async(awaitable: Any) -> Any:
    async def wrap() -> Any:
        return await awaitable

    return asyncio.run(wrap())


def _advance(
    workflow: Workflow,
    node: str,
    step: int,
    next_node: str | None,
    data: dict[str, Any],
    options: Options,
    duration_ms: float,
    journal_written: bool,
) -> Advance:
    events: list[tuple[str, dict[str, Any]]] = [("node.completed", {"node": node, "step": step})]
    if next_node is None:
        events += [("run.completed", {"workflow": workflow.name, "output": data}), ("done", {"status": "completed"})]
    else:
        # the same job goes on to it at once (begin.lua writes the one a job's first node starts with)
        events.append(("node.started", {"node": next_node, "step": step + 1, "replay": False}))
    return Advance(
        data=data, next_node=next_node, output=data if next_node is None else None, events=events, now=options.clock(),
        workflow=workflow.name, duration_ms=duration_ms, journal_written=journal_written,
    )


def _park(
    store: Store,
    options: Options,
    ctx: NodeContext,
    pause: Pause,
    run: RunRecord,
    workflow: Workflow,
) -> None:
    run_ttl_ms = run.ttl_ms
    now = options.clock()
    on_park(ctx, pause)  # a feature may add to the request (a session: its session and anchor)
    policy = pause.on_expire
    if policy is None and workflow.on_expire is not None:
        policy = expiry_policy(pause.request, workflow.on_expire, pause.contract)
    version = workflow.version_of(ctx.node)
    ttl_ms = pause.ttl_ms or run_ttl_ms
    on_expire = _expiry_record(pause, policy, ttl_ms)
    request_id = pause.request_id or telemetry.mint_request_id(ctx.run_id, ctx.fence, "int_" + os.urandom(12).hex())
    token = tokens.mint(options.secret, ctx.run_id, request_id)
    interrupt = InterruptRecord(
        request_id=request_id,
        run_id=ctx.run_id,
        workflow=ctx.workflow,
        node=ctx.node,
        step=ctx.step,
        journal_field=pause.journal_field,
        request=pause.request,
        created_at=now,
        expires_at=now + ttl_ms,
        token_hash=tokens.hash_token(token),
        on_expire=on_expire,
        root_run_id=run.lineage[-1][0] if run.lineage else None,
        parent_run_id=run.lineage[0][0] if run.lineage else None,
        version=version,
        audience=pause.audience,
        tenant=run.tenant,
        capture=pause.capture if pause.capture is not None else workflow.capture_content,
    )
    _bind(request_id=request_id)
    public = pause.request.public()
    event = interrupt_event(interrupt, public)
    child = _new_child(options, ctx, pause.child, run) if pause.child is not None else None
    commit = Park(
        interrupt=interrupt, ttl_ms=ttl_ms, event=event, now=now, lineage=run.lineage, version=version,
        child=child,
    )
    store.park(ctx.run_id, ctx.fence, ctx.step, commit)
    log.info("node_parked", interrupt=pause.name or pause.journal_field)
    if child is not None:
        log.info("child_started", child_run_id=child.child.run_id, child_workflow=child.child.workflow)


def _spawn(store: Store, options: Options, ctx: NodeContext, spawn: SpawnChild, run: RunRecord) -> None:
    """Park the run on its child and create the child (with its first job), in one store call."""
    commit = _new_child(options, ctx, spawn.child, run)
    store.spawn(ctx.run_id, ctx.fence, ctx.step, commit)
    log.info("child_started", child_run_id=commit.child.run_id, child_workflow=commit.child.workflow)


def _fan_out(store: Store, options: Options, ctx: NodeContext, fan: SpawnChildren, run: RunRecord) -> None:
    """Start the fan-out's next children and park the run on its children, in one store call."""
    children = tuple(_new_child(options, ctx, ask, run) for ask in fan.children)
    outcome = store.fan_out(ctx.run_id, ctx.fence, ctx.step, FanOut(children, fan.live, fan.left, options.clock()))
    log.info("children_started", started=len(children), running=fan.live, left=fan.left, parked=outcome.waiting)


def _new_child(options: Options, ctx: NodeContext, ask: ChildAsk, run: RunRecord) -> Spawn:
    """The child run a node asked for, as the store creates it (``use_workflow``, ``use_first``)."""
    if isinstance(ask.workflow, str):
        ref, child = ask.workflow, options.loader(ask.workflow)
    else:
        child = ask.workflow
        ref = options.refer(child) if options.refer is not None else child.ref()
    child.validate()
    assert child.start is not None
    now = options.clock()
    new = NewRun(ask.run_id, child.name, ref, child.start, ask.input, run.ttl_ms, now)
    event = {"childRunId": ask.run_id, "workflow": child.name, "id": ask.name, "node": ctx.node}
    return Spawn(new, ask.journal_field, ((run.run_id, ctx.step), *run.lineage), event, ask.asked)


def _expiry_record(pause: Pause, policy: dict[str, Any] | None, ttl_ms: int) -> dict[str, Any] | None:
    """The policy as the reconciler applies it: for a default answer, the journal entry a resume
    would have written (so the replay finds it where an answer goes); for an escalation, the
    audiences still to ask, their TTL, how many were asked (``step``) and the record of its ``then``."""
    if policy is None or policy["action"] == "expire":
        return None
    if policy["action"] == "escalate":
        return {
            "action": "escalate",
            "to": policy["to"],
            "ttl_ms": policy["ttl_ms"] or ttl_ms,
            "step": 0,
            "then": _expiry_record(pause, policy["then"], ttl_ms),
        }
    if policy["action"] != "answer":
        return {"action": policy["action"]}
    entry = JournalEntry("interrupt", pause.name, policy["value"], pause.request.kind)
    return {"action": "answer", "entry": [entry.kind, entry.name, entry.value, entry.detail, entry.status]}


def interrupt_event(interrupt: InterruptRecord, public_request: dict[str, Any]) -> dict[str, Any]:
    return {
        "presentation": telemetry.presentation(public_request),
        "optionCount": len(public_request.get("options") or ()),
        "requestId": interrupt.request_id,
        "id": interrupt.hook_name or None,
        "workflow": interrupt.workflow,
        "node": interrupt.node,
        "step": interrupt.step,
        "input": public_request,
        "createdAt": interrupt.created_at,
        "expiresAt": interrupt.expires_at,
    } | ({"audience": interrupt.audience} if interrupt.audience else {}) | (
        {"runId": interrupt.run_id, "rootRunId": interrupt.root_run_id, "parentRunId": interrupt.parent_run_id}
        if interrupt.root_run_id
        else {}
    )


def _error(exc: BaseException, node: str | None) -> dict[str, Any]:
    return {
        "message": str(exc) or type(exc).__name__,
        "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "traceback": "".join(tb.format_exception(exc))[-20_000:],
        "node": node,
    }
