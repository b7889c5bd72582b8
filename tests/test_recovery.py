"""Nothing lost, nothing twice: fencing, leases, the outbox, expiry and cancel, on both stores."""

from __future__ import annotations

import time
import uuid

import pytest
import redis

from parkway import (
    CancelOutcome,
    Parkway,
    ResumeOutcome,
    RunStatus,
    Settings,
    Workflow,
)
from parkway.runtime import executor, tokens
from parkway.runtime.clock import now_ms
from parkway.runtime.errors import StaleFence
from parkway.runtime.store import Answer, JournalEntry, NewRun
from parkway.workers.reconciler import reconcile_once
from tests import flows
from tests.conftest import SECRET, Closing, Harness
from tests.procs import Worker, wait_for


def _execute(harness: Harness, run_id: str, step: int, fence: int) -> executor.JobEnd:
    """Run one job in this thread, as a worker would."""
    return executor.execute(harness.pw.store, harness.pw.backend.options, run_id, step, fence)


def _create(harness: Harness, workflow: Workflow) -> str:
    """A queued run whose job nobody enqueued (so the test drives its jobs by hand)."""
    run_id = "run_" + uuid.uuid4().hex
    harness.manual_store.create_run(NewRun(run_id, workflow.name, workflow.ref(), workflow.start or "", {}, 60_000, 0))
    return run_id


class Recorder:
    """A dispatcher that only notes what would be enqueued, so a test runs those jobs itself."""

    def __init__(self) -> None:
        self.jobs: list[tuple[str, int, int]] = []

    def enqueue(self, run_id: str, step: int, fence: int) -> None:
        self.jobs.append((run_id, step, fence))

    def is_pending(self, run_id: str, fence: int) -> bool:
        return False

    def discard(self, run_id: str, fence: int) -> None:
        pass


def _events(harness: Harness, run_id: str) -> list[str]:
    return [e.type for e in harness.pw.store.read_events(run_id, "0", None, 1000)]


def test_use_step_stable_id_and_now_return_their_records_on_replay(harness: Harness) -> None:
    """use_step runs once; use_stable_id, use_now and idempotency_key are the same on every attempt."""
    run_id = harness.start_and_run(flows.stepper, {"tag": "s"})
    first = harness.pw.store.get_run(run_id, 0)
    assert first is not None and first.status is RunStatus.WAITING
    assert harness.pw.resume(harness.token(run_id), selected="red").accepted
    harness.run_jobs()
    out = harness.pw.get_run(run_id).output
    assert flows.effects["charge:s"] == 1
    assert out["charge"] == {"charged": "s"} and len(out["ident"]) == 32
    assert out["key"] == f"{run_id}:0:charge"
    assert abs(out["when"] - first.updated_at) < 5000


def test_a_job_delivered_twice_commits_once(harness: Harness) -> None:
    """Executing the same (run, step, fence) job again after it committed changes nothing."""
    run_id = _create(harness, flows.one_choice)
    assert _execute(harness, run_id, 0, 0) is executor.JobEnd.WAITING
    before = _events(harness, run_id)
    assert _execute(harness, run_id, 0, 0) is executor.JobEnd.STALE
    assert _events(harness, run_id) == before
    assert before.count("interrupt") == 1


def test_a_zombie_attempt_cannot_commit_after_recovery(harness: Harness) -> None:
    """An attempt whose lease expired is replaced; its late commits are refused and change nothing."""
    run_id = _create(harness, flows.one_choice)
    store = harness.pw.store
    store.begin(run_id, 0, 0, 0, lease_until=1)  # the zombie: began, then went silent
    recorder = Recorder()
    report = reconcile_once(store, recorder, now=int(time.time() * 1000))
    assert report.recovered == [run_id] and recorder.jobs == [(run_id, 0, 1)]
    with pytest.raises(StaleFence):
        store.write_entry(run_id, 0, 0, "journal", "@0", JournalEntry("state", "", 1), None, 0)
    assert _execute(harness, run_id, 0, 0) is executor.JobEnd.STALE
    assert _execute(harness, *recorder.jobs[0]) is executor.JobEnd.WAITING  # the replacement attempt
    assert harness.pw.get_run(run_id).status is RunStatus.WAITING
    assert _events(harness, run_id).count("node.recovered") == 1


def test_lost_attempts_are_bounded(harness: Harness) -> None:
    """After max_lost attempts lost with their worker, the run fails with a clear reason."""
    run_id = _create(harness, flows.one_choice)
    store, fence = harness.pw.store, 0
    for _ in range(3):
        store.begin(run_id, 0, fence, 0, lease_until=1)
        reconcile_once(store, Recorder(), max_lost=3, now=int(time.time() * 1000))
        fence += 1
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.FAILED and run.error is not None
    assert "lost 3 times" in run.error.message


