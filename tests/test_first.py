"""use_first: the first of an answer, a timer and (when given) a child run wins; the losers are
cancelled cleanly and never fire later."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from parkway import Parkway, ResumeOutcome, RunStatus, Settings, ValidationError, use_first
from parkway.adapters.redis import keys, layout
from parkway.runtime.errors import RunNotFound, StaleFence
from parkway.runtime.hooks import child_run_id
from parkway.runtime.store import Answer, JournalEntry, NewRun, Park, Spawn
from parkway.workers.reconciler import reconcile_once
from tests import flows_fork, flows_model, indexes
from tests.conftest import SECRET, Harness
from tests.procs import Worker, wait_for


def _after_the_timer(harness: Harness, run_id: str, expires_at: int) -> None:
    time.sleep(max(0.0, expires_at / 1000 - time.time()) + 0.1)
    reconcile_once(harness.pw.store, harness.pw.backend.dispatcher)
    harness.run_jobs()
    harness.pw.wait(run_id, timeout=10)


def _types(harness: Harness, run_id: str) -> list[str]:
    return [e.type for e in harness.pw.store.read_events(run_id, "0", None, 1000)]


def test_the_answer_wins_and_the_timer_never_fires(harness: Harness) -> None:
    """Answered before the timer: First("interrupt", answer); past the timer's time a reconciler pass
    finds nothing to do and the run's events stay as they were."""
    run_id = harness.start_and_run(flows_model.races)
    event = harness.interrupt_event(run_id)
    assert harness.pw.resume(event["resumeToken"], selected="blue").accepted
    harness.run_jobs()
    harness.pw.wait(run_id, timeout=10)
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.COMPLETED and run.output == {"kind": "interrupt", "value": "blue"}, run
    before = _types(harness, run_id)
    _after_the_timer(harness, run_id, event["expiresAt"])
    assert _types(harness, run_id) == before and "interrupt.expired" not in before
    assert harness.pw.get_run(run_id).output == {"kind": "interrupt", "value": "blue"}


def test_the_timer_wins_and_the_interrupt_is_cancelled(harness: Harness) -> None:
    """Nobody answers: at the timer the node replays with First("timer"); the interrupt is recorded
    cancelled (its token reads already_resolved and answers nothing) and is listed nowhere."""
    run_id = harness.start_and_run(flows_model.races, {"timer": 1000})
    event = harness.interrupt_event(run_id)
    _after_the_timer(harness, run_id, event["expiresAt"])
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.COMPLETED and run.output["kind"] == "timer" and run.output["value"] is None, run
    fired = [e.data for e in harness.pw.store.read_events(run_id, "0", None, 100) if e.type == "interrupt.expired"]
    assert [f["action"] for f in fired] == ["timer"]
    assert harness.pw.resume(event["resumeToken"], selected="red").outcome is ResumeOutcome.ALREADY_RESOLVED
    assert harness.pw.list_interrupts().items == ()
    assert harness.pw.get_run(run_id).output["kind"] == "timer"


def test_use_first_checks_its_timer() -> None:
    """A timer under a second (or not an int) is a clear error."""
    for bad in (999, 1.5, True):
        with pytest.raises(ValidationError, match="timer_ms"):
            use_first({"kind": "text", "question": "?"}, timer_ms=bad, id="x")  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _knobs() -> Iterator[None]:
    flows_fork.knobs.clear()
    yield
    flows_fork.knobs.clear()


def _child(run_id: str) -> str:
    return child_run_id(run_id, 0, "pick")


def _parent_token(harness: Harness, run_id: str) -> str:
    event = next(e for e in harness.pw.store.read_events(run_id, "0", None, 100)
                 if e.type == "interrupt" and "runId" not in e.data)  # its own, not its child's
    return str(harness.pw.event(run_id, event).data["resumeToken"])


def _child_token(harness: Harness, run_id: str) -> str:
    return harness.token(_child(run_id))


