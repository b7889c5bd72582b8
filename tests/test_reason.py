"""Model-decided asks: a scripted model answers, asks through a contract, or is bounded; replays
continue from the recorded turns."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from parkway import RunStatus, ValidationError
from parkway.agents import ScriptedModel
from tests import flows
from tests.conftest import Harness

ASK = {"tool": "ask_pick_job", "arguments": {"team": "ops"}}
LOOKUP = {"tool": "lookup_team", "arguments": {"team": "ops"}}


@pytest.fixture(autouse=True)
def _scripts() -> Iterator[None]:
    yield
    flows.reasoners.clear()


def _start(harness: Harness, script: list, **data: object) -> tuple[str, ScriptedModel]:
    model = ScriptedModel(script)
    flows.reasoners["s"] = model
    run_id = harness.start_and_run(flows.reasoning, {"script": "s", "question": "Which job?", **data})
    return run_id, model


def test_optional_mode_lets_the_model_finish_without_asking(harness: Harness) -> None:
    """In optional mode a model that answers at once completes the run without a pause."""
    run_id, model = _start(harness, [{"answer": "job-1"}])
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.COMPLETED and run.output["answer"] == "job-1"
    assert model.calls == [0]


def test_required_mode_asks_once_and_replays_from_its_checkpoint(harness: Harness) -> None:
    """In required mode a first answer is sent back; the model asks through the contract, the run
    pauses, and after the resume the recorded turns and tool results are not taken again."""
    run_id, model = _start(harness, [{"answer": "too soon"}, LOOKUP, ASK, flows._final_from_tool], mode="required")
    assert harness.pw.get_run(run_id).status is RunStatus.WAITING
    event = harness.interrupt_event(run_id)
    assert event["input"]["schemaId"] == "pick-job" and event["input"]["payload"]["team"] == "ops"
    assert model.calls == [0, 1, 2] and flows.effects["lookup:ops"] == 1
    assert harness.pw.resume(harness.token(run_id), value={"job_id": "job-77"}).accepted
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.COMPLETED and run.output["answer"] == {"picked": "job-77"}
    assert model.calls == [0, 1, 2, 3]  # only the turn after the answer was asked for
    assert flows.effects["lookup:ops"] == 1  # the tool before the pause ran once


def test_max_requests_stops_a_further_ask(harness: Harness) -> None:
    """With max_requests=1 a second ask is refused to the model and it must answer: one interrupt."""
    run_id, model = _start(harness, [ASK, ASK, flows._final_from_tool], max_requests=1)
    assert harness.pw.resume(harness.token(run_id), value={"job_id": "job-1"}).accepted
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.COMPLETED and run.output["answer"] == {"picked": "job-1"}
    interrupts = [e for e in harness.pw.store.read_events(run_id, "0", None, 1000) if e.type == "interrupt"]
    assert len(interrupts) == 1


def test_an_answer_that_breaks_the_contract_is_refused_before_the_model_sees_it(harness: Harness) -> None:
    """The person's answer is checked against the contract's response model; the pause stays open."""
    from parkway import InvalidAnswer

    run_id, _ = _start(harness, [ASK, flows._final_from_tool])
    token = harness.token(run_id)
    with pytest.raises(InvalidAnswer):
        harness.pw.resume(token, value={"job_id": "not-a-job"})
    assert harness.pw.resume(token, value={"job_id": "job-2"}).accepted


def test_required_mode_needs_something_to_ask_with() -> None:
    """mode='required' without a contract, or with max_requests=0, is refused at once."""
    from parkway.runtime.hooks import NodeContext, activate, deactivate
    from parkway.runtime.reasoning import use_reason

    ctx = NodeContext(None, "r", "w", "n", 0, 0, {}, {}, lambda: 0)  # type: ignore[arg-type]
    token = activate(ctx)
    try:
        with pytest.raises(ValidationError):
            use_reason(ScriptedModel([]), "q", id="x", mode="required")
        with pytest.raises(ValidationError):
            use_reason(ScriptedModel([]), "q", id="x", contracts=[flows.pick_job], mode="required", max_requests=0)
    finally:
        deactivate(token)
