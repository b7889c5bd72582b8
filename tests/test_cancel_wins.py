"""Cancel wins: cancelling a tree ends every run of it ``cancelled`` with the caller's reason and
responder, and no node of it replays, whatever the workers are doing (issue 25, defects 1 and 2)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from rq import Queue

from parkway import CancelOutcome, Parkway, RunStatus, Settings
from parkway.adapters.redis import keys
from parkway.workers.serializer import MsgpackSerializer
from tests import flows_life
from tests.conftest import SECRET, Harness
from tests.procs import Worker, wait_for

TRIALS = 20


def _events(pw: Parkway, run_id: str) -> list[tuple[str, dict[str, object]]]:
    return [(e.type, dict(e.data)) for e in pw.store.read_events(run_id, "0", None, 1000)]


def _tree(pw: Parkway, root: str) -> list[str]:
    """The root and every run below it, from the child.started events."""
    runs, out = [root], []
    while runs:
        run_id = runs.pop()
        out.append(run_id)
        runs += [str(d["childRunId"]) for t, d in _events(pw, run_id) if t == "child.started"]
    return out


def _assert_cancelled_by(pw: Parkway, root: str, reason: str, responder: str) -> None:
    """Every run of the tree ended cancelled, each saying so once with the caller's reason and
    responder, and no node of it ran again after the cancel."""
    tree = _tree(pw, root)
    assert len(tree) >= 2
    for run_id in tree:
        assert pw.get_run(run_id).status is RunStatus.CANCELLED, run_id
        events = _events(pw, run_id)
        said = [d for t, d in events if t == "run.cancelled"]
        assert said == [{"reason": reason, "responder": responder}], (run_id, events)
        assert [t for t, _ in events].count("node.started") <= 1, (run_id, events)
        assert "child.ended" not in [t for t, _ in events], (run_id, events)


@pytest.fixture
def two_workers(redis_client: redis.Redis, redis_url: str) -> Iterator[list[Worker]]:
    procs = [Worker(redis_url, SECRET) for _ in range(2)]
    yield procs
    for proc in procs:
        proc.stop()


@pytest.mark.slow
def test_cancel_wins_over_a_parent_that_catches_its_childs_cancellation(
    redis_client: redis.Redis, redis_url: str, two_workers: list[Worker]
) -> None:
    """With 2 live workers, cancel(root) on trees whose nodes catch ChildFailed ends every run
    cancelled, 20 trials out of 20: the call says cancelled, no node replays into its except path."""
    settings = Settings(redis_url=redis_url, secret=SECRET)
    with Parkway(settings) as pw:
        roots = [pw.start(flows_life.guards_grandchild if i % 2 else flows_life.guards_child, {})
                 for i in range(TRIALS)]
        for root in roots:
            wait_for(lambda root=root: pw.list_interrupts(run_id=root).items, 30, f"{root}'s leaf question")
        results = [pw.cancel(root, reason=f"stop {i}", responder="ops") for i, root in enumerate(roots)]
        queue = Queue(settings.queue, connection=redis_client, serializer=MsgpackSerializer)
        wait_for(lambda: queue.count == 0 and redis_client.zcard(keys.leases()) == 0, 30, "idle workers")
        for i, (root, result) in enumerate(zip(roots, results, strict=True)):
            assert (result.outcome, result.status) == (CancelOutcome.CANCELLED, RunStatus.CANCELLED), (root, result)
            _assert_cancelled_by(pw, root, f"stop {i}", "ops")


def test_cancel_ends_the_parent_before_its_child_so_the_childs_end_queues_nothing(harness: Harness) -> None:
    """A parent waiting on a child is ended by cancel before the child is: the child's end finds it
    finished, so no job of the parent is queued, and the tree reads cancelled with the caller's words."""
    root = harness.start_and_run(flows_life.guards_grandchild, {})
    assert harness.pw.list_interrupts(run_id=root).items
    result = harness.pw.cancel(root, reason="no longer needed", responder="ana")
    assert (result.outcome, result.status) == (CancelOutcome.CANCELLED, RunStatus.CANCELLED)
    parents = _tree(harness.pw, root)[:2]  # the root and the run between it and the leaf
    queued = harness.pw.store.client.zrange(keys.outbox(), 0, -1)  # type: ignore[attr-defined]
    assert [m for m in queued if m.decode().rsplit(":", 2)[0] in parents] == []  # no replay to run
    harness.run_jobs()
    _assert_cancelled_by(harness.pw, root, "no longer needed", "ana")