def _later(harness: Harness) -> None:
    """A reconciler pass and every job it queues: what could still fire, fires now."""
    reconcile_once(harness.pw.store, harness.pw.backend.dispatcher)
    harness.run_jobs()


def test_one_step_parks_the_interrupt_and_starts_the_child(harness: Harness) -> None:
    """Before any worker runs the child, the parent waits on its interrupt (listed, answerable) and
    the child run exists, queued, with the parent's lineage; the parent's stream says both."""
    run_id = harness.start_and_run(flows_fork.racer, {"child": "asking"})
    assert harness.pw.get_run(run_id).status is RunStatus.WAITING
    assert [i.run_id for i in harness.pw.list_interrupts(workflow="racer").items] == [run_id]
    types = _types(harness, run_id)
    assert types.count("child.started") == 1 and types.count("interrupt") == 2  # its own, then the child's
    assert harness.pw.get_run(_child(run_id)).status is RunStatus.WAITING


def test_the_child_wins_and_the_interrupt_answers_nothing(harness: Harness) -> None:
    """A child that completes first: First("child", output); the interrupt is recorded cancelled, its
    token reads already_resolved, it is listed nowhere, and one child only was ever started."""
    run_id = harness.start_and_run(flows_fork.racer, {"child": "quick"})
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.COMPLETED and run.output == {"child": "quick", "kind": "child",
                                                                "value": {"a": 1, "b": 2, "sum": 3}}, run
    token = _parent_token(harness, run_id)
    assert harness.pw.resume(token, selected="red").outcome is ResumeOutcome.ALREADY_RESOLVED
    assert harness.pw.list_interrupts(workflow="racer").items == ()
    client = harness.pw.store.client  # type: ignore[attr-defined]
    request_id = _request_id(harness, run_id)
    assert client.hget(keys.run(run_id), layout.status_field(request_id, run_id)) == b"cancelled"
    # the lost interrupt left its indexes and its lifecycle record ended, as a timer's loss does
    for order in ("newest", "expiring"):
        assert indexes.count(client, keys.index(order, "racer")) == 0
    life = harness.pw.get_interrupt(request_id).lifecycle
    assert life is not None and (life.status, life.outcome, life.reason) == ("cancelled", "cancelled", "child")
    assert [i.request_id for i in harness.pw.list_interrupts(status="cancelled", workflow="racer").items] == [
        request_id
    ]
    _later(harness)
    assert _types(harness, run_id).count("child.started") == 1
    assert harness.pw.get_run(run_id).output["kind"] == "child"
    assert harness.pw.get_interrupt(request_id).lifecycle.ended_at == life.ended_at  # once
    # a replay whose commit was lost calls it again: it finds the record ended and changes nothing
    assert harness.pw.store.close_raced(run_id, life.ended_at + 5000) is False
    closed = client.zrange(keys.closed_index("cancelled", "racer"), 0, -1)
    assert len(closed) == 1 and harness.pw.get_interrupt(request_id).lifecycle.ended_at == life.ended_at


def _request_id(harness: Harness, run_id: str) -> str:
    event = next(e for e in harness.pw.store.read_events(run_id, "0", None, 100)
                 if e.type == "interrupt" and "runId" not in e.data)
    return str(event.data["requestId"])


def test_the_answer_wins_and_the_child_is_cancelled(harness: Harness) -> None:
    """Answered first: First("interrupt", answer); the child run ends cancelled (its own question's
    token then answers nothing), and nothing fires later."""
    run_id = harness.start_and_run(flows_fork.racer, {"child": "asking"})
    child_token = _child_token(harness, run_id)
    assert harness.pw.resume(_parent_token(harness, run_id), selected="blue").accepted
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.COMPLETED and run.output["kind"] == "interrupt" and run.output["value"] == "blue"
    assert harness.pw.get_run(_child(run_id)).status is RunStatus.CANCELLED
    assert harness.pw.resume(child_token, selected="red").outcome is ResumeOutcome.ALREADY_RESOLVED
    before = _types(harness, run_id)
    _later(harness)
    assert _types(harness, run_id) == before and "child.completed" not in before


