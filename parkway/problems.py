"""The one error shape of parkway's HTTP API: problem details (RFC 9457, ``application/problem+json``).

Every error body, whatever raised it (a parkway error, a refused key, a body that does not fit its
schema, a bound reached, an answer that changed nothing), has:

==========  ==================================================================================
member      meaning
==========  ==================================================================================
``type``    a URI reference stable per kind of error, ``/problems/<kind>`` (``run-not-found``,
            ``already-resolved``, ``invalid-request``...): what a client branches on
``title``   the kind in words
``status``  the HTTP status
``detail``  what the caller can act on (never the server's paths, modules or Redis replies)
``error``   the kind's name (``RunNotFound``, ``AlreadyResolved``), as bodies before this one had it
==========  ==================================================================================

and, where there is one, ``outcome`` (an answer or cancel that changed nothing says why, with the
ids it concerns: ``runId``, ``requestId``..., and a cancelled run's own status as ``runStatus``),
``errors`` (a request that does not fit: each field, as ``body.ttlMs``, and why; a member spelt in
the other casing, ``body.ttl_ms``, says the one the body expects), or ``problems`` (a contract
answer that does not fit: field path -> why, as the inbox page shows them).
Members are camelCase, as every body and event is.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, get_args

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel, to_snake
from starlette.exceptions import HTTPException

MEDIA_TYPE = "application/problem+json"

_BY_STATUS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Gone",
    413: "PayloadTooLarge",
    415: "UnsupportedMediaType",
    422: "InvalidRequest",
    429: "TooManyRequests",
    503: "ServiceUnavailable",
}

_OUTCOMES = {
    "already_resolved": "this interrupt was answered or cancelled before: this call changed nothing",
    "already_cleared": "this interrupt was cleared before: this call changed nothing",
    "already_finished": "this run had finished before: this call changed nothing",
    "run:already_resolved": "this run had finished before: this call changed nothing",
    "expired": "this interrupt expired before the call came: it changed nothing",
    "unknown": "nothing pending answers to this: no such interrupt, or not one this key may reach",
}


class Problem(BaseModel):
    """An error body (RFC 9457), as the module's docstring says: the standard members, and those of
    its kind (``outcome`` with the ids it concerns, ``errors``, ``problems``)."""

    model_config = ConfigDict(extra="allow")
    type: str
    title: str
    status: int
    detail: str
    error: str
    outcome: str | None = None
    errors: list[dict[str, str]] | None = None
    problems: dict[str, str] | None = None


_SAID = {
    401: "no API key, or one this server does not know",
    403: "the key's role, owner or tenant does not reach this (or a metrics key, anywhere but /metrics)",
    404: "no such thing, or not one this key may reach",
    409: "changed nothing: already answered, cleared or finished (`outcome` says which), or in use",
    410: "changed nothing: it expired before the call came",
    413: "the body is larger than the server takes",
    422: "the request does not fit (each field and why in `errors`)",
    429: "this key has as many of these in flight as it may (`Retry-After` says when to try again)",
    503: "Redis does not answer: nothing was done, or the outcome is unknown; try again",
}


def responses(*statuses: int, html: bool = False) -> dict[int | str, dict[str, Any]]:
    """A route's error responses for the OpenAPI document (its ``responses=``): each status the
    route answers, a problem (``Problem``, served as ``application/problem+json``). FastAPI also
    lists the model under the route's own media type; ``html``: a route whose own is HTML (an
    answer link's pages), where the problem is named by reference only."""
    content = {MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}
    return {status: {"description": _SAID[status], "content": content, **({} if html else {"model": Problem})}
            for status in statuses}


def _kebab(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


def _words(name: str) -> str:
    return _kebab(name).replace("-", " ").capitalize()


def problem(
    status: int, name: str, detail: str, *, headers: Mapping[str, str] | None = None, **extra: Any
) -> JSONResponse:
    """A problem response of kind ``name`` (a parkway error's class name, or a kind such as
    ``AlreadyResolved``); ``extra`` members follow the standard ones."""
    body = {"type": f"/problems/{_kebab(name)}", "title": _words(name), "status": status, "detail": detail,
            "error": name, **extra}
    return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE, headers=dict(headers or {}))


