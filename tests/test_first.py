"""use_first: the first of an answer and a timer wins; the loser is cancelled cleanly."""

from __future__ import annotations

import time

import pytest

from parkway import ResumeOutcome, RunStatus, ValidationError, use_first
from parkway.workers.reconciler import reconcile_once
from tests import flows_model
from tests.conftest import Harness


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
