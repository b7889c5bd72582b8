"""What the seed system's clients send works unchanged: text in `selected`, requests without a kind
or a question, `multiple: true`, option fields kept server-side, the hook id on the event, and
state setters that take an updater."""

from __future__ import annotations

import pytest

from parkway import InterruptRequest, InvalidAnswer, RunStatus
from parkway.runtime.answers import validate_answer
from tests import flows
from tests.conftest import Harness

TEXT = InterruptRequest.model_validate({"question": "Why?"})


@pytest.mark.parametrize("selected", ["because", ["because"]])
def test_a_text_answer_may_arrive_in_selected(selected: object) -> None:
    """A text request takes its answer in `selected` as a string or a list of one string."""
    assert validate_answer(TEXT, selected=selected) == "because"


@pytest.mark.parametrize("selected", [["a", "b"], [], 5, {"choice": {"id": "x"}}])
def test_other_selected_shapes_are_no_text_answer(selected: object) -> None:
    """Two strings, none, a number or a choice object are not a text answer."""
    with pytest.raises(InvalidAnswer):
        validate_answer(TEXT, selected=selected)


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        ({"question": "q"}, "text"),
        ({"options": [{"id": "a", "label": "A"}]}, "choice"),
        ({"multiple": True, "options": [{"id": "a", "label": "A"}]}, "multi-choice"),
        ({"kind": "choice", "multiple": True, "options": [{"id": "a", "label": "A"}]}, "multi-choice"),
        ({"kind": "choice", "multiple": False, "options": [{"id": "a", "label": "A"}]}, "choice"),
    ],
)
def test_request_kinds_are_inferred_as_the_seed_does(raw: dict, kind: str) -> None:
    """No kind: text, or choice with options, multi-choice with multiple: true; choice plus
    multiple: true is multi-choice; a request's public form validates again to the same request."""
    request = InterruptRequest.model_validate(raw)
    assert request.kind == kind
    assert InterruptRequest.model_validate(request.public()).kind == kind


@pytest.mark.parametrize(
    "raw",
    [
        {"kind": "text", "question": "Why?"},
        {"kind": "choice", "question": "Ship?", "options": [{"id": "y", "label": "Yes", "value": 3},
                                                            {"id": "n", "label": "No", "description": "not now"}]},
        {"options": [{"id": "a", "label": "A"}], "multiple": True},
        {"kind": "choice", "schemaId": "teams", "schemaVersion": 2},
        {"kind": "choice", "options": [{"id": "a", "label": "A"}], "meta": {"k": None, "n": [1, {"x": None}]}},
    ],
)
def test_a_requests_public_form_is_its_camel_case_dump_without_internals(raw: dict[str, object]) -> None:
    """``public()`` is the request dumped by alias without its None fields, ``maxLength`` or
    ``contractRef``, key for key in the model's order, options as their public form (a list), an
    empty ``meta`` left out, ``multiple`` last."""
    request = InterruptRequest.model_validate(raw)
    dumped = request.model_dump(by_alias=True, exclude_none=True, exclude={"max_length", "contract_ref"})
    dumped["options"] = [option.public() for option in request.options]
    dumped["multiple"] = request.multiple
    if not request.meta:
        dumped.pop("meta", None)
    assert list(request.public().items()) == list(dumped.items())


def test_contradictory_or_malformed_shapes_are_refused() -> None:
    """multi-choice with multiple: false, or a multiple that is not a boolean, is refused."""
    for raw in ({"kind": "multi-choice", "multiple": False, "options": [{"id": "a", "label": "A"}]},
                {"multiple": "yes", "options": [{"id": "a", "label": "A"}]}):
        with pytest.raises(ValueError):
            InterruptRequest.model_validate(raw)


def test_seed_shapes_run_end_to_end(harness: Harness) -> None:
    """A node asking in the seed's shapes pauses twice, takes text through `selected`, keeps option
    values server-side, puts the hook id on each interrupt event, and its updater setters apply in
    order."""
    run_id = harness.start_and_run(flows.seed_shapes)
    first = harness.interrupt_event(run_id)
    assert first["id"] == "why" and first["input"]["kind"] == "text"
    assert harness.pw.resume(harness.token(run_id), selected=["because"]).accepted
    harness.run_jobs()
    second = [e.data for e in harness.pw.store.read_events(run_id, "0", None, 100) if e.type == "interrupt"][-1]
    assert second["id"] == "teams" and second["input"]["kind"] == "multi-choice"
    assert second["input"]["options"] == [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}]
    listed = harness.pw.list_interrupts(run_id=run_id).items[0]
    assert "value" not in listed.request.public()["options"][0]
    assert harness.pw.resume(harness.token(run_id), selected=["b"]).accepted
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.COMPLETED
    assert run.output["note"] == "because" and run.output["teams"] == ["b"]
    assert run.output["count"] == 2  # two updaters from 0, seen on the replays
    assert run.output["total"] == 25  # 10 + 5 per attempt of the node: it ran three times