def outcome_problem(status: int, body: Mapping[str, Any]) -> JSONResponse:
    """An answer, clear or cancel that changed nothing: its outcome's kind, with the body's members
    (``outcome`` and the ids it concerns)."""
    outcome = str(body["outcome"])
    name = to_camel(outcome)[:1].upper() + to_camel(outcome)[1:]
    # a cancel's body says the run's status: `status` is the problem's own member (the HTTP status)
    members = {("runStatus" if key == "status" else key): value for key, value in body.items()}
    said = _OUTCOMES.get(("run:" if "status" in body else "") + outcome) or _OUTCOMES.get(outcome)
    return problem(status, name, said or outcome.replace("_", " "), **members)


def _field(loc: Sequence[Any]) -> str:
    return ".".join(str(part) for part in loc)


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation names (``Body | None`` names ``Body``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in get_args(annotation) for model in _models(arg)]


def _spellings(request: Request, parent: Sequence[str]) -> set[str]:
    """The member names the route's body accepts at ``parent`` (a location inside the body): each
    field as the body spells it (its alias: camelCase, or the seed's names for its own input)."""
    body = getattr(request.scope.get("route"), "body_field", None)
    models = _models(body.field_info.annotation) if body is not None else []
    for part in parent:
        models = [inner for model in models for name, info in model.model_fields.items()
                  if (info.alias or name) == part for inner in _models(info.annotation)]
    return {info.alias or name for model in models for name, info in model.model_fields.items()}


def _errors(exc: RequestValidationError, request: Request) -> list[dict[str, str]]:
    """Each misfit as {field, message}; a member spelt in the other casing (``run_id`` for
    ``runId``, ``interruptId`` for the seed's ``interrupt_id``) names the one the body expects."""
    raw = list(exc.errors())
    missing = {_field(e["loc"]) for e in raw if e.get("type") == "missing"}
    out = []
    for e in raw:
        field, message = _field(e["loc"]), str(e.get("msg", "invalid"))
        if e.get("type") == "extra_forbidden" and e["loc"] and e["loc"][0] == "body":
            *parent, last = [str(p) for p in e["loc"]]
            known = _spellings(request, parent[1:])
            for spelling in (to_snake(last), to_camel(last)):
                if spelling != last and spelling in known:
                    message = f"unknown field {last!r}: this body spells it {spelling!r}"
                    missing.discard(".".join([*parent, spelling]))
                    break
        out.append({"field": field, "message": message})
    return [e for e in out if not (e["message"] == "Field required" and e["field"] not in missing)]


def _query_names(dependant: Any) -> Iterator[str]:
    """The query parameters a route reads, as the URL spells them, its dependencies' included."""
    yield from (field.alias for field in dependant.query_params)
    for inner in dependant.dependencies:
        yield from _query_names(inner)


def query_casing(request: Request) -> None:
    """Refuse a query parameter spelt in the other casing (``?run_id=`` where the route reads
    ``runId``), naming the one expected: ignored, as unknown parameters are, it would drop a filter
    and widen what a listing returns. (An app-wide dependency: it runs before the route's own.)"""
    dependant = getattr(request.scope.get("route"), "dependant", None)
    if dependant is None or not request.query_params:
        return
    known = set(_query_names(dependant))
    wrong = []
    for key in request.query_params:
        spelling = next((s for s in (to_camel(key), to_snake(key)) if s != key and s in known), None)
        if key not in known and spelling is not None:
            said = f"unknown query parameter {key!r}: this route spells it {spelling!r}"
            wrong.append({"type": "extra_forbidden", "loc": ("query", key), "msg": said, "input": key})
    if wrong:
        raise RequestValidationError(wrong)


def install(app: FastAPI) -> None:
    """Make the framework's own errors (a refused key, an unknown route, a body that does not fit)
    problems too; parkway's errors are turned into problems where they are caught (``parkway.http.app``)."""

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        name = _BY_STATUS.get(exc.status_code, "HTTPError")
        return problem(exc.status_code, name, str(exc.detail), headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = _errors(exc, request)
        detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors[:5]) or "the request does not fit"
        return problem(422, "InvalidRequest", detail, errors=errors)