@pytest.mark.parametrize("policy", [{"answer": "blue"}, "cancel", "expire"], ids=["answer", "cancel", "expire"])
def test_cancel_between_a_deadline_and_the_reconcilers_pass_wins(harness: Harness, policy: object) -> None:
    """A run past its interrupt's deadline, its policy not yet applied, still reads waiting: cancel
    ends it cancelled (not "already finished, expired"), and the policy applied later moves nothing."""
    import time

    from parkway.workers.reconciler import reconcile_once
    from tests.flows_life import expiring_policy

    run_id = harness.start_and_run(expiring_policy, {"policy": policy})
    deadline = harness.interrupt_event(run_id)["expiresAt"]
    time.sleep(max(0.0, deadline / 1000 - time.time()) + 0.05)
    if harness.pw.get_run(run_id).status is not RunStatus.WAITING:
        pytest.skip("an embedded worker's reconciler applied the policy first")
    result = harness.pw.cancel(run_id, reason="too late", responder="ops")
    if harness.kind == "embedded" and result.outcome is not CancelOutcome.CANCELLED:
        pytest.skip("an embedded worker's reconciler applied the policy between the read and the cancel")
    assert (result.outcome, result.status) == (CancelOutcome.CANCELLED, RunStatus.CANCELLED)
    reconcile_once(harness.pw.store, harness.pw.backend.dispatcher)
    harness.run_jobs()
    assert harness.pw.get_run(run_id).status is RunStatus.CANCELLED
    assert [d for t, d in _events(harness.pw, run_id) if t == "run.cancelled"] == [
        {"reason": "too late", "responder": "ops"}]


@pytest.mark.parametrize("flow", ["guards_child", "fans_out"])
def test_a_cancel_cut_short_after_the_parent_ended_is_finished_by_the_next(harness: Harness, flow: str) -> None:
    """When a cancel stops after ending the parent (a crash before its children), cancelling the
    parent again says already_resolved and cancels the children it left running."""
    from tests.flows_life import fans_out, guards_child

    workflow, data = (guards_child, {}) if flow == "guards_child" else (fans_out, {"n": 3, "ask": True})
    root = harness.start_and_run(workflow, data)
    children = [i.run_id for i in harness.pw.list_interrupts(run_id=root).items]
    assert children and all(c != root for c in children)
    record = harness.pw.store.get_run(root, 0)
    assert record is not None  # the first step of cancel, alone: the parent ends, its children run on
    said = {"reason": "r", "responder": "o"}
    harness.pw.store.finish(root, record.fence, "cancelled", None, ("run.cancelled", said), 1)
    assert {harness.pw.get_run(c).status for c in children} == {RunStatus.WAITING}
    result = harness.pw.cancel(root, reason="r", responder="o")
    assert (result.outcome, result.status) == (CancelOutcome.ALREADY_FINISHED, RunStatus.CANCELLED)
    assert {harness.pw.get_run(c).status for c in children} == {RunStatus.CANCELLED}
    assert harness.pw.list_interrupts().items == ()


@pytest.mark.parametrize("depth", ["children", "grandchildren"])
def test_cancel_reaches_the_children_of_a_fan_out_queued_between_two_of_them(harness: Harness, depth: str) -> None:
    """A fan-out whose parent is queued (one child ended, the next not started yet) is cancelled
    with the tree: the child still asking ends cancelled, its question leaves the listing, and no
    child begins a node afterwards, whether the fan-out is the root or the root's child."""
    if harness.connection is None:
        pytest.skip("an embedded worker runs the queued replay at once")
    from parkway.runtime.hooks import child_run_id

    data = {"n": 3, "ask": True, "limit": 2}
    root = harness.start_and_run(flows_life.fans_out if depth == "children" else flows_life.nests_fan_out, data)
    fan = root if depth == "children" else child_run_id(root, 0, "fan")
    first, second = (child_run_id(fan, 0, f"all.{i}") for i in range(2))
    assert {i.run_id for i in harness.pw.list_interrupts(run_id=root).items} == {first, second}
    harness.pw.cancel(first, reason="one less", responder="ops")  # its end queues the fan-out for the third
    assert harness.pw.get_run(fan).status is RunStatus.QUEUED
    result = harness.pw.cancel(root, reason="stop", responder="ops")
    assert (result.outcome, result.status) == (CancelOutcome.CANCELLED, RunStatus.CANCELLED)
    assert harness.pw.get_run(second).status is RunStatus.CANCELLED
    assert harness.pw.list_interrupts().items == ()
    harness.run_jobs()
    assert {harness.pw.get_run(r).status for r in (root, fan, second)} == {RunStatus.CANCELLED}
    assert [t for t, _ in _events(harness.pw, fan)].count("node.started") == 1  # the fan-out never replayed
    with pytest.raises(Exception, match="no run"):
        harness.pw.get_run(child_run_id(fan, 0, "all.2"))  # the third never started


