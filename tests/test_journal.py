"""A node replays from its journal: what it emitted is not emitted again, and a hook that differs
from the one the journal recorded at its position fails the run with NondeterminismError."""

from __future__ import annotations

from typing import Any

import pytest

from parkway import (
    NondeterminismError,
    RunStatus,
    Workflow,
    emit,
    use_interrupt,
    use_node_state,
)
from tests import flows
from tests.conftest import Harness

emitting = Workflow("emitting")


@emitting.node(start=True)
def emits_around_pauses(data: dict[str, Any]) -> dict[str, Any]:
    """Emits before, between and after two pauses, with no use_node_state guard."""
    emit("progress", {"at": "before"})
    name = use_interrupt({"kind": "text", "question": "Your name?"}, id="name")
    emit("progress", {"at": "between", "name": name})
    color = use_interrupt(flows.COLORS, id="color")
    emit("progress", {"at": "after", "color": color})
    return {"name": name, "color": color}


drift = {"first": "emit", "data_type": "progress"}
"""what `drifts` does at journal position @0 on its next attempt (a test changes it between attempts)"""


drifting_names = Workflow("drifting_names")


@drifting_names.node(start=True)
def drifts(data: dict[str, Any]) -> dict[str, Any]:
    if drift["first"] == "emit":
        emit(drift["data_type"], {"n": 1})
    else:
        use_node_state(0)
    answer = use_interrupt(flows.COLORS, id="q")
    return {"answer": answer}


@pytest.fixture(autouse=True)
def _reset_drift() -> None:
    drift.update(first="emit", data_type="progress")


def test_emit_outside_a_node_state_guard_is_not_emitted_again_on_replay(harness: Harness) -> None:
    """A node that emits before, between and after two pauses, replayed twice, shows each data event
    exactly once, in order."""
    run_id = harness.start_and_run(emitting)
    assert harness.pw.resume(harness.token(run_id), value="Ada").accepted
    harness.run_jobs()
    assert harness.pw.resume(harness.token(run_id), selected="blue").accepted
    harness.run_jobs()
    assert harness.pw.get_run(run_id).output == {"name": "Ada", "color": "blue"}
    data = [e.data["data"] for e in harness.pw.stream(run_id, timeout=5) if e.type == "data"]
    assert data == [{"at": "before"}, {"at": "between", "name": "Ada"}, {"at": "after", "color": "blue"}]


def test_a_changed_data_type_at_the_same_position_raises_nondeterminism(harness: Harness) -> None:
    """If the node emits another data type where the journal recorded an emit, the run fails with
    NondeterminismError naming both."""
    run_id = harness.start_and_run(drifting_names)
    drift["data_type"] = "status"  # the node's code "changes" before its replay
    assert harness.pw.resume(harness.token(run_id), selected="red").accepted
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.FAILED and run.error is not None
    assert run.error.type.endswith(NondeterminismError.__name__) and run.error.node == "drifts"
    assert "@0" in run.error.message
    assert "recorded emit 'progress'" in run.error.message and "asks for emit 'status'" in run.error.message
    assert [e.data["dataType"] for e in harness.pw.stream(run_id, timeout=5) if e.type == "data"] == ["progress"]


def test_another_hook_at_the_same_position_raises_nondeterminism(harness: Harness) -> None:
    """If the node calls use_node_state where the journal recorded an emit, the run fails clearly."""
    run_id = harness.start_and_run(drifting_names)
    drift["first"] = "state"
    assert harness.pw.resume(harness.token(run_id), selected="red").accepted
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.FAILED and run.error is not None
    assert run.error.type.endswith(NondeterminismError.__name__)
    assert "recorded emit 'progress'" in run.error.message and "asks for state ''" in run.error.message


def test_the_same_hooks_replay_cleanly(harness: Harness) -> None:
    """The control: unchanged, the drifting node completes with its answer."""
    run_id = harness.start_and_run(drifting_names)
    assert harness.pw.resume(harness.token(run_id), selected="red").accepted
    harness.run_jobs()
    assert harness.pw.get_run(run_id).output == {"answer": "red"}
