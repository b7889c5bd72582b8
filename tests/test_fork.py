"""fork: re-open a run at an earlier activation as a new run; the old run is left as it was."""

from __future__ import annotations

import pytest

from parkway import ResumeOutcome, RunNotFound, RunStatus, ValidationError
from parkway.adapters.redis import keys
from tests import flows, flows_fork
from tests.conftest import Harness

START = {"trail": ["in"]}
AT_STEP = {
    0: ("first", {"trail": ["in"]}),
    1: ("second", {"trail": ["in", "a"], "x": 1}),
    2: ("third", {"trail": ["in", "a", "b"], "x": 1, "color": "blue"}),
}


def _completed(harness: Harness) -> str:
    run_id = harness.start_and_run(flows_fork.three, START)
    assert harness.pw.resume(harness.token(run_id), selected="blue").accepted
    harness.run_jobs()
    assert harness.pw.get_run(run_id).status is RunStatus.COMPLETED
    return run_id


def _started(harness: Harness, run_id: str) -> dict[str, object]:
    return next(e.data for e in harness.pw.store.read_events(run_id, "0", None, 100) if e.type == "run.started")


@pytest.mark.parametrize("step", [0, 1, 2])
def test_a_fork_starts_at_the_step_with_the_data_it_started_with(harness: Harness, step: int) -> None:
    """Forking a completed 3-node run at each step: the new run starts at that step's node with the
    data that step started with, records where it came from, and runs on from there."""
    old = _completed(harness)
    before = harness.pw.get_run(old)
    new = harness.pw.fork(old, step=step)
    assert new != old
    node, data = AT_STEP[step]
    assert harness.pw.get_run(new).input == data
    started = _started(harness, new)
    assert started["forkedFrom"] == {"runId": old, "step": step} and started["input"] == data
    harness.run_jobs()
    first = next(e.data for e in harness.pw.store.read_events(new, "0", None, 100) if e.type == "node.started")
    assert (first["node"], first["step"]) == (node, 0)
    if step < 2:  # the fork reaches the question again, under a token of its own
        assert harness.pw.get_run(new).status is RunStatus.WAITING
        assert harness.pw.resume(harness.token(new), selected="red").accepted
        harness.run_jobs()
    run = harness.pw.get_run(new)
    color = "blue" if step == 2 else "red"
    assert run.status is RunStatus.COMPLETED and run.output == {
        "trail": ["in", "a", "b", "c"], "x": 1, "color": color, "z": 2
    }, run
    assert harness.pw.get_run(old) == before  # the old run is untouched


def test_a_fork_of_a_paused_run_gets_fresh_tokens_and_the_old_token_answers_the_old_run(harness: Harness) -> None:
    """Forking a run waiting at step 1: the fork pauses again under a new token; each token answers
    its own run only, and the old one still works."""
    old = harness.start_and_run(flows_fork.three, START)
    old_token = harness.token(old)
    new = harness.pw.fork(old, step=1, new_run_id="forked-1")
    assert new == "forked-1"
    harness.run_jobs()
    new_token = harness.token(new)
    assert new_token != old_token
    assert harness.pw.resume(old_token, selected="blue").accepted
    harness.run_jobs()
    assert harness.pw.get_run(old).output["color"] == "blue"
    assert harness.pw.get_run(new).status is RunStatus.WAITING  # the old answer did not reach the fork
    assert harness.pw.resume(new_token, selected="red").accepted
    harness.run_jobs()
    assert harness.pw.get_run(new).output["color"] == "red"


def test_the_old_token_dies_with_the_old_run_and_the_fork_lives_on(harness: Harness) -> None:
    """Cancelling the old run after a fork: its token reads already_resolved; the fork's still answers."""
    old = harness.start_and_run(flows_fork.three, START)
    old_token = harness.token(old)
    new = harness.pw.fork(old, step=1)
    harness.run_jobs()
    harness.pw.cancel(old)
    assert harness.pw.resume(old_token, selected="blue").outcome is ResumeOutcome.ALREADY_RESOLVED
    assert harness.pw.resume(harness.token(new), selected="red").accepted
    harness.run_jobs()
    assert harness.pw.get_run(new).status is RunStatus.COMPLETED


def test_fork_input_lays_values_over_the_step_data(harness: Harness) -> None:
    """``input=`` replaces keys of the data the step started with."""
    old = _completed(harness)
    new = harness.pw.fork(old, step=2, input={"x": 10})
    harness.run_jobs()
    assert harness.pw.get_run(new).output["z"] == 11


