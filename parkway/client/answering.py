"""The resume path, in the order it runs, in one place (``Parkway.resume``, ``prepare_answer``,
``cancel_interrupt``, ``lookup``, and a session script's answer)::

    read the token    ``lookup``: verified under the deployment's key, the interrupt it names (as
                      this client read it lately, else read from the store now), or the outcome
                      that says why there is none (``already_resolved``, ``expired``, ``unknown``)
    check the answer  ``check``: the workflow's code here replays the interrupt's version, and the
                      answer fits its request (its contract too); else ``refuse``
    make the record   ``answer_of``: the journal entry, the event, how the interrupt ended
    commit            ``commit``: one store call (the token spent, the answer recorded, the replay
                      enqueued), then ``committed``: the interrupt forgotten as read, the replay
                      enqueued if the store could not

An answer that does not fit an interrupt read earlier is refused only once the interrupt is read
again: one that has ended since gets its outcome, as from a lookup.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..runtime import telemetry, tokens
from ..runtime.answers import validate_answer
from ..runtime.clock import now_ms
from ..runtime.errors import CorruptRecord, InvalidAnswer, ValidationError, VersionNotReplayed, WorkflowError
from ..runtime.executor import Options, check_version
from ..runtime.loading import WorkflowModules
from ..runtime.logger import get_logger
from ..runtime.protocol import InterruptRequest, ResumeOutcome, ResumeResult, check_id
from ..runtime.store import Answer, InterruptRecord, JournalEntry, ResumeCommit, Store
from .views import ReadInterrupts

log = get_logger()

_LOOKUP_OUTCOMES = {
    "resolved": ResumeOutcome.ALREADY_RESOLVED,
    "cancelled": ResumeOutcome.ALREADY_RESOLVED,
    "expired": ResumeOutcome.EXPIRED,
}


def check_text(value: Any, what: str, limit: int) -> None:
    if value is not None and (not isinstance(value, str) or len(value) > limit):
        raise ValidationError(f"{what} must be a string of at most {limit} characters")


@dataclass(frozen=True)
class Found:
    """The pending interrupt a token names, as ``lookup`` found it."""

    record: InterruptRecord
    token_hash: str
    read_now: bool | None
    """True: read from the store now; False: as this client read it earlier; None: answered already
    (``lookup(resolved=True)``)"""


class Answering:
    """The resume path of one client: its ``store``, its deployment's ``options`` (the token key,
    the workflows' loader), the ``modules`` contracts load from, the interrupts it ``read`` last,
    and how it enqueues a replay (``dispatch``)."""

    def __init__(
        self, store: Store, options: Options, modules: WorkflowModules, read: ReadInterrupts,
        dispatch: Callable[[str, int, int], None],
    ) -> None:
        self.store = store
        self.options = options
        self.modules = modules
        self.read = read
        self.dispatch = dispatch

    def prepare(
        self, token: str, *, selected: Any, value: Any, request_id: str | None, responder: str | None,
        fresh: bool, again: bool,
    ) -> Answer | ResumeResult:
        """``Parkway.prepare_answer``: read the token, check the answer, make the record."""
        found = self.lookup(token, request_id, responder, fresh=fresh, resolved=again)
        if isinstance(found, ResumeResult):
            return found
        try:
            request, answer = self.check(found, selected, value)
        except (InvalidAnswer, VersionNotReplayed) as exc:
            return self.refuse(found, exc, token, request_id, responder)
        record = found.record
        entry = JournalEntry("interrupt", record.hook_name, answer, request.kind)
        event = {"requestId": record.request_id, "node": record.node, "responder": responder, "answer": answer}
        return self.answer_of(found, request_id, entry, event)

    def lookup(
        self, token: str, request_id: str | None, responder: str | None, *, fresh: bool = False,
        resolved: bool = False,
    ) -> Found | ResumeResult:
        """The pending interrupt a token names, or the outcome that says why there is none. An
        interrupt this client listed (or looked up) is taken as it read it, without reading it again,
        unless ``fresh``: an answer's commit checks that it is still the same pending interrupt (its
        request id, status and expiry) and says why not, as a lookup would. ``resolved``: an
        interrupt answered already is returned too (``read_now`` None), not cached."""
        parsed = tokens.parse(token)
        run_id = parsed.run_id
        if request_id is not None:
            check_id(request_id, "request id")
        check_text(responder, "responder", 200)
        if not tokens.verify(self.options.secret, parsed):
            # not signed by this deployment's key: nothing to look up, and nothing to tell
            return ResumeResult(outcome=ResumeOutcome.UNKNOWN, run_id=run_id)
        if request_id is not None and request_id != parsed.request_id:
            raise InvalidAnswer(f"requestId {request_id!r} does not belong to this token", request_id=request_id)
        token_hash = tokens.hash_token(token)
        record = None if fresh else self.read.get(run_id, parsed.request_id)
        read_now: bool | None = record is None
        if record is None:
            lookup = self.store.lookup(run_id, token_hash, now_ms())
            record = lookup.interrupt
            if resolved and lookup.outcome == "resolved" and record is not None:
                self.read.forget(run_id, parsed.request_id)
                read_now = None
            elif lookup.outcome != "pending" or record is None:
                self.read.forget(run_id, parsed.request_id)
                outcome = _LOOKUP_OUTCOMES.get(lookup.outcome, ResumeOutcome.UNKNOWN)
                return ResumeResult(outcome=outcome, run_id=run_id, request_id=record.request_id if record else None)
            else:
                self.read.put(record)
        if request_id is not None and request_id != record.request_id:
            raise InvalidAnswer(f"requestId {request_id!r} does not belong to this token", request_id=request_id)
        return Found(record, token_hash, read_now)

    def check(self, found: Found, selected: Any, value: Any) -> tuple[InterruptRequest, Any]:
        """The request and the answer as the node will receive it; raises VersionNotReplayed (the
        code here cannot replay the interrupt's version) or InvalidAnswer (it does not fit)."""
        record = found.record
        self.check_version(record)
        request = record.request  # validated where it was asked, and read back by the store's reader
        if request is None:
            state = "an answered" if found.read_now is None else "an open"
            raise CorruptRecord(f"{state} interrupt's record has no request", run_id=record.run_id)
        contract = self.modules.load_contract(request.contract_ref) if request.contract_ref else None
        return request, validate_answer(request, selected=selected, value=value, contract=contract)

    def refuse(
        self, found: Found, exc: InvalidAnswer | VersionNotReplayed, token: str, request_id: str | None,
        responder: str | None,
    ) -> ResumeResult:
        """An answer ``check`` refused: of an interrupt answered already, ``already_resolved`` (only
        the same answer sent again reads ``accepted``); of one this client read earlier and that has
        ended since, its outcome, as from a lookup; else ``exc`` is raised, and the interrupt stays
        open (its lifecycle record counts an InvalidAnswer)."""
        record = found.record
        if found.read_now is None:
            return ResumeResult(outcome=ResumeOutcome.ALREADY_RESOLVED, run_id=record.run_id,
                                request_id=record.request_id)
        now = now_ms()
        if not found.read_now:
            ended = self.lookup(token, request_id, responder, fresh=True)
            if isinstance(ended, ResumeResult):
                return ended
        if isinstance(exc, InvalidAnswer):
            failure = telemetry.failure(now, "InvalidAnswer", exc.message, record.capture)
            self.store.refuse(record.run_id, found.token_hash, record.request_id, failure, now)
        raise exc

    def cancellation(self, found: Found, reason: str | None, responder: str | None, *, dispatch: bool = True) -> Answer:
        """A cancellation, recorded where the answer would go: the replay's use_interrupt raises (with
        ``dispatch=False``, no job replays the node: the caller ends the run)."""
        record = found.record
        entry = record.cancellation(reason)
        event = {"requestId": record.request_id, "node": record.node, "responder": responder, "reason": reason}
        return self.answer_of(found, None, entry, event, dispatch=dispatch)

    def answer_of(
        self, found: Found, request_id: str | None, entry: JournalEntry, event: dict[str, Any], *,
        dispatch: bool = True,
    ) -> Answer:
        """What the store commits: the entry, the event, and how the interrupt ended (its lifecycle)."""
        record, now = found.record, now_ms()
        cancelled = entry.status == "cancelled"
        end = telemetry.ended(
            "cancelled" if cancelled else "resumed",
            now,
            record.created_at,
            record.capture,
            responder=event.get("responder"),
            reason=event.get("reason"),
            answer=None if cancelled else entry.value,
        )
        return Answer(record, found.token_hash, request_id, entry, event, now, dispatch, end)

    def commit(self, answer: Answer) -> ResumeResult:
        """Commit the answer; the job that replays the node goes with it (the store enqueues it for
        the fence its commit wrote), or, from a store that cannot, is enqueued after."""
        run_id = answer.interrupt.run_id
        commit = self.store.resume(run_id, answer)
        self.committed(answer, commit)
        return ResumeResult(outcome=commit.outcome, run_id=run_id, request_id=commit.request_id)

    def committed(self, answer: Answer, commit: ResumeCommit) -> None:
        """After an answer's commit (here or by a session script): forget the interrupt as read, and
        enqueue the replay when the store did not hand it off."""
        run_id, record = answer.interrupt.run_id, answer.interrupt
        self.read.forget(run_id, record.request_id)  # answered now, or it says why it cannot be
        if commit.outcome is ResumeOutcome.ACCEPTED:
            if answer.dispatch and not commit.handed_off:
                self.dispatch(run_id, commit.step, commit.fence)
            log.info("resume_accepted", run_id=run_id, request_id=record.request_id, cancelled=answer.cancelled)

    def check_version(self, record: InterruptRecord) -> None:
        """Before an answer is committed: compare the version the interrupt was made under with the
        workflow's code here, if this process can load it (else the worker that replays checks).
        A difference is logged; a version the code does not replay raises VersionNotReplayed, and
        the token is not spent.

        The version is checked here AND by the worker (``executor._carry``), on purpose: the two
        answer different questions. Here: may this answer be accepted at all? Refusing before the
        token is spent means an answer is never taken for code that cannot replay it (the person is
        told now, the interrupt stays open for the right deployment). The worker's: can the code that
        actually runs this activation replay it? Only it knows (a rolling deploy, a client that cannot
        load the workflow, an answer committed by another surface), and it gives the activation back
        queued. Dropping this one would spend tokens on answers no worker can use; dropping the
        worker's would run unreplayable code. tests/test_versions.py holds both."""
        if not record.version or not record.ref:
            return
        try:
            workflow = self.options.loader(record.ref)
        except WorkflowError:
            return
        if record.node in workflow.nodes:
            refused = check_version(workflow, record.run_id, record.node, record.version, "resume")
            if refused is not None:
                raise refused

