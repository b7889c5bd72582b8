"""Sessions over HTTP: the feature's router (included by :func:`parkway.http.app.create_app`, behind
the app's caller dependency), acting as the key's caller.

The routes reach the app only through the request: the caller its dependency found
(``request.state.caller``), the client and the bounded event streams on ``app.state.surface``
(:class:`_Surface`). They import nothing of ``parkway.http`` but its problem bodies.

==================================================  ===========================================
route                                               what it does
==================================================  ===========================================
``POST /v1/sessions``                               open: ``{agent, owner?, tenant?, sessionId?,
                                                    ttlMs?}`` -> 201 ``{sessionId}``, scoped by the
                                                    tenant: ``<tenant>~<sessionId>`` (a user's key
                                                    opens its own: owner and tenant from the key)
``GET  /v1/sessions/{id}``                          head, interrupts, live runs, the tree's
                                                    ``outline`` (ids, parents) and a page of
                                                    ``messages`` (``limit``, ``cursor`` or ``ids``)
                                                    -> ``nextCursor``
``GET  /v1/sessions/{id}/events``                   its events (``?after=``), oldest first, a page
                                                    of ``limit`` (100, up to 1,000) at a time
``GET  /v1/sessions/{id}/stream``                   the same as server-sent events, live;
                                                    ``Last-Event-ID`` picks up after a drop
``POST /v1/sessions/{id}/messages``                 ``{content}`` at the head -> 201
                                                    ``{messageId, runId}``; 409 parked or busy
``POST /v1/sessions/{id}/messages/{mid}/edit``      ``{content}``: a sibling branch -> 201
``POST /v1/sessions/{id}/switch``                   ``{head}``
``POST /v1/sessions/{id}/interrupts``               raise: ``{reason, payload?, interruptId?,
                                                    anchor?, scope?}`` -> 201 ``{interruptId}``
                                                    (scope: ``session`` by default for system and
                                                    machine keys; a given id is namespaced by
                                                    origin: ``machine-<id>``, ``frontend-<id>``)
``POST /v1/sessions/{id}/resume``                   the seed's ``{type: "interrupt.resume",
                                                    interrupt_id, payload?}``: 200 delivered or
                                                    cleared, 409 already cleared, 404 unknown,
                                                    410 expired
``POST /v1/sessions/{id}/tools/{call}``             answer a deferred tool: ``{result?, error?}``
==================================================  ===========================================

A session of another tenant, or (for a user) of another owner, reads as no session (404): a
different answer would tell that one exists. Opening an id another key of the caller's tenant holds
is refused (409 ``is taken``) word for word as one the caller holds: a tenant's ids are one
namespace. 403 when the caller may reach the session but not do this (an interrupt of a higher
origin, a session-wide raise by a user).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, Protocol

import anyio
from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from ..config import MIN_TTL_MS
from ..problems import outcome_problem, responses
from ..runtime.authority import Caller
from ..runtime.errors import SessionDenied, SessionNotFound, ValidationError
from ..runtime.protocol import MAX_ID_LENGTH, MAX_TTL_MS, ResumeOutcome, check_event_id, check_id
from .client import Sessions

_CLEARED_STATUS = {"already_cleared": 409, "unknown": 404, "expired": 410}
_TOOL_STATUS = {
    ResumeOutcome.ACCEPTED: 200,
    ResumeOutcome.ALREADY_RESOLVED: 409,
    ResumeOutcome.EXPIRED: 410,
    ResumeOutcome.UNKNOWN: 404,
}


class _Body(BaseModel):
    """A body as the API spells it: camelCase only (``run_id`` is refused, naming ``runId``)."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel)


class OpenSession(_Body):
    agent: str = Field(description="'module:attribute' of the agent workflow", max_length=300)
    owner: str | None = None
    tenant: str | None = None
    session_id: str | None = None
    ttl_ms: int | None = Field(default=None, ge=MIN_TTL_MS, le=MAX_TTL_MS)


