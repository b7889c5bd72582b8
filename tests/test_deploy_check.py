"""Deploy check: a parked run's journal against the code deployed now, with nothing committed."""

from __future__ import annotations

import pytest

from parkway import RunStatus
from parkway.runtime.clock import now_ms
from parkway.runtime.store import NewRun
from tests import flows
from tests.conftest import Harness


def _events(harness: Harness, run_id: str) -> list[str]:
    return [e.type for e in harness.pw.store.read_events(run_id, "0", None, 1000)]


def test_check_deploy_against_the_same_code_is_consistent_and_commits_nothing(harness: Harness) -> None:
    """The recorded hooks match and the node pauses again where it did; no step function runs, no
    event or state is written, and the run still waits with the same token."""
    run_id = harness.start_and_run(flows.stepper, {"tag": "r1"})
    token, before = harness.token(run_id), _events(harness, run_id)
    report = harness.pw.check_deploy(run_id, "tests.flows:stepper")
    assert report.outcome == "consistent" and "i:confirm" in report.detail, report
    assert report.recorded >= 3 and report.node == "steps"
    assert flows.effects["charge:r1"] == 1  # the step function was not called again
    assert _events(harness, run_id) == before and harness.pw.get_run(run_id).status is RunStatus.WAITING
    assert harness.pw.resume(token, selected="red").accepted


def test_check_deploy_finds_a_changed_hook_order(harness: Harness) -> None:
    """Code whose hooks come in another order is reported nondeterministic, naming the position,
    what was recorded and what is asked now; nothing changes."""
    run_id = harness.start_and_run(flows.announcer, {"tag": "r2"})
    assert harness.pw.check_deploy(run_id, flows.announcer).outcome == "consistent"
    report = harness.pw.check_deploy(run_id, flows.announcer_changed)
    assert report.outcome == "nondeterministic", report
    assert "@0" in report.detail and "emit" in report.detail and "state" in report.detail, report.detail
    assert flows.effects["charge:r2"] == 1
    assert harness.pw.get_run(run_id).status is RunStatus.WAITING


def test_check_deploy_stops_at_the_first_hook_with_nothing_recorded(harness: Harness) -> None:
    """A run whose node has recorded nothing yet replays to its first hook and stops there."""
    run_id = "run_replay_r3"  # a queued run whose job nobody enqueued: nothing recorded
    harness.manual_store.create_run(NewRun(run_id, "guarded", "tests.flows:guarded", "send_once", {"tag": "r3"},
                                       60_000, now_ms()))
    report = harness.pw.check_deploy(run_id, flows.guarded)
    assert report.outcome == "consistent" and "new work starts" in report.detail
    assert flows.effects["email:r3"] == 0


def test_replay_is_a_deprecated_alias_of_check_deploy(harness: Harness) -> None:
    run_id = harness.start_and_run(flows.announcer, {"tag": "t"})
    with pytest.warns(DeprecationWarning, match="check_deploy"):
        report = harness.pw.replay(run_id, flows.announcer)
    assert report == harness.pw.check_deploy(run_id, flows.announcer)
