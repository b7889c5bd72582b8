"""Expiry policies: what the reconciler does with an interrupt nobody answered within its TTL."""

from __future__ import annotations

import time
from typing import Any

import pytest

from parkway import ResumeOutcome, RunStatus, ValidationError, Workflow
from parkway.workers.reconciler import reconcile_once
from tests import flows
from tests.conftest import Harness


def _expire(harness: Harness, run_id: str) -> list[str]:
    """Wait out the pause, let a reconciler pass apply the policy, run what it queued; the events."""
    event = harness.interrupt_event(run_id)
    time.sleep(max(0.0, event["expiresAt"] / 1000 - time.time()) + 0.1)
    reconcile_once(harness.pw.store, harness.pw.backend.dispatcher)  # (the embedded worker may be first)
    harness.run_jobs()
    deadline = time.time() + 10
    while harness.pw.get_run(run_id).status in (RunStatus.WAITING, RunStatus.QUEUED, RunStatus.RUNNING):
        assert time.time() < deadline, harness.pw.get_run(run_id)
        time.sleep(0.05)
        harness.run_jobs()
    return [e.type for e in harness.pw.store.read_events(run_id, "0", None, 1000)]


@pytest.mark.parametrize(
    ("policy", "status", "output"),
    [
        (None, RunStatus.EXPIRED, None),
        ("expire", RunStatus.EXPIRED, None),
        ("cancel", RunStatus.COMPLETED, {"picked": None, "cancelled": "expired"}),
        ({"answer": "blue"}, RunStatus.COMPLETED, {"picked": "blue"}),
        ("fail", RunStatus.FAILED, None),
    ],
)
def test_each_expiry_policy_is_applied_once_by_the_reconciler(
    harness: Harness, policy: Any, status: RunStatus, output: Any
) -> None:
    """expire ends the run expired; fail ends it failed; cancel replays the node with
    InterruptCancelled (reason "expired"); an answer replays it with the default; each records one
    interrupt.expired saying the action, and the token then reads expired."""
    run_id = harness.start_and_run(flows.expiring, {"policy": policy})
    token = harness.interrupt_event(run_id)["resumeToken"]  # (the 1 s pause may be over already)
    events = _expire(harness, run_id)
    run = harness.pw.get_run(run_id)
    assert run.status is status, run
    if output is not None:
        assert {k: run.output[k] for k in output} == output
    assert events.count("interrupt.expired") == 1 and events[-1] == "done"
    expired = [e for e in harness.pw.store.read_events(run_id, "0", None, 1000) if e.type == "interrupt.expired"][0]
    assert expired.data["action"] == (policy if isinstance(policy, str) else "answer" if policy else "expire")
    assert harness.pw.resume(token, selected="red").outcome is ResumeOutcome.EXPIRED


def test_a_workflow_default_policy_applies_to_its_interrupts(harness: Harness) -> None:
    """Workflow(on_expire="fail") fails a run whose interrupt expires, naming the interrupt."""
    run_id = harness.start_and_run(flows.fails_on_expiry)
    _expire(harness, run_id)
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.FAILED and run.error is not None and "expired" in run.error.message


@pytest.mark.parametrize("policy", ["later", {"answer": "green"}, {"answer": "red", "also": 1}, 7])
def test_a_bad_policy_or_default_answer_fails_the_node_before_it_pauses(harness: Harness, policy: Any) -> None:
    """An unknown action, or a default answer that does not fit the request, is a clear error."""
    run_id = harness.start_and_run(flows.expiring, {"policy": policy})
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.FAILED and run.error is not None
    assert "on_expire" in run.error.message or "unknown option" in run.error.message, run.error.message
    assert harness.pw.list_interrupts(run_id=run_id).items == ()


def test_workflow_policy_is_checked_like_the_hooks() -> None:
    """Workflow(on_expire=...) takes the same values (checked when an interrupt uses it)."""
    assert Workflow("w_ok", on_expire={"answer": "x"}).on_expire == {"answer": "x"}
    with pytest.raises(ValidationError):
        from parkway.runtime.expiry import expiry_policy
        from parkway.runtime.protocol import InterruptRequest

        expiry_policy(InterruptRequest.model_validate(flows.COLORS), "never")