def test_a_child_finishing_after_the_answer_won_leaves_the_parent_alone(harness: Harness) -> None:
    """The answer is committed, then the child completes before the parent's node replays: the
    child's end records nothing in the parent, which completes with the answer."""
    if harness.connection is None:
        pytest.skip("needs the parent's replay held back: embedded runs every job at once")
    run_id = harness.start_and_run(flows_fork.racer, {"child": "asking"})
    store = harness.manual_store  # commits the answer without queueing the replay
    record = store.get_interrupt(run_id, _request_id(harness, run_id))
    assert record is not None
    entry = JournalEntry("interrupt", "pick", "blue", "choice")
    answered = store.resume(run_id, Answer(record, record.token_hash, None, entry, {}, int(time.time() * 1000)))
    assert answered.outcome is ResumeOutcome.ACCEPTED
    assert harness.pw.resume(_child_token(harness, run_id), selected="red").accepted
    harness.run_jobs()
    assert harness.pw.get_run(_child(run_id)).status is RunStatus.COMPLETED
    assert harness.pw.get_run(run_id).status is RunStatus.QUEUED
    assert "child.completed" not in _types(harness, run_id)
    harness.pw._dispatch(run_id, answered.step, answered.fence)
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.COMPLETED and run.output["kind"] == "interrupt" and run.output["value"] == "blue"


def test_the_timer_wins_and_both_others_are_cancelled(harness: Harness) -> None:
    """Nobody answers and the child waits: at the timer the parent gets First("timer"); its
    interrupt's token reads already_resolved and the child ends cancelled."""
    run_id = harness.start_and_run(flows_fork.racer, {"child": "asking", "timer": 1000})
    token, child_token = _parent_token(harness, run_id), _child_token(harness, run_id)
    time.sleep(1.2)
    _later(harness)
    harness.pw.wait(run_id, timeout=10)
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.COMPLETED and run.output["kind"] == "timer", run
    assert harness.pw.resume(token, selected="red").outcome is ResumeOutcome.ALREADY_RESOLVED
    assert harness.pw.get_run(_child(run_id)).status is RunStatus.CANCELLED
    assert harness.pw.resume(child_token, selected="red").outcome is ResumeOutcome.ALREADY_RESOLVED
    assert harness.pw.list_interrupts().items == ()


def test_a_child_ending_after_the_timers_deadline_loses_to_the_timer(harness: Harness) -> None:
    """The timer's deadline passed before the child ended, and the reconciler has not swept yet:
    the child's end moves nothing (the timer came first); the sweep then gives First("timer")."""
    run_id = harness.start_and_run(flows_fork.racer, {"child": "asking", "timer": 1000})
    child_token = _child_token(harness, run_id)
    time.sleep(1.2)  # past the deadline, no reconciler pass yet
    answered = harness.pw.resume(child_token, selected="red")
    if harness.kind == "embedded" and answered.outcome is ResumeOutcome.ALREADY_RESOLVED:
        # the embedded worker's own maintenance swept first (it runs every second): the timer won there
        harness.pw.wait(run_id, timeout=10)
        assert harness.pw.get_run(run_id).output["kind"] == "timer"
        assert harness.pw.get_run(_child(run_id)).status is RunStatus.CANCELLED
        return
    assert answered.accepted, answered
    harness.run_jobs()  # the child completes after the deadline
    assert harness.pw.get_run(_child(run_id)).status is RunStatus.COMPLETED
    client = harness.pw.store.client  # type: ignore[attr-defined]
    if harness.kind == "redis":  # embedded, the worker's own sweep may already have given the timer
        assert client.hget(keys.run(run_id), "status") == b"waiting"  # not moved by the late child
    _later(harness)
    harness.pw.wait(run_id, timeout=10)
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.COMPLETED and run.output["kind"] == "timer", run


