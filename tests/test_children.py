"""Child workflows: use_workflow starts a child run and parks the parent until the child ends."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from parkway import Parkway, RunStatus, Settings
from tests import flows
from tests.conftest import SECRET, Harness
from tests.procs import Worker, wait_for


def _children(h: Harness, run_id: str) -> list[str]:
    """The run ids of the children the run started, from its stream."""
    return [e.data["childRunId"] for e in h.pw.store.read_events(run_id, "0", None, 1000) if e.type == "child.started"]


def _settled(h: Harness, run_id: str) -> list[str]:
    """Every event type of the run so far (without waiting for its end)."""
    events = h.pw.store.read_events(run_id, "0", None, 1000)
    return [e.type for e in events]


def test_a_grandchilds_pause_is_listed_with_its_lineage_answered_by_token_and_outputs_flow_up(
    harness: Harness,
) -> None:
    """parent -> child -> grandchild: the grandchild's interrupt shows on the root's stream and in the
    listing with its lineage, one resume by token answers it, and all three complete in turn."""
    root = harness.start_and_run(flows.tree, {})
    assert harness.pw.get_run(root).status is RunStatus.WAITING
    page = harness.pw.list_interrupts(include_tokens=True)
    assert len(page.items) == 1
    item = page.items[0]
    middle_id = _children(harness, root)[0]
    assert item.root_run_id == root and item.run_id != middle_id and item.parent_run_id == middle_id
    assert item.run_id.startswith(root + "--") and middle_id.startswith(root + "--")
    # the root's stream shows it, with its lineage and a token that answers the grandchild
    event = harness.interrupt_event(root)
    assert (event["rootRunId"], event["parentRunId"], event["runId"]) == (root, middle_id, item.run_id)
    assert event["resumeToken"] == item.resume_token
    assert harness.pw.list_interrupts(run_id=root).items[0].request_id == item.request_id
    assert harness.pw.resume(event["resumeToken"], selected="blue").accepted
    harness.run_jobs()
    done = harness.pw.get_run(root)
    assert done.status is RunStatus.COMPLETED, done
    assert done.output == {"middle": {"leaf": {"color": "blue", "depth": 2}, "depth": 1}, "sum": 5}
    assert harness.pw.get_run(item.run_id).status is RunStatus.COMPLETED
    assert harness.pw.get_run(middle_id).status is RunStatus.COMPLETED
    assert harness.pw.list_interrupts().items == ()


def test_replay_of_the_parent_starts_no_second_child(harness: Harness) -> None:
    """The parent's node replays after each child ends, yet each use_workflow id starts exactly one child."""
    root = harness.start_and_run(flows.tree, {})
    harness.pw.resume(harness.token(root), selected="red")
    harness.run_jobs()
    assert harness.pw.get_run(root).status is RunStatus.COMPLETED
    children = _children(harness, root)
    assert len(children) == 2 and len(set(children)) == 2
    assert flows.effects["tree:body"] == 3  # first run, after the middle child, after the adder
    assert flows.effects["adder:body"] == 1 and flows.effects["leaf:body"] == 2
    assert _settled(harness, root).count("child.completed") == 2


def test_a_failed_child_raises_child_failed_in_the_parent(harness: Harness) -> None:
    """use_workflow raises ChildFailed (catchable) naming the child run, its status and its error."""
    root = harness.start_and_run(flows.catches_child, {})
    run = harness.pw.get_run(root)
    assert run.status is RunStatus.COMPLETED, run
    assert run.output["caught"] == "failed"
    assert run.output["child"].startswith(root + "--")
    assert "the child broke" in run.output["message"]


def test_an_uncaught_child_failure_fails_the_parent_naming_the_child(harness: Harness) -> None:
    """Uncaught, ChildFailed fails the parent with a message naming the child run."""
    root = harness.start_and_run(flows.lets_child_fail, {})
    run = harness.pw.get_run(root)
    assert run.status is RunStatus.FAILED and run.error is not None
    child = _children(harness, root)[0]
    assert child in run.error.message and "the child broke" in run.error.message
    assert run.error.type == "parkway.runtime.errors.ChildFailed"


def test_cancelling_the_parent_cancels_its_children(harness: Harness) -> None:
    """pw.cancel on a parent waiting on a child cancels down the tree; every run ends cancelled."""
    root = harness.start_and_run(flows.tree, {})
    middle_id = _children(harness, root)[0]
    leaf_id = harness.pw.list_interrupts().items[0].run_id
    result = harness.pw.cancel(root, reason="no longer needed")
    assert (result.run_id, result.status) == (root, RunStatus.CANCELLED)
    assert harness.pw.get_run(root).status is RunStatus.CANCELLED  # at once, not after a replay
    harness.run_jobs()
    for run_id in (leaf_id, middle_id, root):
        assert harness.pw.get_run(run_id).status is RunStatus.CANCELLED, run_id
    assert harness.pw.list_interrupts().items == ()


def test_a_childs_run_id_shares_the_roots_hash_tag() -> None:
    """Every key of a tree of runs lives in the root's slot, so one script may touch parent and child."""
    from parkway.adapters.redis import keys

    assert keys.run("run_a--0123456789abcdef").startswith("pw:{run_a}:")
    assert keys.events("run_a--0123456789abcdef--fedcba9876543210").startswith("pw:{run_a}:")
    assert keys.run("run_a") == "pw:{run_a}:run"


