"""Answers to an interrupt: parse the resume message-metadata shape, validate an answer against its request.

Validation happens before anything is released: an answer that does not fit
raises :class:`InvalidAnswer` and the interrupt stays open with the same token.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .contracts import Contract
from .errors import InvalidAnswer, MalformedResume
from .protocol import InterruptRequest, check_depth

MAX_SELECTED = 1000
MAX_ID_LENGTH = 200


@dataclass(frozen=True)
class ResumeArgs:
    """A resume, as parsed from message metadata: an answer, or (``cancel``) a cancellation."""

    token: str
    request_id: str
    selected: list[str] | None = None
    value: Any = None
    cancel: bool = False
    reason: str | None = None


def _ids(raw: object, where: str) -> list[str]:
    """Normalise every accepted ``selected`` shape to a list of ids."""
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, Mapping):
        if set(raw) == {"choice"}:
            return _ids(raw["choice"], where + ".choice")
        if set(raw) == {"choices"}:
            return _ids(raw["choices"], where + ".choices")
        if set(raw) == {"id"} or ("id" in raw and "label" in raw):
            return _ids(raw["id"], where + ".id")
        raise MalformedResume(f"{where} must be an id, a list of ids, {{choice: {{id}}}} or {{choices: [{{id}}]}}")
    if isinstance(raw, Sequence) and not isinstance(raw, (bytes, bytearray)):
        if len(raw) > MAX_SELECTED:
            raise MalformedResume(f"{where} holds more than {MAX_SELECTED} ids")
        out: list[str] = []
        for i, item in enumerate(raw):
            out.extend(_ids(item, f"{where}[{i}]") if isinstance(item, Mapping) else _one_id(item, f"{where}[{i}]"))
        return out
    raise MalformedResume(f"{where} must be an id, a list of ids, {{choice: {{id}}}} or {{choices: [{{id}}]}}")


def _one_id(item: object, where: str) -> list[str]:
    if not isinstance(item, str):
        raise MalformedResume(f"{where} must be a string id, not {type(item).__name__}")
    return [item]


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
    return ResumeArgs(token, request_id, _ids(raw, f"metadata.resume.{key}"), None)


def validate_answer(
    request: InterruptRequest, *, selected: Any = None, value: Any = None, contract: Contract[Any, Any] | None = None
) -> Any:
    """Return the value to record for ``request``, or raise InvalidAnswer.

    A contract request needs its ``contract`` (found by the caller from the request's reference)."""
    if selected is not None and value is not None:
        raise InvalidAnswer("give either selected or value, not both")
    check_depth(selected if selected is not None else value, "the answer", error=InvalidAnswer)
    if request.kind == "contract":
        if selected is not None or value is None:
            raise InvalidAnswer(f"a contract request ({request.schema_id}) takes value=<an object>, not selected")
        if contract is None:
            raise InvalidAnswer(f"no contract to check the answer against ({request.schema_id})")
        if (contract.schema_id, contract.version) != (request.schema_id, request.schema_version):
            raise InvalidAnswer(
                f"the request was made under {request.schema_id} v{request.schema_version}, but the contract "
                f"now defined there is {contract.schema_id} v{contract.version}"
            )
        return contract.check_answer(value)
    if request.kind == "text":
        if selected is not None and value is None:
            # other clients send text in `selected`: a string, or a list of one string
            if isinstance(selected, list) and len(selected) == 1:
                selected = selected[0]
            if not isinstance(selected, str):
                raise InvalidAnswer("a text request takes value=<text> (or selected=<text>)")
            value = selected
        return _text(request, value)
    if value is not None:
        raise InvalidAnswer(f"a {request.kind} request takes selected=<option id(s)>, not value")
    if selected is None:
        raise InvalidAnswer(f"a {request.kind} request needs selected=<option id(s)>")
    try:
        ids = _ids(selected, "selected")
    except MalformedResume as exc:
        raise InvalidAnswer(exc.message) from exc
    if not ids:
        raise InvalidAnswer("selected is empty: pick at least one option")
    if len(set(ids)) != len(ids):
        raise InvalidAnswer("selected names an option more than once")
    for oid in ids:
        if not oid or len(oid) > MAX_ID_LENGTH:
            raise InvalidAnswer(f"option ids are 1-{MAX_ID_LENGTH} characters")
    if not request.is_picker:
        known = {o.id for o in request.options}
        unknown = [oid for oid in ids if oid not in known]
        if unknown:
            raise InvalidAnswer(f"unknown option id(s) {unknown}; the request offers {sorted(known)}")
    if request.multiple:
        return ids
    if len(ids) != 1:
        raise InvalidAnswer(f"a choice request takes exactly one option, got {len(ids)}")
    return ids[0]


def _text(request: InterruptRequest, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidAnswer(f"a text request needs a string value, got {type(value).__name__}")
    if not value.strip():
        raise InvalidAnswer("the text answer is empty")
    if len(value) > request.max_length:
        raise InvalidAnswer(f"the text answer is longer than {request.max_length} characters")
    return value
