"""The resume metadata parser and answer validation, without a store."""

from __future__ import annotations

import pytest

from parkway import InterruptRequest, InvalidAnswer, parse_resume_metadata
from parkway.errors import MalformedResume
from parkway.runtime.answers import validate_answer

TOKEN = "run_1.int_1." + "A" * 32


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("resume", "selected"),
    [
        ({"selected": "a"}, ["a"]),
        ({"selected": ["a", "b"]}, ["a", "b"]),
        ({"selected": {"choice": {"id": "a"}}}, ["a"]),
        ({"selected": {"choices": [{"id": "a"}, {"id": "b"}]}}, ["a", "b"]),
        ({"choice": {"id": "a"}}, ["a"]),
        ({"choice": "a"}, ["a"]),
        ({"choices": [{"id": "a"}, "b"]}, ["a", "b"]),
    ],
)
def test_every_selected_shape_normalises_to_ids(resume: dict, selected: list[str]) -> None:
    """selected as string, list, {choice:{id}}, {choices:[{id}]} (and choice/choices keys) give a list of ids."""
    message = {"role": "user", "content": "x", "metadata": {"resume": {"token": TOKEN, "requestId": "r1", **resume}}}
    args = parse_resume_metadata(message)
    assert (args.token, args.request_id, args.selected, args.value) == (TOKEN, "r1", selected, None)


def test_value_shape_is_passed_through() -> None:
    """A contract-style value is returned as is."""
    args = parse_resume_metadata(
        {"resume": {"token": TOKEN, "requestId": "r1", "value": {"type": "select", "jobId": "job-123"}}}
    )
    assert args.value == {"type": "select", "jobId": "job-123"} and args.selected is None


@pytest.mark.parametrize(
    "message",
    [
        [],
        {"metadata": "nope"},
        {"metadata": {"resume": "nope"}},
        {"metadata": {"resume": {"selected": "a"}}},
        {"metadata": {"resume": {"token": "", "selected": "a"}}},
        {"metadata": {"resume": {"token": 5, "selected": "a"}}},
        {"metadata": {"resume": {"token": TOKEN}}},
        {"metadata": {"resume": {"token": TOKEN, "selected": "a", "value": 1}}},
        {"metadata": {"resume": {"token": TOKEN, "selected": 3}}},
        {"metadata": {"resume": {"token": TOKEN, "selected": [None]}}},
        {"metadata": {"resume": {"token": TOKEN, "selected": {"choice": {"name": "a"}}}}},
        {"metadata": {"resume": {"token": TOKEN, "selected": {"other": 1}}}},
        {"metadata": {"resume": {"token": TOKEN, "requestId": 7, "selected": "a"}}},
        {"metadata": {"resume": {"token": TOKEN, "requestId": "r1", "selected": ["a"] * 1001}}},
        {"metadata": {"resume": {"token": TOKEN, "selected": "a"}}},
        {"metadata": {"resume": {"token": TOKEN, "requestId": "", "selected": "a"}}},
        {"metadata": {"resume": {"token": TOKEN, "requestId": "r1", "cancel": "yes"}}},
        {"metadata": {"resume": {"token": TOKEN, "requestId": "r1", "cancel": True, "reason": 5}}},
        {"metadata": {"resume": {"token": TOKEN, "requestId": "r1", "cancel": False}}},
        {"metadata": {"resume": {"token": TOKEN, "requestId": "r1", "value": _nested(40)}}},
        _nested(5000),
    ],
)
def test_malformed_metadata_is_rejected_clearly(message: object) -> None:
    """Every malformed shape raises MalformedResume with a message naming the problem."""
    with pytest.raises(MalformedResume):
        parse_resume_metadata(message)  # type: ignore[arg-type]


CHOICE = InterruptRequest(kind="choice", question="?", options=[{"id": "a", "label": "A"}, {"id": "b", "label": "B"}])
MULTI = InterruptRequest(
    kind="multi-choice", question="?", options=[{"id": "a", "label": "A"}, {"id": "b", "label": "B"}]
)


def test_answers_take_the_shape_of_the_request() -> None:
    """choice gives one id, multi-choice a list, text the string."""
    assert validate_answer(CHOICE, selected=["a"]) == "a"
    assert validate_answer(MULTI, selected="b") == ["b"]
    assert validate_answer(InterruptRequest(kind="text", question="?"), value="hi") == "hi"


def test_requests_are_checked_when_built() -> None:
    """A choice without options or schema id, or with duplicate option ids, is refused."""
    with pytest.raises(ValueError, match="needs options"):
        InterruptRequest(kind="choice", question="?")
    with pytest.raises(ValueError, match="unique"):
        InterruptRequest(kind="choice", question="?", options=[{"id": "a", "label": "A"}] * 2)
    with pytest.raises(ValueError):
        InterruptRequest(kind="text", question="?", options=[{"id": "a", "label": "A"}])


def test_both_selected_and_value_is_refused() -> None:
    """An answer carries either option ids or a value."""
    with pytest.raises(InvalidAnswer, match="not both"):
        validate_answer(CHOICE, selected="a", value="a")


@pytest.mark.parametrize("extra", [{}, {"selected": "a"}, {"value": "text"}, {"reason": "no thanks"}])
def test_cancel_true_is_a_cancellation_never_an_answer(extra: dict) -> None:
    """{cancel: true} parses as a cancellation, and wins over an answer in the same message."""
    args = parse_resume_metadata({"metadata": {"resume": {"token": TOKEN, "requestId": "r1", "cancel": True, **extra}}})
    assert args.cancel and args.selected is None and args.value is None
    assert args.reason == extra.get("reason")


@pytest.mark.parametrize("depth", [33, 400, 600, 50_000])
def test_deeply_nested_answers_are_refused_with_a_parkway_error(depth: int) -> None:
    """An answer nested past the bound raises InvalidAnswer (never RecursionError), however deep."""
    with pytest.raises(InvalidAnswer, match="levels deep"):
        validate_answer(MULTI, selected=_nested(depth))
    with pytest.raises(InvalidAnswer, match="levels deep"):
        validate_answer(InterruptRequest(kind="text", question="?"), value=_nested(depth))