def test_cancel_reaches_the_child_that_raced_an_answered_interrupt(harness: Harness) -> None:
    """use_first's child runs on after an answer wins, until the parent's replay cancels it: a
    cancel of the parent queued for that replay cancels the child, which then asks nothing."""
    if harness.connection is None:
        pytest.skip("an embedded worker runs the queued replay at once")
    from tests import flows_fork

    root = harness.start_and_run(flows_fork.racer, {"child": "asking"})
    child = next(i.run_id for i in harness.pw.list_interrupts(run_id=root).items if i.run_id != root)
    own = next(i for i in harness.pw.list_interrupts(run_id=root, include_tokens=True).items if i.run_id == root)
    assert own.resume_token is not None and harness.pw.resume(own.resume_token, selected="red").accepted
    # its replay not run yet (queued; running when the resume began it: stored format 3, an empty queue)
    assert harness.pw.get_run(root).status in (RunStatus.QUEUED, RunStatus.RUNNING)
    result = harness.pw.cancel(root, reason="stop", responder="ops")
    assert (result.outcome, result.status) == (CancelOutcome.CANCELLED, RunStatus.CANCELLED)
    assert harness.pw.get_run(child).status is RunStatus.CANCELLED
    assert harness.pw.list_interrupts().items == ()
    harness.run_jobs()
    assert [harness.pw.get_run(r).status for r in (root, child)] == [RunStatus.CANCELLED] * 2


def test_the_end_of_a_tree_is_refused_when_a_run_below_has_a_child_it_does_not_name(harness: Harness) -> None:
    """finish.lua ends the runs below a run with it only when every child of those it ends is named
    (one started since the caller read the tree would run on): else it changes nothing and says
    stale, and with the tree read again it ends the run and the fan-out below it in one step."""
    from parkway.runtime.errors import StaleFence
    from parkway.runtime.hooks import child_run_id

    root = harness.start_and_run(flows_life.nests_fan_out, {"n": 3, "ask": True, "limit": 2})
    fan = child_run_id(root, 0, "fan")
    store, said = harness.pw.store, ("run.cancelled", {"reason": "r", "responder": "o"})

    def status(run_id: str) -> RunStatus:
        return harness.pw.get_run(run_id).status

    record = store.get_run(root, 0)
    assert record is not None and status(fan) is RunStatus.WAITING
    with pytest.raises(StaleFence, match="since the read"):
        store.finish(root, record.fence, "cancelled", None, said, 1, [(fan, root)])  # its children unnamed
    assert [status(r) for r in (root, fan)] == [RunStatus.WAITING] * 2
    below = store.runs_below(root)
    assert below[0] == (fan, root) and {c for c, p in below[1:] if p == fan} == {
        child_run_id(fan, 0, f"all.{i}") for i in range(2)}
    store.finish(root, record.fence, "cancelled", None, said, 1, below)
    assert [status(r) for r in (root, fan)] == [RunStatus.CANCELLED] * 2
    assert {status(c) for c, _ in below[1:]} == {RunStatus.WAITING}  # their questions: the cascade's next steps
    result = harness.pw.cancel(root, reason="r", responder="o")  # as a cancel cut short here: it finishes them
    assert (result.outcome, result.status) == (CancelOutcome.ALREADY_RESOLVED, RunStatus.CANCELLED)
    assert {status(c) for c, _ in below[1:]} == {RunStatus.CANCELLED}
    assert harness.pw.list_interrupts().items == ()