def test_a_failed_child_raises_like_use_workflow(harness: Harness) -> None:
    """A child that fails first: use_first raises ChildFailed; uncaught, the parent fails naming the
    child, and its interrupt answers nothing."""
    run_id = harness.start_and_run(flows_fork.racer, {"child": "failing"})
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.FAILED and run.error is not None
    assert _child(run_id) in run.error.message and "the child broke" in run.error.message
    assert harness.pw.resume(_parent_token(harness, run_id), selected="red").outcome is ResumeOutcome.ALREADY_RESOLVED


def test_cancelling_the_parent_cancels_the_racing_child(harness: Harness) -> None:
    """Parent.cancel while it races: its interrupt and the child are cancelled, and it ends cancelled."""
    run_id = harness.start_and_run(flows_fork.racer, {"child": "asking"})
    assert harness.pw.cancel(run_id).status is RunStatus.CANCELLED
    assert harness.pw.get_run(_child(run_id)).status is RunStatus.CANCELLED
    harness.run_jobs()
    assert harness.pw.get_run(run_id).status is RunStatus.CANCELLED


def test_use_first_checks_its_child() -> None:
    """A child that is not a (workflow, input) pair is a clear error."""
    for bad in ("tests.flows_fork:quick", (flows_fork.quick,), [flows_fork.quick, {}]):
        with pytest.raises(ValidationError, match=r"child= takes a \(workflow, input\) pair"):
            use_first({"kind": "text", "question": "?"}, timer_ms=1000, id="x", child=bad)  # type: ignore[arg-type]


def test_a_replay_asking_another_child_is_nondeterministic(harness: Harness) -> None:
    """The node replays after the answer won, now asking for the child with another input under the
    same id: the run fails with the nondeterminism error naming c:pick, and no second child starts."""
    run_id = harness.start_and_run(flows_fork.racer, {"child": "asking"})
    flows_fork.knobs["a"] = 7
    assert harness.pw.resume(_parent_token(harness, run_id), selected="blue").accepted
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.FAILED and run.error is not None, run
    assert run.error.type.endswith("NondeterminismError") and "c:pick" in run.error.message
    assert _types(harness, run_id).count("child.started") == 1


@pytest.mark.slow
def test_a_worker_killed_while_the_parent_races_changes_nothing(redis_client: redis.Redis, redis_url: str) -> None:
    """With real worker processes: the parent races its question against a child that asks its own;
    SIGKILLing the worker while both wait loses nothing. The child's answer, carried by a new worker,
    wins: the parent completes with the child's output and its own token answers nothing."""
    first = Worker(redis_url, SECRET)
    try:
        with Parkway(Settings(redis_url=redis_url, secret=SECRET)) as pw:
            run_id = pw.start(flows_fork.racer, {"child": "asking"})
            child = _child(run_id)
            assert pw.wait(run_id, timeout=20).status is RunStatus.WAITING  # the child exists from then on
            assert pw.wait(child, timeout=20).status is RunStatus.WAITING
            first.kill()
            tokens = {i.run_id: i.resume_token for i in pw.list_interrupts(include_tokens=True).items}
            assert set(tokens) == {run_id, child}
            assert pw.resume(str(tokens[child]), selected="red").accepted
            second = Worker(redis_url, SECRET)
            try:
                done = wait_for(lambda: (r := pw.get_run(run_id)).status.finished and r, 30, "the parent's end")
            finally:
                output = second.stop()
            assert done.status is RunStatus.COMPLETED, output[-3000:]
            assert done.output["kind"] == "child" and done.output["value"]["color"] == "red", done
            outcome = pw.resume(str(tokens[run_id]), selected="blue").outcome
            assert outcome is ResumeOutcome.ALREADY_RESOLVED
            assert "Traceback" not in output
    finally:
        first.stop()