class MessageBody(_Body):
    content: str = Field(min_length=1, max_length=100_000)


class SwitchBody(_Body):
    head: str = Field(max_length=64)


class RaiseBody(_Body):
    reason: str = Field(min_length=1, max_length=1000)
    payload: Any = None
    interrupt_id: str | None = None
    anchor: str | None = None
    scope: Literal["branch", "session"] | None = Field(
        default=None, description="default: 'session' for a system or machine key, 'branch' for a user's"
    )


class ResumeInput(BaseModel):
    """The seed's client input, as its spec spells it: the one body whose members are not camelCase
    (``interruptId`` is refused, naming ``interrupt_id``; docs/guides/http-api.md, "One dialect")."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["interrupt.resume"]
    interrupt_id: str = Field(max_length=MAX_ID_LENGTH)
    payload: Any = None


class ToolBody(_Body):
    result: Any = None
    error: str | None = Field(default=None, max_length=1000)


class _Surface(Protocol):
    """What the app keeps on ``app.state.surface`` that the session routes use."""

    pw: Any

    def session_stream(self, request: Request, session_id: str, after: str, incarnation: str,
                       still: Callable[[], bool]) -> StreamingResponse:
        """The response that streams a session's events of that incarnation as server-sent event
        frames (bounded per key: 429 past the bound) while ``still()`` says it may go on."""


def _caller(request: Request) -> Caller:
    """The caller the app's dependency found (the router is included behind it)."""
    found: Caller = request.state.caller
    return found


def _sessions(request: Request) -> Sessions:
    surface: _Surface = request.app.state.surface
    found: Sessions = surface.pw.sessions
    return found


Who = Annotated[Caller, Depends(_caller)]
Client = Annotated[Sessions, Depends(_sessions)]
router = APIRouter(prefix="/v1/sessions", tags=["sessions"])


@router.post("", status_code=201, responses=responses(401, 403, 409, 413, 422, 503))
def open_session(body: OpenSession, who: Who, sessions: Client) -> dict[str, Any]:
    owner = body.owner or (who.owner if who.role == "user" else None)
    tenant = body.tenant or who.tenant
    if owner is None or tenant is None:
        raise ValidationError("a session needs an owner and a tenant (from the body, or a user's key)")
    sid = sessions.open(
        body.agent, owner=owner, tenant=tenant, session_id=body.session_id, ttl_ms=body.ttl_ms, caller=who
    )
    return {"sessionId": sid}


@router.get("/{session_id}", responses=responses(401, 403, 404, 422, 503))
def get_session(
    session_id: str, who: Who, sessions: Client, limit: Annotated[int, Query(ge=0, le=1000)] = 100,
    cursor: Annotated[str | None, Query(max_length=64)] = None,
    ids: Annotated[str | None, Query(max_length=65 * 100)] = None,
) -> dict[str, Any]:
    """The session: its facts, its ``outline`` (every message's id, parent and parkedBy, no
    content) and one page of ``messages`` whole: those after ``cursor`` in id order, or the
    comma-separated ``ids`` (up to 100); at most ``limit`` (0: the outline alone) and about 1 MB of them.
    ``nextCursor`` names the next page (null: none left)."""
    if cursor is not None:
        check_id(cursor, "cursor")
    wanted = [check_id(i, "message id") for i in ids.split(",") if i] if ids is not None else None
    return sessions.page(session_id, caller=who, cursor=cursor, limit=limit, ids=wanted).public()


