"""``/v1/runs``: start, list, read, follow, cancel and fork runs."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Body, Depends, Header, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import Field

from ...config import MIN_TTL_MS
from ...problems import outcome_problem, responses
from ...runtime.authority import check_overlay
from ...runtime.errors import RunNotFound
from ...runtime.protocol import MAX_TTL_MS, CancelOutcome, CancelResult, Run, RunPage, check_event_id, check_id
from ..auth import Who, caller, own_tenant, shown_error
from ..bodies import CamelBody, dump
from ..deps import Client, House, Runs
from ..streams import run_frames

router = APIRouter(prefix="/v1/runs", tags=["runs"], dependencies=[Depends(caller)])


class StartRun(CamelBody):
    workflow: str = Field(description="'module:attribute' of a parkway Workflow", max_length=300)
    input: dict[str, Any] = Field(default_factory=dict)
    run_id: str | None = None
    ttl_ms: int | None = Field(default=None, ge=MIN_TTL_MS, le=MAX_TTL_MS,
                               description="how long the run's records and pauses live (ms)")
    tenant: str | None = Field(default=None, description="the tenant the run belongs to (a key bound to a "
                               "tenant starts runs of its own tenant only, the default for it)")


class Started(CamelBody):
    run_id: str


class ForkBody(CamelBody):
    step: int = Field(ge=0, description="the activation to re-open: 0 is the run's first node")
    run_id: str | None = Field(default=None, description="the new run's id (default: a random one)")
    input: dict[str, Any] | None = Field(default=None, description="laid over the data the step started with")


class ForkedFrom(CamelBody):
    run_id: str
    step: int


class Forked(CamelBody):
    run_id: str
    forked_from: ForkedFrom


class CancelBody(CamelBody):
    reason: str | None = Field(default=None, max_length=1000)


@router.post("", status_code=201, response_model=Started, responses=responses(401, 403, 413, 422, 503))
def start(body: StartRun, who: Who, pw: Client) -> dict[str, Any]:
    tenant = own_tenant(who, body.tenant)
    run_id = pw.start(body.workflow, body.input, run_id=body.run_id, ttl_ms=body.ttl_ms, tenant=tenant,
                      owner=who.owner if who.role == "user" else None, origin=who.origin)
    return {"runId": run_id}


@router.get("", response_model=RunPage, responses=responses(401, 403, 422, 503))
def list_runs(who: Who, pw: Client, query: Runs) -> dict[str, Any]:
    """Runs, newest first: the runs the key may read (a user key its own, a key bound to a tenant
    its tenant's), filtered before paging; ``nextCursor`` is opaque and signed. One request reads
    at most 5,000 index entries: a narrow filter may give a short page whose cursor goes on."""
    return dump(pw.list_runs(query, caller=who))


@router.get("/{run_id}", response_model=Run, response_model_by_alias=True,
            responses=responses(401, 403, 404, 422, 503))
def get_run(run_id: str, who: Who, pw: Client) -> dict[str, Any]:
    pw.check_run(run_id, who, "read")  # by the owner and tenant written on the run
    run = dump(pw.get_run(run_id))
    return {**run, "error": shown_error(run.get("error"), who)}


@router.post("/{run_id}/cancel", response_model=CancelResult, responses=responses(401, 403, 404, 409, 413, 422, 503))
def cancel(run_id: str, who: Who, pw: Client, body: Annotated[CancelBody | None, Body()] = None) -> JSONResponse:
    """Cancel the run (and every run below it); a body with a ``reason`` is optional. A run that
    had finished answers as an answered interrupt does: 409, ``already_resolved`` (with its
    ``runStatus``; the outcome read ``already_finished`` before 0.x)."""
    pw.check_run(run_id, who, "cancel")
    result = dump(pw.cancel(run_id, reason=body.reason if body else None, responder=who.name))
    if result["outcome"] != CancelOutcome.CANCELLED.value:
        return outcome_problem(409, result)
    return JSONResponse(result)


@router.post("/{run_id}/fork", status_code=201, response_model=Forked,
             responses=responses(401, 403, 404, 413, 422, 503))
def fork(run_id: str, body: ForkBody, who: Who, pw: Client) -> dict[str, Any]:
    record = pw.check_run(run_id, who, "fork")
    if body.input is not None:  # laid over what the run's starter gave: that rank or higher
        check_overlay(who, run_id, record.origin if record is not None else None)
    # past an answered interrupt only a system caller forks; the others re-open the answered step
    step = body.step if who.role == "system" else pw.gated_step(run_id, body.step)
    new = pw.fork(run_id, step=step, new_run_id=body.run_id, input=body.input)
    return {"runId": new, "forkedFrom": {"runId": run_id, "step": step}}


@router.get("/{run_id}/events", response_class=StreamingResponse, responses=responses(401, 403, 404, 422, 429, 503))
async def stream(
    request: Request, run_id: str, who: Who, house: House, after: str = "0",
    last_event_id: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    pw = house.pw
    check_id(run_id, "run id")
    start_at = check_event_id(last_event_id or after, "after / Last-Event-ID")
    opened = await anyio.to_thread.run_sync(pw.check_run, run_id, who, "events")
    await anyio.to_thread.run_sync(pw.get_run, run_id)  # 404 before the stream opens
    born = opened.created_at if opened is not None else None

    def still_reaches() -> bool:
        """The caller still reaches this run, and it is the run the stream opened on (an id
        whose records and summary expired can be taken again)."""
        try:
            record = pw.check_run(run_id, who, "events")
        except RunNotFound:
            return False
        return record is None or born is None or record.created_at == born

    # resume tokens go to system and machine callers; a person answers through an application or a link
    frames = run_frames(pw, house.feeds, run_id, start_at, with_tokens=who.role != "user", still=still_reaches,
                        who=who)
    return house.stream(request, frames)
