"""Answers to an interrupt: parse the resume message-metadata shape, validate an answer against its request.

Validation happens before anything is released: an answer that does not fit
raises :class:`InvalidAnswer` and the interrupt stays open with the same token.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import kinds
from .contracts import Contract
from .errors import InvalidAnswer, MalformedResume
from .kinds.base import option_ids
from .protocol import InterruptRequest, check_depth


@dataclass(frozen=True)
class ResumeArgs:
    """A resume, as parsed from message metadata: an answer, or (``cancel``) a cancellation."""

    token: str
    request_id: str
    selected: list[str] | None = None
    value: Any = None
    cancel: bool = False
    reason: str | None = None


def parse_resume_metadata(message: Mapping[str, Any]) -> ResumeArgs:
    """Read ``metadata.resume = {token, requestId, selected | choice | choices | value}``,
    or ``{token, requestId, cancel: true, reason?}`` to cancel the request instead.

    Accepts the whole message, its ``metadata``, or the ``resume`` object itself.
    ``requestId`` is required: it names the request the person saw. A message that
    carries ``cancel: true`` cancels, whatever answer it also carries: a cancel is
    never recorded as an answer.
    """
    if not isinstance(message, Mapping):
        raise MalformedResume("resume metadata must be an object")
    check_depth(message, "resume metadata", error=MalformedResume)
    resume: Any = message
    if "metadata" in message:
        resume = message["metadata"]
        if not isinstance(resume, Mapping):
            raise MalformedResume("message.metadata must be an object")
    if "resume" in resume:
        resume = resume["resume"]
    if not isinstance(resume, Mapping):
        raise MalformedResume("metadata.resume must be an object")
    token = resume.get("token")
    if not isinstance(token, str) or not token:
        raise MalformedResume("metadata.resume.token must be a non-empty string")
    request_id = resume.get("requestId", resume.get("request_id"))
    if not isinstance(request_id, str) or not request_id:
        raise MalformedResume("metadata.resume.requestId must be the request's id (a non-empty string)")
    cancel = resume.get("cancel", False)
    if not isinstance(cancel, bool):
        raise MalformedResume("metadata.resume.cancel must be true or false")
    if cancel:
        reason = resume.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise MalformedResume("metadata.resume.reason must be a string")
        return ResumeArgs(token, request_id, cancel=True, reason=reason)
    answers = [k for k in ("selected", "choice", "choices", "value") if k in resume]
    if len(answers) > 1:
        raise MalformedResume(f"metadata.resume carries more than one answer: {answers}")
    if not answers:
        raise MalformedResume("metadata.resume needs one of selected, choice, choices or value (or cancel: true)")
    key = answers[0]
    if key == "value":
        return ResumeArgs(token, request_id, None, resume["value"])
    raw = resume[key] if key == "selected" else {key: resume[key]}
    return ResumeArgs(token, request_id, option_ids(raw, f"metadata.resume.{key}"), None)


def validate_answer(
    request: InterruptRequest, *, selected: Any = None, value: Any = None, contract: Contract[Any, Any] | None = None
) -> Any:
    """Return the value to record for ``request``, or raise InvalidAnswer: its kind checks it
    (:mod:`parkway.runtime.kinds`). A contract request needs its ``contract`` (found by the caller
    from the request's reference)."""
    if selected is not None and value is not None:
        raise InvalidAnswer("give either selected or value, not both")
    check_depth(selected if selected is not None else value, "the answer", error=InvalidAnswer)
    return kinds.get(request.kind).validate(request, selected, value, contract)