@pytest.fixture
def worker(redis_client: redis.Redis, redis_url: str) -> Iterator[Worker]:
    proc = Worker(redis_url, SECRET)
    yield proc
    proc.stop()


@pytest.mark.slow
def test_a_worker_killed_while_the_parent_waits_changes_nothing(
    redis_client: redis.Redis, redis_url: str, worker: Worker
) -> None:
    """With real worker processes, SIGKILLing the worker while the parent waits on its child loses
    nothing: the parent holds no job, and a new worker carries the tree to its end."""
    with Parkway(Settings(redis_url=redis_url, secret=SECRET)) as pw:
        _tree_survives_a_killed_worker(pw, redis_url, worker)


def _tree_survives_a_killed_worker(pw: Parkway, redis_url: str, worker: Worker) -> None:
    root = pw.start(flows.tree, {})
    waiting = pw.wait(root, timeout=20)  # waits past the parent's wait on its child, to the leaf's question
    assert waiting.status is RunStatus.WAITING and waiting.interrupt is not None
    assert waiting.interrupt.root_run_id == root and waiting.interrupt.run_id != root
    item = pw.list_interrupts(include_tokens=True).items[0]
    assert item.request_id == waiting.interrupt.request_id
    worker.kill()
    assert pw.resume(item.resume_token, selected="red").accepted
    second = Worker(redis_url, SECRET)
    try:
        done = wait_for(lambda: (r := pw.get_run(root)).status.finished and r, 30, "the root's end")
    finally:
        output = second.stop()
    assert done.status is RunStatus.COMPLETED, output[-3000:]
    assert done.output["middle"]["leaf"]["color"] == "red" and done.output["sum"] == 5
    assert "Traceback" not in output


def test_a_child_whose_interrupt_expires_ends_expired_and_the_parent_sees_child_failed(harness: Harness) -> None:
    """The reconciler's expiry of a child's interrupt ends the child expired and resumes the parent,
    whose use_workflow raises ChildFailed with status expired."""
    from tests.test_expiry import _expire

    root = harness.start_and_run(flows.awaits_brief, {})
    child = _children(harness, root)[0]
    events = _expire(harness, root)
    assert harness.pw.get_run(child).status is RunStatus.EXPIRED
    run = harness.pw.get_run(root)
    assert run.status is RunStatus.COMPLETED and run.output == {"caught": "expired"}, run
    assert events.count("child.ended") == 1


def test_cancelling_a_parent_whose_child_is_queued_cancels_the_child_at_once(harness: Harness) -> None:
    """A child not yet begun is ended cancelled by cancelling its parent, which then ends cancelled."""
    import uuid

    from parkway.runtime import executor
    from parkway.runtime.clock import now_ms
    from parkway.runtime.store import NewRun

    store = harness.manual_store  # no hand-off: the child's first job is not enqueued, so it stays queued
    root = "run_" + uuid.uuid4().hex
    store.create_run(NewRun(root, "lets_child_fail", "tests.flows:lets_child_fail", "call_broken_uncaught", {}, 60_000,
                            now_ms()))
    assert executor.execute(store, harness.pw.backend.options, root, 0, 0) is executor.JobEnd.WAITING
    child = _children(harness, root)[0]
    assert harness.pw.get_run(child).status is RunStatus.QUEUED
    assert harness.pw.cancel(root).status is RunStatus.CANCELLED
    assert harness.pw.get_run(child).status is RunStatus.CANCELLED
    harness.run_jobs()
    assert harness.pw.get_run(root).status is RunStatus.CANCELLED


def test_a_childs_interrupt_keeps_its_ancestors_records_as_long_as_itself(harness: Harness) -> None:
    """A parent's records live at least as long as its child's open interrupt (here an hour, for a
    run TTL of a minute), so the child's end always finds the parent to resume."""
    from parkway.adapters.redis import keys

    root = harness.start_and_run(flows.awaits_long, {}, ttl_ms=60_000)
    client = harness.pw.store.client  # type: ignore[attr-defined]
    child = _children(harness, root)[0]
    for key in (keys.run(root), keys.events(root), keys.summary(root)):
        assert client.pttl(key) > 3_500_000, key
    journal_ttl = client.pttl(keys.journal(root, 0))
    assert journal_ttl == -2 or journal_ttl > 3_500_000  # (-2: nothing recorded in it yet)
    assert harness.pw.resume(harness.token(root), selected="blue").accepted
    harness.run_jobs()
    assert harness.pw.get_run(root).output == {"color": "blue"}
    assert harness.pw.get_run(child).status is RunStatus.COMPLETED


def test_a_child_that_cannot_start_fails_the_parent_with_the_reason(harness: Harness) -> None:
    """A use_workflow whose workflow cannot be found fails the parent, saying so, and starts nothing."""
    root = harness.start_and_run(flows.calls_nowhere, {})
    run = harness.pw.get_run(root)
    assert run.status is RunStatus.FAILED and run.error is not None
    assert "no_such_workflow" in run.error.message
    assert _children(harness, root) == []