@router.get("/{session_id}/events", responses=responses(401, 403, 404, 422, 503))
def session_events(
    session_id: str, who: Who, sessions: Client, after: str = "0",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[dict[str, Any]]:
    """At most ``limit`` events after ``after``, oldest first: ask again with ``after`` = the last
    one's ``eventId`` for more (an empty list: none yet)."""
    check_event_id(after)
    return [
        {"type": e.type, "eventId": e.id, "ts": e.ts, **e.data}
        for e in sessions.events(session_id, after=after, caller=who, limit=limit)
    ]


@router.get("/{session_id}/stream", response_class=StreamingResponse,
         responses=responses(401, 403, 404, 422, 429, 503))
async def session_stream(
    request: Request,
    session_id: str,
    who: Who,
    sessions: Client,
    after: str = "0",
    last_event_id: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    """The session's events as server-sent events, live; reconnect with ``Last-Event-ID``."""
    start_at = check_event_id(last_event_id or after, "after / Last-Event-ID")
    # 404 before it opens; then it follows this incarnation of the session only, as long as the
    # caller may read it (asked again after every read: a session that ends, or whose id is
    # opened again, ends the stream)
    inc = await anyio.to_thread.run_sync(lambda: sessions.incarnation(session_id, caller=who))

    def still() -> bool:
        try:
            return sessions.incarnation(session_id, caller=who) == inc
        except (SessionNotFound, SessionDenied):
            return False

    surface: _Surface = request.app.state.surface
    return surface.session_stream(request, session_id, start_at, inc, still)


@router.post("/{session_id}/messages", status_code=201,
          responses=responses(401, 403, 404, 409, 413, 422, 503))
def send(session_id: str, body: MessageBody, who: Who, sessions: Client) -> dict[str, Any]:
    sent = sessions.send(session_id, body.content, caller=who)
    return {"messageId": sent.message_id, "runId": sent.run_id}


@router.post("/{session_id}/messages/{message_id}/edit", status_code=201,
          responses=responses(401, 403, 404, 409, 413, 422, 503))
def edit(session_id: str, message_id: str, body: MessageBody, who: Who, sessions: Client) -> dict[str, Any]:
    sent = sessions.edit(session_id, message_id, body.content, caller=who)
    return {"messageId": sent.message_id, "runId": sent.run_id}


@router.post("/{session_id}/switch",
          responses=responses(401, 403, 404, 409, 413, 422, 503))
def switch(session_id: str, body: SwitchBody, who: Who, sessions: Client) -> dict[str, Any]:
    return sessions.switch(session_id, body.head, caller=who).public()


@router.post("/{session_id}/interrupts", status_code=201,
          responses=responses(401, 403, 404, 409, 413, 422, 503))
def raise_interrupt(session_id: str, body: RaiseBody, who: Who, sessions: Client) -> dict[str, Any]:
    iid = sessions.raise_interrupt(
        session_id,
        body.reason,
        body.payload,
        caller=who,
        interrupt_id=body.interrupt_id,
        anchor=body.anchor,
        scope=body.scope,
    )
    return {"interruptId": iid}


@router.post("/{session_id}/resume",
          responses=responses(401, 403, 404, 409, 410, 413, 422, 503))
def resume(session_id: str, body: ResumeInput, who: Who, sessions: Client) -> JSONResponse:
    cleared = sessions.resume_interrupt(session_id, body.interrupt_id, body.payload, caller=who)
    data = {
        "outcome": cleared.outcome,
        "interruptId": cleared.interrupt_id,
        "runId": cleared.run_id,
        "parkedBy": list(cleared.parked_by),
    }
    status = _CLEARED_STATUS.get(cleared.outcome, 200)
    return outcome_problem(status, data) if status >= 400 else JSONResponse(data)


@router.post("/{session_id}/tools/{tool_call_id}",
          responses=responses(401, 403, 404, 409, 410, 413, 422, 503))
def answer_tool(session_id: str, tool_call_id: str, body: ToolBody, who: Who, sessions: Client) -> JSONResponse:
    result = sessions.answer_tool(session_id, tool_call_id, body.result, error=body.error, caller=who)
    answered, status = result.model_dump(mode="json", by_alias=True), _TOOL_STATUS[result.outcome]
    return outcome_problem(status, answered) if status >= 400 else JSONResponse(answered)
