"""Typed interrupt contracts: a request model and a response model under a schema id and version.

A contract is what an application's picker and the node agree on::

    class JobQuery(BaseModel):
        team: str

    class JobPick(BaseModel):
        job_id: str

    pick_job = Contract("pick-job", version=1, request=JobQuery, response=JobPick,
                        question="Which job?")

    @flow.node(start=True)
    def choose(data):
        pick = use_interrupt(contract=pick_job, request={"team": data["team"]}, id="job")
        return {"job": pick.job_id}            # pick is a validated JobPick

The request is validated before the run pauses (a bad one fails the node, as
any error would); the answer, sent as ``resume(token, value={...})``, is
validated by the client against the response model *before* the token is
released: a violation raises :class:`InvalidAnswer` and the interrupt stays
open with the same token. Events and listings carry ``schemaId`` and
``schemaVersion``; the stored request names the contract by import path, so
the resuming process finds the response model the way workers find workflows
(define contracts at module level, in modules the deployment allows).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from .errors import InvalidAnswer, WorkflowError
from .workflow import module_ref

Req = TypeVar("Req", bound=BaseModel)
Resp = TypeVar("Resp", bound=BaseModel)


@dataclass(eq=False)
class Contract(Generic[Req, Resp]):
    """A named, versioned pair of pydantic models: what a node asks, and what it accepts back."""

    schema_id: str
    version: int
    request: type[Req]
    response: type[Resp]
    question: str = ""
    """shown to the person (and in listings); defaults to the schema id"""
    _module: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.schema_id, str) or not 1 <= len(self.schema_id) <= 200:
            raise WorkflowError("a contract's schema id is a string of 1-200 characters")
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 1:
            raise WorkflowError("a contract's version is an integer >= 1")
        for what, model in (("request", self.request), ("response", self.response)):
            if not (isinstance(model, type) and issubclass(model, BaseModel)):
                raise WorkflowError(f"a contract's {what} must be a pydantic model class")
        if not self._module:
            self._module = sys._getframe(2).f_globals.get("__name__", "")

    def ref(self) -> str:
        """The import path a resuming client uses to find this contract (``module:attribute``)."""
        return module_ref(self, self._module, f"contract {self.schema_id!r}", "the process that resumes it")

    def check_request(self, request: Any) -> dict[str, Any]:
        """The request as plain data, validated against the request model (raises WorkflowError)."""
        try:
            model = request if isinstance(request, self.request) else self.request.model_validate(request)
        except PydanticValidationError as exc:
            raise WorkflowError(f"the request does not fit contract {self.schema_id!r} v{self.version}: {exc}") from exc
        return model.model_dump(mode="json")

    def check_answer(self, value: Any) -> dict[str, Any]:
        """The answer as plain data, validated against the response model (raises InvalidAnswer)."""
        try:
            model = self.response.model_validate(value)
        except PydanticValidationError as exc:
            by_field: dict[str, str] = {}
            for error in exc.errors()[:10]:
                by_field.setdefault(".".join(str(p) for p in error["loc"]) or "value", error["msg"])
            problems = "; ".join(f"{where}: {what}" for where, what in by_field.items())
            raise InvalidAnswer(
                f"the answer does not fit contract {self.schema_id!r} v{self.version}: {problems}",
                problems=by_field,  # field path ("note", "items.0.id"; "value" for the whole) -> why
            ) from exc
        return model.model_dump(mode="json")

    def answer(self, recorded: Any) -> Resp:
        """The recorded answer as the response model (what ``use_interrupt`` returns)."""
        return self.response.model_validate(recorded)
