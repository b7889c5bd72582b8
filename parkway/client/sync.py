"""What applications call: start, resume, list_interrupts, get_run, stream, wait (:class:`Parkway`).

Each call is documented here; the longer paths live beside it in the package: the resume path in
``answering.py`` (read the token, check the answer, make the record, commit: one pass), the listings
in ``listings.py``, and what the client returns in ``views.py``."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

from ..adapters.redis.formats import Decision as FormatDecision
from ..adapters.redis.formats import deployment_decision, gates_of
from ..backend import Backend, build_backend
from ..config import Settings, check_ttl
from ..runtime import features, kinds, links, telemetry, tokens
from ..runtime.answers import parse_resume_metadata
from ..runtime.authority import RANK, Caller, Door, Origin, check_reaches
from ..runtime.cancel import cancel_run
from ..runtime.clock import now_ms
from ..runtime.errors import (
    InterruptNotFound,
    ParkwayError,
    RunNotFound,
    ValidationError,
    WaitTimeout,
)
from ..runtime.hooks import CHILD_SEPARATOR
from ..runtime.listing import ListingQuery, RunsQuery
from ..runtime.loading import split_ref
from ..runtime.logger import get_logger
from ..runtime.protocol import (
    CancelOutcome,
    CancelResult,
    DeploymentStatus,
    Event,
    Interrupt,
    InterruptPage,
    ResumeOrStartResult,
    ResumeOutcome,
    ResumeResult,
    Run,
    RunPage,
    RunStatus,
    check_depth,
    check_event_id,
    check_id,
    check_name,
    minted_run_id,
    scoped_id,
)
from ..runtime.store import (
    Answer,
    ForkOutcome,
    InterruptQuery,
    InterruptRecord,
    NewRun,
    ResumeCommit,
    RunRecord,
    StoredEvent,
)
from ..runtime.workflow import Workflow
from .answering import Answering, check_text
from .listings import Listings
from .views import KNOWN_INTERRUPTS, ReadInterrupts, interrupt_view, read_window, run_view
from .views import ends_stream as ends_stream  # parkway.http.app imports it from here

if TYPE_CHECKING:
    from ..runtime.deploy_check import DeployCheck

log = get_logger()

class Parkway:
    """A handle on one parkway deployment: a Redis with workers, or embedded (the same store
    and worker class on an in-process Redis, with the worker on a thread of this process).

    >>> pw = Parkway()                      # embedded, or PARKWAY_REDIS_URL if set
    >>> pw = Parkway(Settings(redis_url="redis://localhost:6379/0"))
    """

    def __init__(self, settings: Settings | None = None, *, backend: Backend | None = None) -> None:
        self.settings = settings or (backend.settings if backend else Settings.from_env())
        self.backend = backend or build_backend(self.settings)
        self.store = self.backend.store
        read = ReadInterrupts(KNOWN_INTERRUPTS)  # answered without a lookup: see ``resume``
        self._listings = Listings(self.store, self.backend.options.secret, read)
        self._answering = Answering(self.store, self.backend.options, self.settings.modules, read, self._dispatch)

    # --- runs -----------------------------------------------------------

    def start(
        self,
        workflow: Workflow | str,
        input: Mapping[str, Any] | None = None,
        *,
        run_id: str | None = None,
        ttl_ms: int | None = None,
        tenant: str | None = None,
        owner: str | None = None,
        origin: Origin = "system",
    ) -> str:
        """Start a run of ``workflow`` (a Workflow or ``"module:attribute"``); return its run id.

        ``tenant`` (a name) marks the run as one tenant's: its interrupts carry it, a listing filters
        on it (``list_interrupts(tenant=)``), and over HTTP a key bound to a tenant sees only its own.
        A tenant's run ids are scoped by it: ``run_id="order-1"`` with ``tenant="acme"`` starts run
        ``acme~order-1`` (the id returned; another tenant's ``order-1`` is another run), and a random
        id is ``acme~run_<26 base32 characters>``.
        ``owner`` (an id) makes it one user's, and ``origin`` records the rank of who started it
        (``system``, ``machine``, ``frontend``): both are written on the run and its summary, and
        the HTTP API's role table reads them there (docs/concepts/authority.md).

        A ``run_id`` that is taken raises ValidationError, unless it is this very start sent again
        (the same workflow, input, tenant, owner and origin: a retry after an unknown outcome),
        which returns the run and starts nothing more."""
        return self._start(workflow, input, run_id, ttl_ms, None, tenant, owner, origin)

    def _start(
        self,
        workflow: Workflow | str,
        input: Mapping[str, Any] | None,
        run_id: str | None,
        ttl_ms: int | None,
        restarted_from: str | None,
        tenant: str | None = None,
        owner: str | None = None,
        origin: str = "system",
    ) -> str:
        wf, ref = self.workflow_ref(workflow)
        if input is not None and not isinstance(input, Mapping):
            raise ValidationError(f"run input must be a dict, not {type(input).__name__}")
        check_depth(input, "run input")
        if tenant is not None:
            check_name(tenant, "tenant")
        if owner is not None:
            check_name(owner, "owner")
        run_id = _new_run_id(run_id, tenant)
        ttl = check_ttl(ttl_ms, error=ValidationError) if ttl_ms is not None else self.settings.ttl_ms
        if origin not in RANK:
            raise ValidationError(f"origin is one of {sorted(RANK)}, not {origin!r}")
        assert wf.start is not None
        new = NewRun(run_id, wf.name, ref, wf.start, dict(input or {}), ttl, now_ms(), restarted_from, tenant,
                     owner=owner, origin=origin)
        if not self.store.create_run(new):
            self._dispatch(run_id, 0, 0)
        log.info("run_started", run_id=run_id, workflow=wf.name, restarted_from=restarted_from)
        return run_id

    def fork(
        self,
        run_id: str,
        *,
        step: int,
        new_run_id: str | None = None,
        input: Mapping[str, Any] | None = None,
    ) -> str:
        """Re-open activation ``step`` of run ``run_id`` as a new run; return the new run's id.

        The new run starts at the node that step ran (0 is the first), with the data the step
        started with (``input=`` lays values over it), and runs on from there as any run does: its
        pauses get tokens of their own. Its ``run.started`` event records ``forkedFrom`` (the old
        run and step). The old run is only read: its tokens keep answering it, and die with it.
        Workflow state (``use_workflow_state``) is not carried over. The new run is the old one's
        tenant's, and ``new_run_id`` is scoped by it as ``start``'s. Refused with a clear error: an
        unknown run (RunNotFound), one whose records expired (only its summary is left), a child
        run (fork its root), a step the run has not reached, a taken ``new_run_id``.
        """
        check_id(run_id, "run id")
        if CHILD_SEPARATOR in run_id:
            raise ValidationError(f"run {run_id} is a child run (or a session's): fork its root run instead",
                                  run_id=run_id)
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValidationError(f"fork step must be a non-negative integer, not {step!r}", run_id=run_id)
        if input is not None and not isinstance(input, Mapping):
            raise ValidationError(f"fork input must be a dict, not {type(input).__name__}", run_id=run_id)
        check_depth(input, "fork input")
        record = self.store.get_run(run_id, now_ms())
        if record is None:
            raise RunNotFound(f"no run {run_id!r}", run_id=run_id)
        new_id = _new_run_id(new_run_id, record.tenant)
        colocated = getattr(self.store, "colocated", None)  # sharded: the new run lives in the old one's bucket
        while new_run_id is None and colocated is not None and not colocated(run_id, new_id):
            new_id = _new_run_id(None, record.tenant)
        data = self.store.fork_point(run_id, step) if record.ref else None  # what the script re-checks
        data = {**(data or {}), **(input or {})}
        new = NewRun(
            new_id, record.workflow, record.ref, "", data, record.ttl_ms, now_ms(),
            tenant=record.tenant, forked_from=(run_id, step),
        )
        done = self.store.fork(new, step)
        if done.outcome != "forked":
            raise _fork_refused(done, run_id, step, new_id)
        if not done.handed:
            self._dispatch(new_id, 0, 0)
        log.info("run_forked", run_id=new_id, forked_from=run_id, step=step)
        return new_id

    def gated_step(self, run_id: str, step: int) -> int:
        """The step a fork of ``run_id`` at ``step`` re-opens so that no answer is skipped: the last
        gate before ``step`` (its question is asked again), else ``step`` itself. A gate is an
        activation whose interrupt ended, or in which a run below (``use_workflow``,
        ``use_workflows``, a ``use_first`` child, at any depth) paused: the runs below start again
        with it. Past activations never change, so this read needs no lock."""
        check_id(run_id, "run id")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValidationError(f"fork step must be a non-negative integer, not {step!r}", run_id=run_id)
        gates = self.store.gate_steps(run_id, step)
        return gates[-1] if gates else step

    def workflow_ref(self, workflow: Workflow | str) -> tuple[Workflow, str]:
        """The workflow and the reference workers find it by; refused now if workers would refuse it
        (``start``, a session's agent)."""
        if isinstance(workflow, Workflow):
            workflow.validate()
            if self.backend.workflows is not None:  # embedded: defined anywhere, even in __main__
                return workflow, self.backend.workflows.register(workflow)
            ref = workflow.ref()
            self.settings.modules.check(split_ref(ref)[0])  # workers would refuse it: say so now
            return workflow, ref
        if isinstance(workflow, str):
            return self.settings.modules.load(workflow), workflow
        raise ValidationError(f"start() takes a Workflow or 'module:attribute', not {type(workflow).__name__}")

    @property
    def sessions(self) -> Any:
        """Sessions: trees of messages answered by an agent workflow (a
        :class:`parkway.sessions.Sessions` over this client: the ``sessions`` feature's part of it,
        ``parkway.runtime.features``)."""
        return features.facet("sessions", self)

    def get_run(self, run_id: str) -> Run:
        """The run's current state; ``expired`` once its records are past the TTL."""
        check_id(run_id, "run id")
        now = now_ms()
        record = self.store.get_run(run_id, now)
        if record is None:
            raise RunNotFound(f"no run {run_id!r}", run_id=run_id)
        interrupt = None
        if record.waiting_on and (record.waiting_on.startswith("child:") or record.waiting_on == "children"):
            # waiting on a child run: the interrupt its tree waits on, if any (the listing follows it)
            below = self.store.list_interrupts(InterruptQuery(run_id=run_id, limit=1, now=now)).items
            interrupt = self._interrupt(below[0], include_token=False) if below else None
        elif record.waiting_on:
            found = self.store.get_interrupt(run_id, record.waiting_on)
            interrupt = self._interrupt(found, include_token=False) if found else None
        return run_view(record, interrupt)

    def wait(self, run_id: str, *, timeout: float = 30.0) -> Run:
        """Block until the run is waiting for a person or finished; raise WaitTimeout after ``timeout`` s.
        A run waiting on a child run counts as waiting for a person once an interrupt of its tree is open.

        When Redis stops answering it raises StoreUnavailable within 15 s (the store's bound),
        which can be after ``timeout`` if that is shorter: a call in flight is not cut short.
        """
        deadline = time.monotonic() + timeout
        after = "0"
        while True:
            run = self.get_run(run_id)
            if (run.status is RunStatus.WAITING and not self._on_child(run)) or run.status.finished:
                return run
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WaitTimeout(f"run {run_id} is still {run.status.value} after {timeout}s", run_id=run_id)
            events = self.store.read_events(run_id, after, max(1, int(min(remaining, 1.0) * 1000)), 100)
            if events:
                after = events[-1].id

    def _on_child(self, run: Run) -> bool:
        """Whether the run waits on a child run in which nobody has been asked anything yet."""
        if run.interrupt is not None:
            return False
        record = self.store.get_run(run.run_id, now_ms())
        waiting = (record.waiting_on or "") if record is not None else ""
        return waiting.startswith("child:") or waiting == "children"

    def stream(
        self,
        run_id: str,
        *,
        after: str = "0",
        until: Literal["done", "settled"] = "done",
        timeout: float | None = None,
    ) -> Iterator[Event]:
        """Yield the run's events from position ``after``.

        Ends after ``done`` (or, with ``until="settled"``, also after an ``interrupt``);
        raises WaitTimeout when ``timeout`` seconds pass first, or StoreUnavailable when Redis
        stops answering (within 15 s, as ``wait``). Interrupt events carry their ``resumeToken``.
        """
        check_id(run_id, "run id")
        check_event_id(after)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            for stored in self.store.read_events(run_id, after, read_window(run_id, deadline, timeout), 100):
                after = stored.id
                yield self.event(run_id, stored)
                if ends_stream(stored.type, until):
                    return

    def event(self, run_id: str, stored: StoredEvent) -> Event:
        """A stored event as clients see it: an interrupt event carries its resume token."""
        data = dict(stored.data)
        if stored.type == "interrupt" and "requestId" in data:
            # a child's interrupt on an ancestor's stream: the token names the child run
            owner = data.get("runId") or run_id
            data["resumeToken"] = tokens.mint(self.backend.options.secret, owner, data["requestId"])
        return Event(id=stored.id, type=stored.type, run_id=run_id, ts=stored.ts, data=data)

    # --- interrupts -----------------------------------------------------

    def resume(
        self,
        token: str,
        *,
        selected: Any = None,
        value: Any = None,
        request_id: str | None = None,
        responder: str | None = None,
    ) -> ResumeResult:
        """Answer the interrupt ``token`` names, exactly once.

        Returns ``accepted``, ``already_resolved``, ``expired`` or ``unknown``.
        An answer that does not fit the request raises InvalidAnswer and the
        interrupt stays open with the same token. The same answer sent again with the same token
        (a retry after an unknown outcome) reads ``accepted`` and commits nothing twice; another
        answer reads ``already_resolved``.

        An interrupt this client has listed (or looked up) lately is checked against the request
        as it read it, and answered in one round trip; any other is looked up first (two).
        """
        prepared = self.prepare_answer(
            token, selected=selected, value=value, request_id=request_id, responder=responder, again=True
        )
        if isinstance(prepared, ResumeResult):
            return prepared
        return self._answering.commit(prepared)

    def prepare_answer(
        self,
        token: str,
        *,
        selected: Any = None,
        value: Any = None,
        request_id: str | None = None,
        responder: str | None = None,
        fresh: bool = False,
        again: bool = False,
    ) -> Answer | ResumeResult:
        """``resume`` up to its commit: the answer checked against the interrupt the token names,
        ready for the store (``store.resume``, or a session script that delivers it in its own
        step), or the outcome that says why there is none. Raises InvalidAnswer as ``resume`` does.
        ``fresh``: read the interrupt from the store, not as this client listed it. ``again``: an
        interrupt answered already is prepared as well (``already_resolved`` only for an answer that
        does not fit it), so that the commit can tell the same answer sent again (a retry after an
        unknown outcome: it reads ``accepted``) from another one."""
        return self._answering.prepare(
            token, selected=selected, value=value, request_id=request_id, responder=responder, fresh=fresh,
            again=again,
        )

    def answer_committed(self, answer: Answer, commit: ResumeCommit) -> None:
        """After an answer's commit (by ``resume`` or a session script): forget the interrupt as
        read, and enqueue the replay when the store did not hand it off."""
        self._answering.committed(answer, commit)

    def resume_or_start(
        self,
        token: str,
        *,
        selected: Any = None,
        value: Any = None,
        request_id: str | None = None,
        responder: str | None = None,
        input: Mapping[str, Any] | None = None,
        workflow: Workflow | str | None = None,
        tenant: str | None = None,
    ) -> ResumeOrStartResult:
        """Answer the interrupt ``token`` names, or, if it expired, start the run again.

        While the interrupt can be answered this is ``resume`` (``resumed``; an answer that does not
        fit raises InvalidAnswer). When the answer gets ``expired``, a new run of the same workflow
        starts from the same input (``input=`` replaces it), with the old run's TTL; its
        ``run.started`` event carries ``restartedFrom`` (the old run id): it was started, not
        resumed, and asks its questions again (the answer is not carried over). Returns ``started``
        with the new ``run_id``. Once the old run's records are past their TTL only its summary is
        left, without workflow or input: pass ``workflow=`` and ``input=`` then. A child run's
        expired interrupt is not started again as a root: the outcome stays ``expired``.
        ``already_resolved`` and ``unknown`` start nothing. The new run is the old one's: its tenant,
        owner and origin, read from the old run's summary (which outlives its records); ``tenant=``
        is the tenant when the summary names none (the caller's, over HTTP).
        """
        if tenant is not None:
            check_name(tenant, "tenant")
        if input is not None and not isinstance(input, Mapping):
            raise ValidationError(f"run input must be a dict, not {type(input).__name__}")
        result = self.resume(token, selected=selected, value=value, request_id=request_id, responder=responder)
        if result.outcome is not ResumeOutcome.EXPIRED or result.run_id is None or CHILD_SEPARATOR in result.run_id:
            outcome = "resumed" if result.accepted else result.outcome.value
            return ResumeOrStartResult.model_validate(
                {"outcome": outcome, "run_id": result.run_id, "request_id": result.request_id}
            )
        old = result.run_id
        record = self.store.get_run(old, now_ms())
        kept = record is not None and bool(record.ref)  # the run's records, not only its summary
        target = workflow if workflow is not None else (self._workflow_of(record.ref) if record and kept else None)
        start_input = input if input is not None else (record.input if record and kept else None)
        if target is None or start_input is None:
            raise ValidationError(
                f"run {old} expired and its records are gone (only its summary is kept): "
                "pass workflow= and input= to start it again",
                run_id=old,
            )
        # the new run is the old one's (its summary keeps whose it was after its records expired)
        run_id = self._start(
            target, start_input, None, record.ttl_ms if record and kept else None, old,
            (record.tenant if record else None) or tenant, record.owner if record else None,
            (record.origin if record else None) or "system",
        )
        log.info("run_restarted", run_id=run_id, restarted_from=old, request_id=result.request_id)
        return ResumeOrStartResult(outcome="started", run_id=run_id, request_id=result.request_id, restarted_from=old)

    def _workflow_of(self, ref: str) -> Workflow:
        """The workflow a run records by ``ref``, found as workers find it (embedded: also one
        registered in this process)."""
        return self.backend.options.loader(ref)

    def cancel_interrupt(
        self,
        token: str,
        *,
        reason: str | None = None,
        responder: str | None = None,
        request_id: str | None = None,
    ) -> ResumeResult:
        """Cancel the interrupt ``token`` names instead of answering it.

        The node replays and its ``use_interrupt`` raises InterruptCancelled (catch it
        to take a "denied" path; uncaught, the run ends ``cancelled``). Outcomes are
        those of ``resume``.
        """
        check_text(reason, "reason", 1000)
        found = self._answering.lookup(token, request_id, responder)
        if isinstance(found, ResumeResult):
            return found
        return self._answering.commit(self._answering.cancellation(found, reason, responder))

    def cancel(self, run_id: str, *, reason: str | None = None, responder: str | None = None) -> CancelResult:
        """Cancel a run: it ends ``cancelled`` now, and the result says so (``status``).

        A queued or running run ends at once (a job still executing it can no longer commit). A
        waiting run has its interrupt cancelled (its token then reads ``already_resolved``) and ends
        with it (past the interrupt's deadline, before the reconciler applies its policy, the run
        ends all the same and the interrupt is recorded expired): its node does not replay, so
        nothing catches the cancellation (to let the node decide, cancel the interrupt instead:
        ``cancel_interrupt``). A run with runs below it (the child it waits on, ``use_workflow``;
        the child racing its interrupt, ``use_first(child=...)``, even once an answer won; its
        fan-out's children, ``use_workflows``, whatever it is doing between them) ends first, with
        every run of its tree below it that does not wait on a question in the same step, then has
        the questions below cancelled, down the tree: no node of the tree begins or replays once
        this returns, and every run of it records ``reason`` and ``responder``. A
        session's branch run held while its branch is parked ends ``cancelled`` at once. A finished
        run is left alone (``already_resolved``, with its status, as a second answer of an interrupt;
        the word was ``already_finished`` before).
        """
        check_id(run_id, "run id")
        check_text(reason, "reason", 1000)
        check_text(responder, "responder", 200)
        result = cancel_run(self.store, run_id, reason, responder, now_ms)
        if result.outcome is CancelOutcome.CANCELLED:
            log.info("run_cancelled", run_id=run_id, responder=responder)
        return result

    def resume_message(self, message: Mapping[str, Any], *, responder: str | None = None) -> ResumeResult:
        """Resume from a chat message's ``metadata.resume``: ``{token, requestId, selected | choice |
        choices | value}`` answers; ``{token, requestId, cancel: true, reason?}`` cancels the request
        (as ``cancel_interrupt``), and wins over an answer in the same message."""
        args = parse_resume_metadata(message)
        if args.cancel:
            return self.cancel_interrupt(
                args.token, reason=args.reason, responder=responder, request_id=args.request_id
            )
        return self.resume(
            args.token, selected=args.selected, value=args.value, request_id=args.request_id, responder=responder
        )

    def list_interrupts(
        self, query: ListingQuery | None = None, /, *, caller: Caller | None = None, **keywords: Any
    ) -> InterruptPage:
        """Pending, unexpired interrupts across runs, a page at a time (pass ``next_cursor`` on).

        The listing is a :class:`~parkway.runtime.listing.ListingQuery`, given as one or as its
        fields' keywords (``list_interrupts(workflow="approval", limit=10)``): ``workflow``,
        ``run_id``, ``order`` (``newest`` or ``expiring``), ``limit`` (up to 1,000), ``cursor``,
        ``include_tokens``, ``wait_ms``, ``audience``, ``tenant``, ``session``, ``created_after``,
        ``created_before``, ``status``, ``workflow_prefix``, ``search``; each is checked as the
        query is built (ValidationError).

        Filters: ``audience`` (who is asked now: escalations move an interrupt between audiences),
        ``tenant`` (of the run, ``start(tenant=)``), ``session`` (a session's branch runs), each read
        from an index of its own; ``created_after`` / ``created_before`` (epoch ms: created at or
        after, strictly before) bound the interrupts' creation time. Filters combine; with
        ``audience``, ``tenant`` or ``session`` the order is ``newest``.

        ``status`` (default ``pending``): ``resolved``, ``cancelled`` or ``expired`` lists instead the
        interrupts that ended so within the retention of run summaries, newest end first (``order``
        must then be ``newest``; no ``wait_ms``; no tokens: they answer nothing; by ``workflow`` or
        ``run_id`` only, not the filters above), each with its lifecycle record; with ``run_id``, that
        run's.

        With ``wait_ms`` (up to 30,000), a page that would be empty waits instead, up to that long,
        for a run matching ``workflow`` and ``run_id`` to pause, then lists again: no polling. It
        returns as soon as the page has items, else empty after ``wait_ms``. A pause of another
        workflow or run does not end the wait; one of another tenant than the listing's does not
        even wake it. In ``newest`` order a cursor pages to older
        interrupts, which a new pause never is: wait without a cursor to learn of new pauses.

        ``caller`` (the HTTP API's): only the interrupts it may see (``parkway.runtime.authority``),
        filtered before paging, so a page holds up to ``limit`` of them and its cursor follows one
        of them. A caller bound to a tenant (every user) reads its tenant's index (``newest``
        order), never another tenant's interrupts; asking for another tenant gives an empty page.
        One request reads at most ``READ_BUDGET`` (2,000) interrupts to fill a page: past it the
        page ends short with ``budget_reached`` and a cursor at the last position read. Cursors are
        opaque and signed (``parkway.runtime.cursors``): pass ``next_cursor`` on as it is.

        Over shards (``PARKWAY_SHARDS``), a shard that does not answer within half a second is left
        out and named in ``missing_shards``: the page holds what the others hold.

        ``workflow_prefix`` (workflows whose name starts with it) and ``search`` (a question holding
        it, case ignored), each up to 200 characters, are read from the page the indexes give and
        filtered before paging as ``caller`` is: a page may then hold fewer than ``limit`` items
        while its cursor still goes on.
        """
        return self._listings.interrupts(ListingQuery.of(query, keywords), caller)

    def list_watching(self, query: ListingQuery, /, *, caller: Caller | None = None) -> tuple[InterruptPage, str]:
        """``list_interrupts(query)`` once, without waiting, and the position of the pause feed read
        just before that listing: a caller that waits by itself (the HTTP server, asynchronously, many
        listings on one connection) waits for a feed entry past that position, then lists again (a
        pause made since the listing is always past it)."""
        return self._listings.watching(query, caller)

    def list_runs(self, query: RunsQuery | None = None, /, *, caller: Caller | None = None, **keywords: Any) -> RunPage:
        """Runs, newest first, a page at a time (pass ``next_cursor`` on), from the store-wide run
        index the scripts that create runs write (roots, children, forks, sessions' branch runs),
        kept while their summary lasts (the run's TTL and then the retention).

        The listing is a :class:`~parkway.runtime.listing.RunsQuery`, given as one or as its fields'
        keywords: ``status`` (a ``RunStatus`` value: a live run's is its record's, ``queued``,
        ``running`` or ``waiting``), ``workflow`` (exact), ``workflow_prefix``, ``tenant``,
        ``created_after`` / ``created_before`` (epoch ms: created at or after, strictly before),
        ``limit`` (up to 1,000), ``cursor``.

        ``caller`` (the HTTP API's): only the runs it may read (``parkway.runtime.authority``: a
        user's key its own runs, a key bound to a tenant that tenant's), filtered as the other
        filters are, before paging. A page holds up to ``limit`` runs; one read reads at most 5,000
        index entries, so a narrow filter over many runs may give a short (even empty) page whose
        ``next_cursor`` goes on. Cursors are opaque and signed (``parkway.runtime.cursors``).
        """
        return self._listings.runs(RunsQuery.of(query, keywords), caller)

    def check_run(self, run_id: str, caller: Caller, door: Door = "read") -> RunRecord | None:
        """Raise RunNotFound (as for no run: another tenant's run ids are no oracle) unless ``caller``
        may pass ``door`` of run ``run_id``, by the tenant and owner written on the run (or on its
        summary, after its records expired) when it was created: see :mod:`parkway.runtime.authority`.
        A run with neither record left reaches only an unbound system caller. Returns the record read."""
        check_id(run_id, "run id")
        if not isinstance(caller, Caller):
            raise ValidationError("caller must be a parkway Caller")
        record = self.store.get_run(run_id, now_ms())
        if caller.role == "system" and caller.tenant is None:
            return record
        if record is None:
            raise RunNotFound(f"no run {run_id!r}", run_id=run_id)
        check_reaches(caller, run_id, record.tenant, record.owner, door)
        return record

    def get_interrupt(self, request_id: str, *, run_id: str | None = None) -> Interrupt:
        """An interrupt by its request id, open or ended, with its lifecycle record (``lifecycle``):
        for the retention of run summaries after its run's records are gone (then ``request`` is
        None unless its input is captured). A request id parkway minted carries its run id
        (``i<n>_<nonce>_<run id>``); one it did not (a session's, or a long child run's ``int_<hex>``)
        needs ``run_id=``. Raises InterruptNotFound when there is none (or no longer)."""
        check_id(request_id, "request id")
        if run_id is not None:
            check_id(run_id, "run id")
        else:
            run_id = telemetry.run_of_request(request_id)
            if run_id is None:
                raise ValidationError(
                    f"request id {request_id!r} does not carry its run id (parkway's own are i<n>_<nonce>_<run id>): "
                    "pass run_id=",
                    request_id=request_id,
                )
        record = self.store.read_interrupt(run_id, request_id, now_ms())
        if record is None:
            raise InterruptNotFound(f"no interrupt {request_id!r} in run {run_id!r} (or no longer: past the "
                                    "retention)", request_id=request_id, run_id=run_id)
        return self._interrupt(record, include_token=False)

    def lookup(self, token: str) -> Interrupt | ResumeResult:
        """The interrupt ``token`` can still answer, or the outcome a resume would get now
        (``already_resolved``, ``expired``, ``unknown``); changes nothing."""
        found = self._answering.lookup(token, None, None, fresh=True)
        if isinstance(found, ResumeResult):
            return found
        return self._interrupt(found.record, include_token=False)

    def answer_links(
        self, token: str, base_url: str, *, responder: str | None = None, ttl_ms: int | None = None
    ) -> dict[str, str]:
        """One signed URL per option of the choice interrupt ``token`` names (``{option id: url}``),
        for an e-mail or a chat message; served by ``parkway.http.app`` under ``/a/``. Each expires with the
        interrupt (or after ``ttl_ms``, if sooner), answers only its own option, and works once:
        see :mod:`parkway.runtime.links`."""
        check_text(responder, "responder", 200)
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValidationError("base_url must be an http:// or https:// URL")
        found = self.lookup(token)
        if isinstance(found, ResumeResult):
            raise ValidationError(f"the interrupt cannot be answered any more ({found.outcome.value})")
        options = kinds.get(found.asked().kind).link_options(found.asked())
        if not options:
            raise ValidationError(f"answer links need a choice with options, not a {found.asked().kind} request")
        if ttl_ms is not None:
            check_ttl(ttl_ms, error=ValidationError)
        expires = found.expires_at if ttl_ms is None else min(found.expires_at, now_ms() + ttl_ms)
        secret = self.backend.options.secret
        return {
            option.id: f"{base_url.rstrip('/')}/a/"
            + links.mint(secret, links.AnswerLink(found.run_id, found.request_id, option.id, expires, responder))
            for option in options
        }

    def check_deploy(self, run_id: str, against: Workflow | str) -> DeployCheck:
        """Replay a waiting or queued run's current activation against ``against`` (a Workflow or
        ``"module:attribute"``), committing nothing: does the code deployed now still match what the
        run recorded? (see :mod:`parkway.runtime.deploy_check`)."""
        check_id(run_id, "run id")
        workflow = against if isinstance(against, Workflow) else self.settings.modules.load(against)
        from ..runtime.deploy_check import check_deploy  # its hooks and agents: not every client's needs

        return check_deploy(self.store, run_id, workflow, now_ms())

    def replay(self, run_id: str, against: Workflow | str) -> DeployCheck:
        """Deprecated: :meth:`check_deploy` (its name before; *replay* is the re-run a resume makes)."""
        warnings.warn("Parkway.replay is Parkway.check_deploy", DeprecationWarning, stacklevel=2)
        return self.check_deploy(run_id, against)

    def close(self) -> None:
        """Release what this handle holds: embedded, stop the in-process worker (runs still open
        are lost with the process anyway); on Redis, close this process's connections."""
        self.backend.close()

    def __enter__(self) -> Parkway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def status(self) -> DeploymentStatus:
        """The deployment at this moment: the workers RQ has registered on parkway's queue, what runs
        now, what waits to run (queue and outbox, and how long the oldest job has waited), the runs
        ended by status, and the pending interrupts by workflow. Three round trips, and one per
        registered worker; for an operator's look (``parkway status``), not a hot path."""
        now = now_ms()
        tallies = self.store.tallies(now)
        dispatcher = self.backend.dispatcher
        counters = tallies.counters
        oldest = tallies.oldest_outstanding_at
        return DeploymentStatus(
            queue=self.settings.queue,
            workers=tuple(dispatcher.workers()),
            running=tallies.running,
            queued=dispatcher.queued(),
            outstanding=tallies.outstanding,
            oldest_outstanding_ms=None if oldest is None else max(0, now - oldest),
            runs_finished={s.value: _all_workflows(counters, f"runs:{s.value}") for s in RunStatus if s.finished},
            attempts=counters.get("attempts", 0),
            recovered=counters.get("recovered", 0),
            pending=tallies.pending,
            notices=tallies.notices,
            notices_dead=tallies.notices_dead,
        )

    def formats(self) -> FormatDecision:
        """Which stored format the writers create records in now, and why: the live processes and
        the formats each reads, those the newest format waits on (``parkway upgrade --check``;
        adapters/redis/formats.py). One read per shard, and RQ's worker registry."""
        return deployment_decision(gates_of(self.store))

    def announce_formats(self, role: str) -> None:
        """Announce now, and keep announcing, the stored formats this process reads (a server at its
        start: a client announces at its first write; adapters/redis/formats.py)."""
        for gate in gates_of(self.store):
            gate.announce(role=role)

    def drain(self, timeout: float = 60.0) -> None:
        """Embedded only: block until the in-process worker has run every queued job (and any job
        they queued); raise WaitTimeout after ``timeout`` s. Without embedded mode, a no-op."""
        drain = getattr(self.backend.dispatcher, "drain", None)
        if drain is not None:
            drain(timeout)

    # --- helpers --------------------------------------------------------

    def _dispatch(self, run_id: str, step: int, fence: int) -> None:
        self.backend.dispatcher.enqueue(run_id, step, fence)

    def _interrupt(self, record: InterruptRecord, *, include_token: bool) -> Interrupt:
        return interrupt_view(record, self.backend.options.secret, include_token=include_token)


def _new_run_id(run_id: str | None, tenant: str | None) -> str:
    """A new root run's id: the one given (checked) or a random one, scoped by the run's tenant
    (``<tenant>~<name>``: ``protocol.scoped_id``)."""
    if run_id is None:
        run_id = minted_run_id()
    elif CHILD_SEPARATOR in check_id(run_id, "run id"):
        raise ValidationError(f"a run id may not contain {CHILD_SEPARATOR!r}: it marks child and session runs")
    return scoped_id(run_id, tenant)


def _fork_refused(done: ForkOutcome, run_id: str, step: int, new_id: str) -> ParkwayError:
    """The error for a fork the store refused."""
    if done.outcome == "unknown":
        return RunNotFound(f"no run {run_id!r}", run_id=run_id)
    reason = {
        "expired": f"run {run_id} expired: only its summary is kept, and a fork needs its records",
        "child": f"run {run_id} is a child run: fork its root run instead",
        "range": f"run {run_id} has no step {step}: it can be forked at steps 0 to {done.current_step}",
        "lost": f"run {run_id} no longer holds the data its step {step} started with",
        "exists": f"run {new_id} already exists",
    }[done.outcome]
    return ValidationError(reason, run_id=run_id, step=step)


def _all_workflows(counters: Mapping[str, int], name: str) -> int:
    """A counter summed over its workflows (``<name>:<workflow>``, and ``<name>`` written before
    counters had a workflow)."""
    return sum(v for k, v in counters.items() if k == name or k.rpartition(":")[0] == name)


