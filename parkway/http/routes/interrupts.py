"""``/v1/interrupts`` and ``/v1/resume``: list pending interrupts (waiting for one, or following the
pause feed), read one, its answer widget and its answer form, and answer by request id or by resume token."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import Field

from ...adapters.redis.layout import pause_wakes
from ...adapters.redis.store.live import PauseWatch, ShardedPauseWatch
from ...client.sync import Parkway
from ...problems import outcome_problem, problem, responses
from ...runtime import kinds, telemetry, tokens
from ...runtime.authority import Caller, Door, check_overlay, reaches
from ...runtime.errors import (
    InterruptNotFound,
    InvalidAnswer,
    MalformedResume,
    RunNotFound,
    ValidationError,
    WorkflowError,
)
from ...runtime.listing import ListingQuery
from ...runtime.protocol import Interrupt, InterruptPage, ResumeOrStartResult, ResumeOutcome, ResumeResult, check_id
from ..auth import Who, caller
from ..bodies import CamelBody, dump
from ..deps import Client, House, Listing, Waiting
from ..failures import refusal
from ..metrics import Refused
from ..streams import pause_frames

router = APIRouter(prefix="/v1", tags=["interrupts"], dependencies=[Depends(caller)])
RunId = Annotated[str | None, Query(alias="runId")]
"""a run id, only for a request id that does not carry it"""


class ResumeBody(CamelBody):
    token: str = Field(max_length=tokens.MAX_TOKEN_LENGTH)
    request_id: str | None = None
    selected: Any = None
    value: Any = None
    responder: str | None = Field(default=None, max_length=200)
    cancel: bool = False
    reason: str | None = Field(default=None, max_length=1000)


class ResumeOrStartBody(CamelBody):
    token: str = Field(max_length=tokens.MAX_TOKEN_LENGTH)
    request_id: str | None = None
    selected: Any = None
    value: Any = None
    responder: str | None = Field(default=None, max_length=200)
    input: dict[str, Any] | None = Field(default=None, description="the new run's input, if it starts one "
                                         "(default: the expired run's)")
    workflow: str | None = Field(default=None, max_length=300,
                                 description="'module:attribute', needed once the expired run's records are gone")


class AnswerBody(CamelBody):
    run_id: str | None = Field(default=None, description="only for a request id that does not carry it")
    selected: Any = None
    value: Any = None
    cancel: bool = False
    reason: str | None = Field(default=None, max_length=1000)


class AnswerForm(CamelBody):
    schema_id: str
    schema_version: int
    schema_: dict[str, Any] = Field(alias="schema", description="the response model's JSON Schema")


class AnswerWidget(CamelBody):
    kind: str
    widget: dict[str, Any] = Field(description="how a page asks for the answer: a small declarative description "
                                   "from the interrupt's kind (its control, what the answer is sent as, its "
                                   "options, bounds or label; see parkway.runtime.kinds)")


RESUME_STATUS = {
    ResumeOutcome.ACCEPTED: 200,
    ResumeOutcome.ALREADY_RESOLVED: 409,
    ResumeOutcome.EXPIRED: 410,
    ResumeOutcome.UNKNOWN: 404,
}
"""the status of each resume outcome"""


@router.get("/interrupts", response_model=InterruptPage, responses=responses(401, 403, 422, 429, 503),
            dependencies=[Waiting])
async def list_interrupts(who: Who, house: House, query: Listing) -> dict[str, Any]:
    if not query.wait_ms:
        page = await anyio.to_thread.run_sync(lambda: house.pw.list_interrupts(query, caller=who))
    else:  # (holding one of the key's waiting slots)
        page = await wait_for_page(house.pw, house.watch, query, who)
    return dump(page)


async def wait_for_page(
    pw: Parkway, watch: PauseWatch | ShardedPauseWatch | None, query: ListingQuery, who: Caller
) -> InterruptPage:
    """A waiting listing that holds no thread while it waits: list (in a thread, with the pause feed's
    position), and while the page is empty wait on the process's one watch of the feed for a pause
    past that position, then list again, until ``query.wait_ms`` have passed. Embedded (no asyncio
    Redis client), the client's own wait runs in a thread."""
    if watch is None:
        return await anyio.to_thread.run_sync(lambda: pw.list_interrupts(query, caller=who))
    deadline = anyio.current_time() + query.wait_ms / 1000
    once = replace(query, wait_ms=0)
    # a pause of another tenant or workflow than the listing's does not wake it
    wakes = None if query.tenant is None and query.workflow is None else partial(
        pause_wakes, tenant=query.tenant, workflow=query.workflow)
    while True:
        page, feed = await anyio.to_thread.run_sync(lambda: pw.list_watching(once, caller=who))
        left = deadline - anyio.current_time()
        placed = query.run_id if query.run_id is not None else query.session  # as the router places it
        if page.items or left <= 0 or not await watch.wait_past(feed, left, placed, wakes):
            return page


