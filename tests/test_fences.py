"""The fence a resume moves a run to: once a resume is accepted the parked attempt's jobs are stale,
however resumes race and whenever a reader answers; a commit refused for its fence publishes nothing
(persist, then publish)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from parkway import (
    ResumeOutcome,
    RunStatus,
    Workflow,
    use_interrupt,
)
from parkway.errors import StaleFence
from parkway.runtime import executor, tokens
from parkway.runtime.protocol import InterruptRequest
from parkway.runtime.store import (
    Advance,
    InterruptRecord,
    JournalEntry,
    NewRun,
    Park,
)
from parkway.workers.reconciler import reconcile_once
from tests import flows
from tests.conftest import Harness, all_at_once
from tests.test_recovery import Recorder
from tests.test_ttls import _ERROR, _answer, _event_types, _fence, _now, _pending_lookup

counted = Workflow("counted")


@counted.node(start=True)
def counts_then_asks(data: dict[str, Any]) -> dict[str, Any]:
    """Counts every execution of its body, then asks for a color."""
    flows.count_effect(f"body:{data.get('tag', 'counted')}")
    answer = use_interrupt(flows.COLORS, id="q")
    return {"answer": answer}


def _create(harness: Harness, workflow: Workflow, data: dict[str, Any] | None = None) -> str:
    """A queued run whose job nobody enqueued (so the test runs its jobs by hand)."""
    run_id = "run_" + uuid.uuid4().hex
    start = workflow.start or ""
    harness.manual_store.create_run(NewRun(run_id, workflow.name, workflow.ref(), start, data or {}, 60_000, _now()))
    return run_id


def _execute(harness: Harness, run_id: str, step: int, fence: int) -> executor.JobEnd:
    """Run one job in this thread, as a worker would."""
    return executor.execute(harness.pw.store, harness.pw.backend.options, run_id, step, fence)


def test_jobs_of_the_parked_attempt_are_stale_once_a_resume_is_accepted(harness: Harness) -> None:
    """After an accepted resume, the job that began the parked attempt and a job carrying the fence
    the run held while parked both change nothing; the resume's own job carries the run on."""
    run_id = _create(harness, counted, {"tag": "fenced"})
    assert _execute(harness, run_id, 0, 0) is executor.JobEnd.WAITING
    parked_fence = _fence(harness, run_id)
    token, record = _pending_lookup(harness, run_id)
    # no hand-off: this test runs the resume's job itself (the embedded worker would race it)
    commit = harness.manual_store.resume(run_id, _answer(record, tokens.hash_token(token)))
    assert commit.outcome is ResumeOutcome.ACCEPTED and commit.fence > parked_fence
    events = _event_types(harness, run_id)

    for fence in (0, parked_fence):
        assert _execute(harness, run_id, 0, fence) is executor.JobEnd.STALE
    assert flows.effects["body:fenced"] == 1
    assert _event_types(harness, run_id) == events
    assert _execute(harness, run_id, commit.step, commit.fence) is executor.JobEnd.COMPLETED
    assert flows.effects["body:fenced"] == 2
    assert harness.pw.get_run(run_id).output == {"tag": "fenced", "answer": "red"}


def test_racing_resumes_then_a_stale_job_run_the_node_once_more_only(harness: Harness) -> None:
    """20 concurrent resumes (half with each answer) commit one; a job re-enqueued by hand for the
    fence the run held while parked then runs, is refused as stale, and the node body has run once
    to park and once to replay."""
    run_id = harness.start_and_run(counted, {"tag": "race"})
    parked_fence = _fence(harness, run_id)
    token = harness.token(run_id)
    colors = ["red" if i % 2 else "blue" for i in range(20)]
    sent = all_at_once(lambda i: (colors[i], harness.pw.resume(token, selected=colors[i]).outcome))
    assert len({c for c, o in sent if o is ResumeOutcome.ACCEPTED}) == 1, sent  # those that sent it read accepted
    assert [o for _, o in sent].count(ResumeOutcome.ALREADY_RESOLVED) == 10

    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
        harness.pw.backend.dispatcher.enqueue(run_id, 0, parked_fence)
        harness.run_jobs()
    stale = [e for e in logs if e["event"] == "job_stale" and e.get("run_id") == run_id]
    assert len(stale) == 1, "the job for the parked fence must run, and be refused"
    assert flows.effects["body:race"] == 2
    assert harness.pw.get_run(run_id).status is RunStatus.COMPLETED
    events = _event_types(harness, run_id)
    assert events.count("interrupt.resumed") == 1 and events.count("run.completed") == 1


def test_a_reader_that_resumes_the_instant_it_sees_the_interrupt_is_accepted(harness: Harness) -> None:
    """A reader in another thread resumes with the interrupt event's token the instant the event
    reaches it: the interrupt is already stored and pending, so every such resume is accepted."""
    for _ in range(3):
        run_id = "run_" + uuid.uuid4().hex
        outcomes: list[ResumeOutcome] = []

        def read(run_id: str = run_id, outcomes: list[ResumeOutcome] = outcomes) -> None:
            for event in harness.pw.stream(run_id, until="settled", timeout=10):
                if event.type == "interrupt":
                    outcomes.append(harness.pw.resume(event.data["resumeToken"], selected="red").outcome)

        reader = threading.Thread(target=read)
        reader.start()
        harness.pw.start(flows.one_choice, {}, run_id=run_id)
        harness.run_jobs()
        reader.join(timeout=15)
        assert outcomes == [ResumeOutcome.ACCEPTED]
        harness.run_jobs()
        assert harness.pw.get_run(run_id).output == {"picked": "red", "painted": "red"}


@pytest.mark.parametrize("commit", ["write_entry", "advance", "park", "finish"])
def test_a_commit_refused_for_its_fence_publishes_nothing(harness: Harness, commit: str) -> None:
    """A commit from an attempt that lost its lease (and so its fence) raises StaleFence, appends no
    event and opens no interrupt."""
    store = harness.pw.store
    run_id = _create(harness, counted)
    store.begin(run_id, 0, 0, _now(), _now() - 1)  # the zombie: began, then went silent
    assert reconcile_once(store, Recorder(), now=_now()).recovered == [run_id]
    events, now = _event_types(harness, run_id), _now()
    token_hash = uuid.uuid4().hex * 2
    request_id = "int_" + uuid.uuid4().hex[:24]
    record = InterruptRecord(
        request_id,
        run_id,
        counted.name,
        "counts_then_asks",
        0,
        "i:q",
        InterruptRequest.model_validate(flows.COLORS),
        now,
        now + 60_000,
        token_hash,
    )
    attempts: dict[str, Callable[[], Any]] = {
        "write_entry": lambda: store.write_entry(
            run_id, 0, 0, "journal", "@0", JournalEntry("emit", "x", None), ("data", {"data": {}}), now
        ),
        "advance": lambda: store.advance(
            run_id, 0, 0, Advance({}, None, {}, [("run.completed", {}), ("done", {"status": "completed"})], now)
        ),
        "park": lambda: store.park(run_id, 0, 0, Park(record, 60_000, {"requestId": request_id}, now)),
        "finish": lambda: store.finish(run_id, 0, "failed", _ERROR, ("run.failed", {}), now),
    }
    with pytest.raises(StaleFence):
        attempts[commit]()
    assert _event_types(harness, run_id) == events
    assert harness.pw.list_interrupts().items == ()
    assert store.lookup(run_id, token_hash, now).outcome == "unknown"
    assert store.get_run(run_id, now).status is RunStatus.QUEUED  # type: ignore[union-attr]