def test_bad_forks_are_refused_clearly(harness: Harness) -> None:
    """An unknown run, a step out of range, a taken or bad new run id, a child run: clear errors, no run."""
    old = _completed(harness)
    with pytest.raises(RunNotFound, match="no run 'nope'"):
        harness.pw.fork("nope", step=0)
    with pytest.raises(ValidationError, match=r"no step 3: it can be forked at steps 0 to 2"):
        harness.pw.fork(old, step=3)
    for bad in (-1, "1", True):
        with pytest.raises(ValidationError, match="fork step must be a non-negative integer"):
            harness.pw.fork(old, step=bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="already exists"):
        harness.pw.fork(old, step=0, new_run_id=old)
    with pytest.raises(ValidationError, match="--"):
        harness.pw.fork(old, step=0, new_run_id="a--b")
    with pytest.raises(ValidationError):
        harness.pw.fork("bad id!", step=0)
    with pytest.raises(ValidationError, match="input"):
        harness.pw.fork(old, step=0, input=[1])  # type: ignore[arg-type]
    parent = harness.start_and_run(flows_fork.tree_flow, {})
    record = harness.pw.store.get_run(parent, 0)
    assert record is not None and record.waiting_on is not None and record.waiting_on.startswith("child:")
    with pytest.raises(ValidationError, match="child run"):
        harness.pw.fork(record.waiting_on.removeprefix("child:"), step=0)


def test_a_run_whose_records_expired_cannot_be_forked(harness: Harness) -> None:
    """Only the summary left (the records past their TTL): the fork says the run expired."""
    old = _completed(harness)
    client = harness.pw.store.client  # type: ignore[attr-defined]
    for key in (keys.run(old), keys.snapshots(old), keys.events(old)):
        client.delete(key)
    with pytest.raises(ValidationError, match="expired"):
        harness.pw.fork(old, step=1)


def test_snapshots_live_under_the_run_ttl_and_only_for_steps_after_the_first(harness: Harness) -> None:
    """A run parked at its first step has no snapshot key; later steps' snapshots expire with the run."""
    parked_first = harness.start_and_run(flows_fork.tree_flow, {})
    client = harness.pw.store.client  # type: ignore[attr-defined]
    assert client.exists(keys.snapshots(parked_first)) == 0
    old = harness.start_and_run(flows_fork.three, START)
    ttl = client.pttl(keys.snapshots(old))
    assert 0 < ttl and abs(ttl - client.pttl(keys.run(old))) < 2000


def test_a_fork_inside_a_loop_starts_from_that_pass(harness: Harness) -> None:
    """A node entered again and again: forking at its third activation starts with n = 2 and loops on."""
    old = harness.start_and_run(flows.loop, {})
    new = harness.pw.fork(old, step=2)
    assert harness.pw.get_run(new).input == {"n": 2}
    harness.run_jobs()
    run = harness.pw.get_run(new)
    assert run.status is RunStatus.COMPLETED and run.output == {"n": 3, "done": True}, run
    steps = [e.data["step"] for e in harness.pw.store.read_events(new, "0", None, 100) if e.type == "node.started"]
    assert steps == [0, 1]  # the fork's activations are its own: count_up as the old run's step 2, then finish


def _approved_below(harness: Harness, gate: str) -> str:
    """A completed run of flows_fork.payment whose step 0 passed its approval in a run below."""
    run_id = harness.start_and_run(flows_fork.payment, {"gate": gate, "to": "shop", "amount": 10})
    asked = harness.pw.list_interrupts(run_id=run_id, include_tokens=True).items
    approval = next(i for i in asked if i.workflow == "fork_approval")
    assert approval.run_id != run_id and approval.resume_token is not None
    assert harness.pw.resume(approval.resume_token, selected="yes").accepted
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.COMPLETED and run.output["charged"] == {"to": "shop", "amount": 10}, run
    return run_id


@pytest.mark.parametrize("gate", flows_fork.GATES)
def test_an_approval_in_a_run_below_is_a_gate_a_fork_past_it_asks_again(harness: Harness, gate: str) -> None:
    """An approval answered in a child, a grandchild, a fan-out's child or a use_first race's child
    (of the run or of its child) gates the root's step that started them: ``gated_step`` of a later
    step is that step, and a fork there with new input asks the approval again, charging nothing."""
    old = _approved_below(harness, gate)
    assert harness.pw.gated_step(old, 1) == 0
    assert harness.pw.gated_step(old, 0) == 0
    new = harness.pw.fork(old, step=harness.pw.gated_step(old, 1), input={"to": "attacker", "amount": 999999})
    harness.run_jobs()
    run = harness.pw.get_run(new)
    assert run.status is RunStatus.WAITING and "charged" not in (run.data or {}), run
    assert any(i.workflow == "fork_approval" for i in harness.pw.list_interrupts(run_id=new).items)