@router.get("/interrupts/events", response_class=StreamingResponse, responses=responses(401, 403, 422, 429, 503))
async def pause_stream(
    request: Request, who: Who, house: House, after: str | None = None,
    last_event_id: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    """The pause feed as server-sent events: an ``interrupt.paused`` event (``{runId, workflow}``,
    ``id``: the feed's entry id) for each run that pauses from now on (or after ``Last-Event-ID`` /
    ``?after=``, within the feed's last 2,000 pauses) and that the key may list the interrupts of;
    a comment while none does. What the inbox page follows to read its first page again."""
    pw, feeds = house.pw, house.feeds
    start_at = None if (last_event_id or after) is None else feeds.check_position(last_event_id or after or "")

    def visible(run_ids: list[str]) -> set[str]:
        if who.role == "system" and who.tenant is None:
            return set(run_ids)
        whose = pw.store.authorities(sorted(set(run_ids)))
        return {r for r, (tenant, owner) in whose.items() if reaches(who, tenant, owner, "list")}

    if start_at is None:  # from now on: the feed's newest entry, read before the stream says it is open
        start_at = await anyio.to_thread.run_sync(feeds.pause_position)
    return house.stream(request, pause_frames(pw, feeds, start_at, visible, house.watch))


@router.get("/interrupts/{request_id}", response_model=Interrupt, response_model_by_alias=True,
            responses=responses(401, 403, 404, 422, 503))
def get_interrupt(request_id: str, who: Who, pw: Client, run_id: RunId = None) -> dict[str, Any]:
    """One interrupt, open or ended, with its lifecycle record (``runId`` only for a request id
    that does not carry it)."""
    check_id(request_id, "request id")
    found = run_id or telemetry.run_of_request(request_id)
    if found is not None:  # by the owner and tenant written on its run (its summary, once ended)
        pw.check_run(found, who, "list")
    # (with no run id to check, get_interrupt reads nothing: it asks for one, 422)
    return dump(pw.get_interrupt(request_id, run_id=run_id))


def _reachable_interrupt(pw: Parkway, who: Caller, request_id: str, run_id: str | None, door: Door) -> Interrupt:
    """The interrupt ``request_id`` names, if ``who`` may pass ``door`` of its run (else 404, as
    for none)."""
    check_id(request_id, "request id")
    found = run_id or telemetry.run_of_request(request_id)
    if found is None:
        raise InterruptNotFound(f"no interrupt {request_id!r}", request_id=request_id)
    pw.check_run(found, who, door)
    return pw.get_interrupt(request_id, run_id=run_id)


@router.get("/interrupts/{request_id}/form", response_model=AnswerForm, responses=responses(401, 403, 404, 422, 503))
def answer_form(request_id: str, who: Who, pw: Client, run_id: RunId = None) -> dict[str, Any]:
    """What a contract interrupt's answer must fit: its response model's JSON Schema (the inbox
    page builds its form from it); 422 for an interrupt without a contract."""
    interrupt = _reachable_interrupt(pw, who, request_id, run_id, "answer")
    asked = interrupt.request
    if asked is None or asked.contract_ref is None:
        raise ValidationError(f"interrupt {request_id!r} asks no contract: it has no form", request_id=request_id)
    contract = pw.settings.modules.load_contract(asked.contract_ref)
    return {"schemaId": contract.schema_id, "schemaVersion": contract.version,
            "schema": contract.response.model_json_schema()}


@router.get("/interrupts/{request_id}/widget", response_model=AnswerWidget,
            responses=responses(401, 403, 404, 422, 503))
def answer_widget(request_id: str, who: Who, pw: Client, run_id: RunId = None) -> dict[str, Any]:
    """How the inbox page asks for an interrupt's answer: its kind's widget (``buttons``,
    ``checkboxes``, ``field`` or ``form``, with what it needs), so the page holds no code per kind;
    422 for an ended interrupt whose request was not kept."""
    asked = _reachable_interrupt(pw, who, request_id, run_id, "list").asked()
    return {"kind": asked.kind, "widget": kinds.get(asked.kind).widget(asked)}


def _answered(result: ResumeResult, refused: Refused) -> JSONResponse:
    """A resume's answer: 200 accepted, else the outcome's status (counted as refused)."""
    if not result.accepted:
        refused.add(result.outcome.value)
        return outcome_problem(RESUME_STATUS[result.outcome], dump(result))
    return JSONResponse(dump(result))


@router.post("/interrupts/{request_id}/answer", response_model=ResumeResult,
             responses=responses(401, 403, 404, 409, 410, 413, 422, 503))
def answer(request_id: str, body: AnswerBody, who: Who, house: House) -> JSONResponse:
    """Answer (or cancel) an interrupt by its request id, as the caller: what the inbox page does,
    so no resume token ever reaches a browser. A contract answer that does not fit gets 422 with
    ``problems`` (field path -> why) and the interrupt stays open."""
    pw = house.pw
    check_id(request_id, "request id")
    run_id = body.run_id or telemetry.run_of_request(request_id)
    if run_id is None:
        raise ValidationError("this request id does not carry its run id: send runId")
    try:
        pw.check_run(run_id, who, "answer")
    except RunNotFound:
        return outcome_problem(404, dump(ResumeResult(outcome=ResumeOutcome.UNKNOWN)))
    token = tokens.mint(pw.backend.options.secret, run_id, request_id)
    try:
        if body.cancel:
            result = pw.cancel_interrupt(token, reason=body.reason, responder=who.name, request_id=request_id)
        else:
            result = pw.resume(token, selected=body.selected, value=body.value, request_id=request_id,
                               responder=who.name)
    except (InvalidAnswer, MalformedResume, ValidationError) as exc:
        house.refused.add("invalid")
        return problem(422, type(exc).__name__, exc.message, problems=getattr(exc, "problems", {}))
    return _answered(result, house.refused)


@router.post("/resume", response_model=ResumeResult, responses=responses(401, 403, 404, 409, 410, 413, 422, 503))
def resume(body: ResumeBody, who: Who, house: House) -> JSONResponse:
    pw, refused = house.pw, house.refused
    # a person answers as themselves; a system or machine caller may name who it answers for
    responder = who.name if who.role == "user" else (body.responder or who.name)
    try:
        pw.check_run(tokens.run_id_of(body.token), who, "answer")
    except MalformedResume as exc:
        refused.add("invalid")
        return refusal(422, exc)
    except RunNotFound:  # another tenant's or owner's run answers as no run
        refused.add(ResumeOutcome.UNKNOWN.value)
        return outcome_problem(404, dump(ResumeResult(outcome=ResumeOutcome.UNKNOWN)))
    try:
        if body.cancel:
            result = pw.cancel_interrupt(body.token, reason=body.reason, responder=responder,
                                         request_id=body.request_id)
        else:
            result = pw.resume(body.token, selected=body.selected, value=body.value, request_id=body.request_id,
                               responder=responder)
    except (InvalidAnswer, MalformedResume, ValidationError) as exc:
        refused.add("invalid")
        return refusal(422, exc)
    return _answered(result, refused)


@router.post("/resume-or-start", response_model=ResumeOrStartResult,
             responses={201: {"model": ResumeOrStartResult}, **responses(401, 403, 404, 409, 410, 413, 422, 503)})
def resume_or_start(body: ResumeOrStartBody, who: Who, house: House) -> JSONResponse:
    pw, refused = house.pw, house.refused
    responder = who.name if who.role == "user" else (body.responder or who.name)
    try:
        run_id = tokens.run_id_of(body.token)
        record = pw.check_run(run_id, who, "restart")
    except MalformedResume as exc:
        refused.add("invalid")
        return refusal(422, exc)
    except RunNotFound:  # another tenant's or owner's run answers as no run
        return outcome_problem(404, {"outcome": "unknown"})
    if body.input is not None or body.workflow is not None:  # a restart keeps the run's origin: fork's rule
        check_overlay(who, run_id, record.origin if record is not None else None)
    try:
        # a new run is the old one's tenant's (from its summary), else the key's
        result = pw.resume_or_start(body.token, selected=body.selected, value=body.value,
                                    request_id=body.request_id, responder=responder, input=body.input,
                                    workflow=body.workflow, tenant=who.tenant)
    except (InvalidAnswer, MalformedResume, ValidationError, WorkflowError) as exc:
        refused.add("invalid")
        return refusal(422, exc)
    status = {"resumed": 200, "started": 201, "already_resolved": 409, "expired": 410}.get(result.outcome, 404)
    if status >= 400:
        return outcome_problem(status, dump(result))
    return JSONResponse(dump(result), status_code=status)