def test_a_stale_spawn_or_race_queues_no_child_job(harness: Harness) -> None:
    """A commit that starts a child (use_workflow's spawn, use_first's park) from a stale attempt is
    refused before anything is written: no child run, and no job of the child's in the queue."""
    run_id = harness.start_and_run(flows_fork.racer, {"child": "asking"})
    record = harness.pw.store.get_run(run_id, 0)
    assert record is not None
    ghost = f"{run_id}--ghost"
    spawn = Spawn(NewRun(ghost, "first_quick", "tests.flows_fork:quick", "quick_sum", {}, 60_000, 1), "w:ghost",
                  ((run_id, 0),), {})
    with pytest.raises(StaleFence):
        harness.pw.store.spawn(run_id, record.fence - 1, 0, spawn)
    interrupt = harness.pw.store.get_interrupt(run_id, _request_id(harness, run_id))
    assert interrupt is not None
    with pytest.raises(StaleFence):
        harness.pw.store.park(run_id, record.fence - 1, 0, Park(interrupt, 60_000, {}, 1, child=spawn))
    assert not harness.pw.backend.dispatcher.is_pending(ghost, 0)
    with pytest.raises(RunNotFound):
        harness.pw.get_run(ghost)


def test_a_cancelled_interrupt_ends_the_race_and_cancels_the_child(harness: Harness) -> None:
    """cancel_interrupt on the raced interrupt: use_first raises InterruptCancelled (uncaught, the run
    ends cancelled) and the child run is cancelled with it, not left running."""
    run_id = harness.start_and_run(flows_fork.racer, {"child": "asking"})
    assert harness.pw.cancel_interrupt(_parent_token(harness, run_id), reason="no").accepted
    harness.run_jobs()
    assert harness.pw.get_run(run_id).status is RunStatus.CANCELLED
    assert harness.pw.get_run(_child(run_id)).status is RunStatus.CANCELLED


def test_the_roots_listing_follows_the_tree_down_to_the_racing_childs_interrupt(harness: Harness) -> None:
    """list_interrupts(run_id=root) lists the root's own interrupt and that of the child racing it
    (use_first(child=...)), as the global listing does, each with the root as root_run_id."""
    run_id = harness.start_and_run(flows_fork.racer, {"child": "asking"})
    everywhere = {i.request_id: i.run_id for i in harness.pw.list_interrupts().items}
    assert sorted(everywhere.values()) == sorted([run_id, _child(run_id)])
    listed = harness.pw.list_interrupts(run_id=run_id, include_tokens=True).items
    assert {i.request_id: i.run_id for i in listed} == everywhere
    assert {i.root_run_id or i.run_id for i in listed} == {run_id}
    child = next(i for i in listed if i.run_id == _child(run_id))
    assert child.resume_token is not None and harness.pw.resume(child.resume_token, selected="red").accepted
    harness.run_jobs()
    assert harness.pw.list_interrupts(run_id=run_id).items == ()


def test_the_racing_child_is_its_trees_tenant_owner_and_origin(harness: Harness) -> None:
    """use_first's child run is created whose its parent is: tenant, owner and origin on its record
    and on its summary (which outlives the record), so every door checks them there."""
    run_id = harness.start_and_run(flows_fork.racer, {"child": "asking"}, tenant="acme", owner="ada",
                                   origin="frontend")
    child = _child(run_id)
    record = harness.pw.store.get_run(child, 0)
    assert record is not None and record.lineage == ((run_id, 0),)
    assert (record.tenant, record.owner, record.origin) == ("acme", "ada", "frontend")
    client = harness.pw.store.client  # type: ignore[attr-defined]
    assert client.hmget(keys.summary(child), "tenant", "owner", "origin") == [b"acme", b"ada", b"frontend"]
    assert [i.run_id for i in harness.pw.list_interrupts(tenant="acme").items if i.run_id == child] == [child]
