"""A replayed use_workflow must ask for the child it recorded; child input has run input's bounds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from parkway import RunStatus
from tests import flows_model
from tests.conftest import Harness


@pytest.fixture(autouse=True)
def _knobs() -> Iterator[None]:
    flows_model.reset_knobs()
    yield
    flows_model.reset_knobs()


@pytest.mark.parametrize(("knob", "value", "shown"), [("child", "doubler", "doubler"), ("a", 7, "input")])
def test_a_replay_asking_another_child_or_input_is_nondeterministic(
    harness: Harness, knob: str, value: object, shown: str
) -> None:
    """The parent's node replays after its child ended; asking use_workflow for another child workflow
    or another input under the same id fails the run with the nondeterminism error, naming both."""
    run_id = harness.start_and_run(flows_model.calls_then_asks, {})
    assert harness.pw.get_run(run_id).status is RunStatus.WAITING
    flows_model.knobs[knob] = value
    assert harness.pw.resume(harness.token(run_id), selected="red").accepted
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.FAILED and run.error is not None, run
    assert run.error.type.endswith("NondeterminismError") and "c:calc" in run.error.message
    assert shown in run.error.message and "adder" in run.error.message


def test_the_same_child_and_input_replay_as_before(harness: Harness) -> None:
    """Unchanged code replays past the recorded child and completes with its output."""
    run_id = harness.start_and_run(flows_model.calls_then_asks, {})
    assert harness.pw.resume(harness.token(run_id), selected="blue").accepted
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.COMPLETED and run.output == {"sum": 3, "color": "blue"}, run


def test_child_input_nested_deeper_than_run_input_may_be_fails_the_parent(harness: Harness) -> None:
    """A child input nesting past the run input bound fails the parent saying so; no child starts."""
    flows_model.knobs["depth"] = 40
    run_id = harness.start_and_run(flows_model.calls_then_asks, {})
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.FAILED and run.error is not None
    assert "child workflow input nests" in run.error.message
    assert [e for e in harness.pw.store.read_events(run_id, "0", None, 100) if e.type == "child.started"] == []