def test_a_resume_whose_enqueue_was_lost_is_completed_by_the_reconciler(harness: Harness) -> None:
    """An accepted resume that never reached the queue is redispatched from the outbox."""
    run_id = harness.start_and_run(flows.one_choice)
    token = harness.token(run_id)
    token_hash = tokens.hash_token(token)
    lookup = harness.pw.store.lookup(run_id, token_hash, 0)
    assert lookup.interrupt is not None
    entry = JournalEntry("interrupt", "color", "blue", "choice")
    # a store whose script enqueues no job, as the fallback path does when the client then dies
    commit = harness.manual_store.resume(run_id, Answer(lookup.interrupt, token_hash, None, entry, {}, 0))
    assert commit.outcome is ResumeOutcome.ACCEPTED and not commit.handed_off  # ... and no one enqueues
    harness.run_jobs()
    assert harness.pw.get_run(run_id).status is RunStatus.QUEUED
    report = reconcile_once(harness.pw.store, harness.pw.backend.dispatcher, outbox_age_ms=0)
    assert report.redispatched == [run_id]
    harness.run_jobs()
    assert harness.pw.get_run(run_id).output == {"picked": "blue", "painted": "blue"}


def test_a_queued_job_is_not_redispatched_while_it_waits(harness: Harness) -> None:
    """An old outbox entry whose job still sits in the queue is left alone."""
    run_id = harness.pw.start(flows.one_choice, {})
    if harness.kind == "embedded":
        harness.pw.drain()
        pytest.skip("the embedded worker takes jobs at once")
    report = reconcile_once(harness.pw.store, harness.pw.backend.dispatcher, outbox_age_ms=0)
    assert report.redispatched == []
    harness.run_jobs()
    assert harness.pw.get_run(run_id).status is RunStatus.WAITING


def test_a_job_taken_by_a_worker_that_died_before_starting_it_is_redispatched(harness: Harness) -> None:
    """A job moved into RQ's intermediate list by a worker killed before it began still reads
    "queued"; the reconciler sees it is no longer in the queue, redispatches the run and drops the
    lost job from RQ's records."""
    if harness.connection is None:
        pytest.skip("an RQ property")
    from parkway.workers.jobs import job_id

    run_id = harness.pw.start(flows.one_choice, {})
    queue = harness.pw.backend.dispatcher.queue  # type: ignore[attr-defined]
    harness.connection.lmove(queue.key, queue.intermediate_queue_key, "RIGHT", "LEFT")  # what BLMOVE does
    assert harness.connection.hget(f"rq:job:{job_id(run_id, 0)}", "status") == b"queued"
    report = reconcile_once(harness.pw.store, harness.pw.backend.dispatcher, outbox_age_ms=0)
    assert report.redispatched == [run_id]
    # and the lost job is gone from RQ's records (RQ's cleanup would fail it, kept a year)
    assert harness.connection.exists(f"rq:job:{job_id(run_id, 0)}") == 0
    assert harness.connection.llen(queue.intermediate_queue_key) == 0
    harness.run_jobs()
    assert harness.pw.get_run(run_id).status is RunStatus.WAITING


def test_expired_interrupts_are_recorded_by_the_reconciler(harness: Harness) -> None:
    """Past its TTL, the reconciler writes interrupt.expired and the run ends expired."""
    run_id = harness.start_and_run(flows.one_choice, {"ttl_ms": 1000})
    event = harness.interrupt_event(run_id)
    token = event["resumeToken"]
    time.sleep(max(0, event["expiresAt"] / 1000 - time.time()) + 0.1)
    report = reconcile_once(harness.pw.store, harness.pw.backend.dispatcher)
    # the embedded worker reconciles by itself (its maintenance thread) and may have been first
    # (then this pass finds nothing to do); either way the expiry is recorded exactly once
    assert report.expired == [run_id] or (harness.kind == "embedded" and report.expired == [])
    events = _events(harness, run_id)
    assert events[-2:] == ["interrupt.expired", "done"]
    assert events.count("interrupt.expired") == 1 and events.count("done") == 1
    assert harness.pw.get_run(run_id).status is RunStatus.EXPIRED
    assert harness.pw.resume(token, selected="red").outcome is ResumeOutcome.EXPIRED
    assert reconcile_once(harness.pw.store, harness.pw.backend.dispatcher).expired == []


def test_cancelled_interrupt_can_be_caught_for_a_denied_path(harness: Harness) -> None:
    """cancel_interrupt makes use_interrupt raise InterruptCancelled; a node may catch it and go on."""
    run_id = harness.start_and_run(flows.denial)
    token = harness.token(run_id)
    result = harness.pw.cancel_interrupt(token, reason="not today", responder="ops")
    assert result.outcome is ResumeOutcome.ACCEPTED
    assert harness.pw.resume(token, selected="red").outcome is ResumeOutcome.ALREADY_RESOLVED
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.COMPLETED and run.output == {"denied": True, "reason": "not today"}
    assert "interrupt.cancelled" in _events(harness, run_id)


def test_cancelling_a_waiting_run_ends_it_cancelled_at_once(harness: Harness) -> None:
    """cancel() of a parked run ends it cancelled there and then, and says so (status cancelled): its
    node never replays, so a workflow that catches InterruptCancelled does not take its other path."""
    run_id = harness.start_and_run(flows.denial)
    token = harness.token(run_id)
    result = harness.pw.cancel(run_id, reason="duplicate", responder="ops")
    assert (result.outcome, result.status) == (CancelOutcome.CANCELLED, RunStatus.CANCELLED)
    assert harness.pw.get_run(run_id).status is RunStatus.CANCELLED
    assert harness.pw.list_interrupts().items == ()
    assert harness.pw.resume(token, selected="red").outcome is ResumeOutcome.ALREADY_RESOLVED
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.CANCELLED and run.output is None
    assert _events(harness, run_id)[-3:] == ["interrupt.cancelled", "run.cancelled", "done"]
    assert harness.pw.cancel(run_id).outcome is CancelOutcome.ALREADY_FINISHED


def test_cancel_of_a_queued_run_ends_it_and_its_job_is_stale(harness: Harness) -> None:
    """A queued run is cancelled at once; its job, when it runs, changes nothing."""
    run_id = harness.pw.start(flows.one_choice, {}) if harness.kind == "redis" else None
    if run_id is None:
        pytest.skip("the embedded worker begins jobs at once")
    assert harness.pw.cancel(run_id).outcome is CancelOutcome.CANCELLED
    harness.run_jobs()
    assert harness.pw.get_run(run_id).status is RunStatus.CANCELLED
    assert "interrupt" not in _events(harness, run_id)


def test_a_duplicate_job_never_runs_a_node_while_another_attempt_holds_the_lease(harness: Harness) -> None:
    """While one attempt holds a live lease on the activation, a second copy of its job is stale and
    runs nothing; once that lease has lapsed, a copy may take the activation over."""
    run_id = harness.pw.start(flows.stepper, {"tag": "dup"})
    now = now_ms()
    try:
        harness.pw.store.begin(run_id, 0, 0, now, now + 60_000)  # another worker is running it
    except StaleFence:
        if harness.kind != "embedded":
            raise
        pytest.skip("the embedded worker began the run before the test could (on Redis no worker runs)")
    harness.pw.backend.dispatcher.enqueue(run_id, 0, 0)
    harness.run_jobs()
    assert flows.effects["charge:dup"] == 0
    assert harness.pw.get_run(run_id).status is RunStatus.RUNNING
    harness.pw.store.heartbeat([run_id], now_ms() - 1)  # its worker went silent
    try:
        harness.pw.store.begin(run_id, 0, 0, now_ms(), now_ms() + 60_000)
    except StaleFence:
        # the embedded reconciler saw the lapsed lease first and handed the activation to a new
        # attempt of its own: taken over all the same, by the other copy
        assert harness.pw.get_run(run_id).status in (RunStatus.QUEUED, RunStatus.RUNNING)
    assert flows.effects["charge:dup"] == 0


@pytest.mark.slow
def test_two_copies_of_one_job_on_two_workers_charge_once(
    redis_url: str, redis_client: redis.Redis, closing: Closing
) -> None:
    """The same job pushed twice before two worker processes start runs the node body once."""
    pw = closing(Parkway(Settings(redis_url=redis_url, secret=SECRET)))
    run_id = pw.start(flows.blocking, {"tag": "twice"})
    redis_client.set("test:block:twice", 1)
    job = f"pw-{run_id}-0"
    redis_client.rpush("rq:queue:parkway", job)  # the second copy
    env = {"PARKWAY_EFFECTS_URL": redis_url}
    workers = [Worker(redis_url, SECRET, env=env), Worker(redis_url, SECRET, env=env)]
    try:
        wait_for(lambda: redis_client.exists("test:inside:twice"), 30, "one attempt inside the node")
        time.sleep(1.5)  # the other worker has had the copy by now
        assert int(redis_client.get("test:effects:charge:twice") or 0) == 1
        redis_client.delete("test:block:twice")
        wait_for(lambda: pw.get_run(run_id).status is RunStatus.COMPLETED, 30, "the run to complete")
        assert int(redis_client.get("test:effects:charge:twice") or 0) == 1
    finally:
        for w in workers:
            w.stop()
