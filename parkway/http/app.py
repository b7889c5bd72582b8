"""parkway over HTTP: an ASGI app (FastAPI, so the OpenAPI document comes from parkway's models).

==========================================  ===================================================
route                                       what it does
==========================================  ===================================================
``GET  /healthz``                           200 when Redis answers, 503 when not (no key needed)
``GET  /metrics``                           Prometheus text (see ``parkway.http.metrics``); needs a
                                            metrics key or a system key bound to no tenant
``POST /v1/runs``                           start a run: ``{workflow, input, runId?, ttlMs?, tenant?}``
                                            -> 201 ``{runId}`` (a tenant-bound key: its own tenant;
                                            a tenant's run id is ``<tenant>~<runId>``)
``GET  /v1/runs``                           runs, newest first: ``status``, ``workflow``,
                                            ``workflowPrefix``, ``tenant``, ``createdAfter``,
                                            ``createdBefore``, ``limit``, ``cursor`` -> a page (a
                                            user's key: its own runs; a tenant-bound key: its tenant's)
``GET  /v1/runs/{run_id}``                  the run
``GET  /v1/runs/{run_id}/events``           its events as server-sent events; ``Last-Event-ID``
                                            (or ``?after=``) resumes after a dropped connection
                                            (at most MAX_STREAMS_PER_KEY open per key and
                                            MAX_STREAMS_PER_TENANT per kind of key of a
                                            tenant, else 429)
``POST /v1/runs/{run_id}/cancel``           cancel the run: ``{reason?}``
``POST /v1/runs/{run_id}/fork``             re-open step N as a new run: ``{step, runId?, input?}``
                                            -> 201 ``{runId, forkedFrom: {runId, step}}``
``GET  /v1/interrupts``                     pending interrupts: ``workflow``, ``runId``, ``order``,
                                            ``limit``, ``cursor``, ``tokens`` -> a page; ``waitMs``
                                            (up to 30,000): an empty page waits that long for a pause
                                            (at most MAX_WAITING_PER_KEY at once per key, else 429);
                                            filters ``audience``, ``tenant``, ``session``,
                                            ``createdAfter``, ``createdBefore`` (epoch ms),
                                            ``workflowPrefix``, ``q`` (text in the question). A key
                                            bound to a tenant sees its tenant's interrupts only
``GET  /v1/me``                              the key's caller: ``{name, role, owner, tenant}``
``GET  /v1/interrupts/events``              the pause feed as server-sent events: ``interrupt.paused``
                                            ``{runId, workflow}`` for each run the key may list that
                                            pauses from now on (``Last-Event-ID`` / ``?after=`` go on)
``GET  /v1/interrupts/{request_id}/form``   a contract interrupt's answer schema (JSON Schema)
``POST /v1/interrupts/{request_id}/answer`` answer as the caller, by request id (no token):
                                            ``{runId?, selected?|value?}`` or ``{cancel: true,
                                            reason?}``; a contract answer that does not fit: 422
                                            with ``problems`` (field -> why)
``POST /v1/resume``                         answer: ``{token, requestId?, selected?|value?}``, or
                                            ``{token, requestId?, cancel: true, reason?}``
``POST /v1/resume-or-start``                answer as ``/v1/resume``, or if the interrupt expired
                                            start the run again (``{..., input?, workflow?}``): 200
                                            ``resumed``, 201 ``started`` (a new ``runId``, ``restartedFrom``)
``GET  /a/{link}``, ``POST /a/{link}``      a one-click answer link (``Parkway.answer_links``): the
                                            GET shows a confirmation page, only its POST answers
``/v1/sessions...``                         sessions: open, read, events, messages, edit, switch,
                                            raise and resume interrupts, answer deferred tools
                                            (see ``parkway.sessions.http``)
==========================================  ===================================================

A resume answers with a status that says what happened: 200 accepted, 422 an
answer that does not fit (the interrupt stays open), 409 already resolved, 410
expired, 404 unknown. Tokens travel only in request and response bodies (never
in a URL, so never in an access log line) and never in an error.

Every ``/v1`` route, and ``/metrics``, needs an API key (``Authorization: Bearer <key>``). Keys are
configured hashed (``PARKWAY_API_KEYS``: ``<sha256 hex>=<role>[:<owner>[:<tenant>]]``,
comma-separated; ``parkway.http.app.hash_key`` or ``parkway serve --hash-key`` makes
the hash) and map to a caller: ``system``, ``machine`` or ``user`` with an owner
and a tenant. A resume's responder defaults to the caller. What each caller reaches is read from the
records (the owner, tenant and origin written on every run and its summary when it is created), at
every door: see :mod:`parkway.runtime.authority` for the role table. What a caller may not reach
answers as what does not exist (404).

Blocking Redis calls run in the thread pool, never on the event loop; event
streams read Redis through its asyncio client, and waiting listings wait on one
shared watch of the pause feed, so neither holds a thread while it waits. With
shards (``PARKWAY_SHARDS``) a stream reads its run's shard, and waiting listings
share one watch of each shard's feed; the pause feed's stream merges the shards'
feeds, read through the router (in the pool, without blocking) when that watch
says there is something to read.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import re
import secrets
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import replace
from functools import partial
from html import escape
from importlib import resources
from typing import Annotated, Any, Literal

import anyio
from fastapi import Body, Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from fastapi.security import HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from starlette.background import BackgroundTask

import parkway.problems as problems  # `from .. import problems` would name parkway's root: an arrow up

from ..client.sync import Parkway, ends_stream
from ..config import MIN_TTL_MS, Settings
from ..problems import outcome_problem, problem
from ..runtime import links, telemetry, tokens
from ..runtime.authority import Caller, Door, check_overlay, reaches
from ..runtime.clock import now_ms
from ..runtime.errors import (
    ConfigError,
    InterruptNotFound,
    InvalidAnswer,
    MalformedResume,
    ParkwayError,
    RunNotFound,
    SessionDenied,
    SessionError,
    SessionNotFound,
    StoreUnavailable,
    ValidationError,
    WorkflowError,
)
from ..runtime.listing import MAX_PAGE, MAX_SEARCH, MAX_WAIT_MS, ListingQuery, Order, RunsQuery, Status
from ..runtime.logger import get_logger
from ..runtime.protocol import (
    MAX_TTL_MS,
    CancelOutcome,
    CancelResult,
    Interrupt,
    InterruptPage,
    ResumeOrStartResult,
    ResumeOutcome,
    ResumeResult,
    Run,
    RunPage,
    RunStatus,
    check_event_id,
    check_id,
    check_name,
)
from ..sessions import http as session_http
from .metrics import ParkwayCollector, Refused

log = get_logger()
ROLES = ("system", "machine", "user")
METRICS: Literal["metrics"] = "metrics"
"""the role of a key that reads ``/metrics`` and nothing else"""
STREAM_BLOCK_MS = 4000
"""how long one read of an open event stream waits for news (its client waits 10 s more for the reply);
an idle stream then gets a keep-alive comment"""
MAX_STREAMS = 1000
"""event streams one API process holds open at once, one Redis connection each: well under Redis's
default ``maxclients`` (10,000), with room for workers and more API processes"""
API_CONNECTIONS = 16
"""the fixed pool of Redis connections the server's request threads share (event streams and the
pause watch have their own, each closed when it ends)"""
MAX_STREAMS_PER_KEY = 100
"""event streams one API key may hold open at once in one process; more get 429"""
MAX_STREAMS_PER_TENANT = 250
"""event streams the keys of one kind (user, machine, system) bound to one tenant may hold open at
once in one process, together; more get 429 (a tenant with many keys cannot take all of
``MAX_STREAMS``). Each kind has its own share, so a tenant's users cannot starve its machine keys."""
MAX_WAITING_PER_KEY = 20
"""waiting listings (``waitMs``) one API key may have in flight at once; more get 429"""
RETRY_AFTER_S = 1
"""what a 429 tells the caller to wait before trying again"""
_UI = resources.files(__package__).joinpath("static/ui.html").read_text()
_PAGE_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"}
_LINK_CSP = ("default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; "
             "frame-ancestors 'none'")
"""an answer link's page: no script at all, its one form posts back to itself, never framed"""


def _ui_page() -> HTMLResponse:
    """The live page with a fresh nonce on its one script and its one style element: the CSP runs
    those and nothing else (no other inline script, nothing from elsewhere), and forbids framing."""
    nonce = secrets.token_urlsafe(18)
    html = _UI.replace("<script>", f'<script nonce="{nonce}">', 1).replace("<style>", f'<style nonce="{nonce}">', 1)
    csp = (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; connect-src 'self'; "
           "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
    return HTMLResponse(html, headers={**_PAGE_HEADERS, "Content-Security-Policy": csp})


def hash_key(key: str) -> str:
    """How an API key is configured: its SHA-256, hex."""
    return hashlib.sha256(key.encode()).hexdigest()


Key = Caller | Literal["metrics"]
"""what a configured key stands for: a caller of the API, or a metrics scraper"""


def parse_keys(text: str) -> dict[str, Key]:
    """``PARKWAY_API_KEYS``: ``<sha256 hex>=<role>[:<owner>[:<tenant>]]``, comma-separated; a user
    needs both, a machine or system key bound to a tenant leaves the owner empty (``machine::acme``).
    ``<sha256 hex>=metrics`` is a key that reads ``/metrics`` only."""
    out: dict[str, Key] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        digest, sep, who = item.partition("=")
        parts = who.split(":")
        if who == METRICS and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest):
            out[digest] = METRICS
            continue
        if not sep or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest) or parts[0] not in ROLES:
            raise ConfigError(
                "PARKWAY_API_KEYS entries look like <sha256 hex of the key>=<system|machine|user>[:owner[:tenant]] "
                "or <sha256 hex of the key>=metrics"
            )
        for extra in parts[1:]:
            if extra:  # empty: none (a machine bound to a tenant is machine::<tenant>)
                check_name(extra, "API key owner or tenant")
        role: Any = parts[0]
        try:
            out[digest] = Caller(role, *(part or None for part in parts[1:3]))
        except ValidationError as exc:
            raise ConfigError(f"PARKWAY_API_KEYS: {exc.message} (<hash>=user:<owner>:<tenant>)") from None
    return out


class _Body(BaseModel):
    """A body as the API spells it: camelCase only (``run_id`` is refused, naming ``runId``)."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel)


class StartRun(_Body):
    workflow: str = Field(description="'module:attribute' of a parkway Workflow", max_length=300)
    input: dict[str, Any] = Field(default_factory=dict)
    run_id: str | None = None
    ttl_ms: int | None = Field(default=None, ge=MIN_TTL_MS, le=MAX_TTL_MS,
                               description="how long the run's records and pauses live (ms)")
    tenant: str | None = Field(default=None, description="the tenant the run belongs to (a key bound to a "
                               "tenant starts runs of its own tenant only, the default for it)")


class Started(_Body):
    run_id: str


class ResumeBody(_Body):
    token: str = Field(max_length=tokens.MAX_TOKEN_LENGTH)
    request_id: str | None = None
    selected: Any = None
    value: Any = None
    responder: str | None = Field(default=None, max_length=200)
    cancel: bool = False
    reason: str | None = Field(default=None, max_length=1000)


class ResumeOrStartBody(_Body):
    token: str = Field(max_length=tokens.MAX_TOKEN_LENGTH)
    request_id: str | None = None
    selected: Any = None
    value: Any = None
    responder: str | None = Field(default=None, max_length=200)
    input: dict[str, Any] | None = Field(default=None, description="the new run's input, if it starts one "
                                         "(default: the expired run's)")
    workflow: str | None = Field(default=None, max_length=300,
                                 description="'module:attribute', needed once the expired run's records are gone")


class ForkBody(_Body):
    step: int = Field(ge=0, description="the activation to re-open: 0 is the run's first node")
    run_id: str | None = Field(default=None, description="the new run's id (default: a random one)")
    input: dict[str, Any] | None = Field(default=None, description="laid over the data the step started with")


class ForkedFrom(_Body):
    run_id: str
    step: int


class Forked(_Body):
    run_id: str
    forked_from: ForkedFrom


class CancelBody(_Body):
    reason: str | None = Field(default=None, max_length=1000)


class AnswerBody(_Body):
    run_id: str | None = Field(default=None, description="only for a request id that does not carry it")
    selected: Any = None
    value: Any = None
    cancel: bool = False
    reason: str | None = Field(default=None, max_length=1000)


class Me(_Body):
    name: str
    role: str
    owner: str | None = None
    tenant: str | None = None


class AnswerForm(_Body):
    schema_id: str
    schema_version: int
    schema_: dict[str, Any] = Field(alias="schema", description="the response model's JSON Schema")


_RESUME_STATUS = {
    ResumeOutcome.ACCEPTED: 200,
    ResumeOutcome.ALREADY_RESOLVED: 409,
    ResumeOutcome.EXPIRED: 410,
    ResumeOutcome.UNKNOWN: 404,
}


_UNAVAILABLE = "this workflow cannot be started on this server"
_SERVER_ERROR = "the server could not complete this request; its log says why"


def _problem(status: int, exc: ParkwayError) -> JSONResponse:
    """The error body: what the caller can act on. What would tell the caller about the server (its
    working directory, which modules it has, Redis's replies and scripts) goes to the log only."""
    if isinstance(exc, WorkflowError):
        log.warning("http_workflow_refused", error=type(exc).__name__, detail=exc.message)
        return problem(status, "WorkflowUnavailable", _UNAVAILABLE)
    if status >= 500:
        log.error("http_server_error", error=type(exc).__name__, detail=exc.message, status=status)
        error = "StoreUnavailable" if isinstance(exc, StoreUnavailable) else "ServerError"
        return problem(status, error, _SERVER_ERROR)
    return problem(status, type(exc).__name__, exc.message)


def _own_tenant(who: Caller, asked: str | None) -> str | None:
    """The tenant a call acts in: a key bound to a tenant acts in its own (403 for another);
    an unbound key in the one it names, if any."""
    if who.tenant is not None and asked not in (None, who.tenant):
        raise HTTPException(403, f"this key is bound to tenant {who.tenant!r}")
    return who.tenant or asked


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True)


_PATH = re.compile(r"(?<![\w.~:/-])(?:/[^/\s\"'<>:]+)+/([^/\s\"'<>:]+)")
"""an absolute POSIX path (not a URL's); its last part (the file's name) is kept"""


def shown_error(error: Any, who: Key) -> Any:
    """A run's error (or an event's) as ``who`` may see it: a system key (an admin) whole, any other
    with each file path in its message and traceback cut to the file's name (frames, lines and code
    stay): where the server keeps its code and Python is not a user's or a machine's to read."""
    if error is None or (isinstance(who, Caller) and who.role == "system"):
        return error
    if isinstance(error, str):
        return _PATH.sub(r"\1", error)
    if isinstance(error, dict):
        return {k: shown_error(v, who) if k in ("message", "traceback") else v for k, v in error.items()}
    return error


def _key(request: Request, authorization: str | None) -> Key:
    """What an ``Authorization: Bearer <key>`` names (401 without a known key)."""
    keys: Mapping[str, Key] | None = request.app.state.keys
    if keys is None:
        request.state.key, request.state.share = "-", None
        return Caller("system")
    scheme, _, key = (authorization or "").partition(" ")
    digest = hash_key(key) if scheme.lower() == "bearer" and key else ""
    found = keys.get(digest) if digest else None
    if found is None:
        why = "this API key is not known here" if digest else "an API key is needed: Authorization: Bearer <key>"
        raise HTTPException(401, why, headers={"WWW-Authenticate": "Bearer"})
    request.state.key = digest  # what per-key bounds count by
    # and per-tenant ones, one share per kind of key: a tenant's users cannot starve its machine keys
    request.state.share = f"{found.role} keys of {found.tenant}" if isinstance(found, Caller) and found.tenant else None
    return found


BEARER = HTTPBearer(auto_error=False, description="an API key: `Authorization: Bearer <key>`")
"""declares the scheme in the OpenAPI document (so a viewer can send a key); ``_key`` checks the key"""


def _caller(
    request: Request,
    authorization: Annotated[str | None, Header()] = None,
    _: Annotated[Any, Depends(BEARER)] = None,
) -> Caller:
    """The caller an ``Authorization: Bearer <key>`` names (401 without a known key, 403 for a
    metrics key)."""
    found = _key(request, authorization)
    if not isinstance(found, Caller):
        raise HTTPException(403, "a metrics key reads /metrics only")
    return found


def _scraper(
    request: Request,
    authorization: Annotated[str | None, Header()] = None,
    _: Annotated[Any, Depends(BEARER)] = None,
) -> None:
    """``/metrics`` is for a metrics key or a system key bound to no tenant (it counts every tenant's
    workflows): 403 for any other key."""
    found = _key(request, authorization)
    if isinstance(found, Caller) and (found.role != "system" or found.tenant is not None):
        raise HTTPException(403, "/metrics needs a metrics key or a system key bound to no tenant")


Auth = Annotated[Caller, Depends(_caller)]


MAX_BODY_BYTES = 2 << 20
"""a request body larger than this is refused (413) before it is read whole: run input is at most
1 MiB encoded, an answer 64 KiB"""


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes with 413, by Content-Length or while they stream
    (a chunked body declares no length)."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await problem(413, "PayloadTooLarge", f"bodies are at most {self.limit} bytes")(scope, receive, send)
            return
        seen = 0

        async def limited() -> Any:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise HTTPException(413, f"bodies are at most {self.limit} bytes")
            return message

        await self.app(scope, limited, send)


def create_app(pw: Parkway, keys: Mapping[str, Key] | None = None, *, close_client: bool = False) -> FastAPI:
    """The app for one deployment; ``keys`` maps key hashes to callers (None: no authentication,
    for a server only the machine it runs on can reach). Shutting the app down closes the connections
    it opened itself, and ``pw`` too with ``close_client`` (else its owner closes it)."""
    events = _EventReader(pw)
    pauses: _PauseWatch | _ShardedPauseWatch | None = None
    if events.sharded:  # one watch of each shard's feed
        pauses = _ShardedPauseWatch([_PauseWatch(partial(events.connect, url=u)) for u in events.urls],
                                    pw.store.shard_of)  # type: ignore[attr-defined]
    elif events.urls:
        pauses = _PauseWatch(events.connect)
    waiting = _Slots("waiting listings", MAX_WAITING_PER_KEY)
    streams = _Streams()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        access = logging.getLogger("uvicorn.access")  # configured by the server by now
        access.addFilter(_MASK_LINKS)
        try:
            yield
        finally:
            access.removeFilter(_MASK_LINKS)
            if pauses is not None:
                await pauses.close()
            if close_client:
                await anyio.to_thread.run_sync(pw.close)

    app = FastAPI(
        title="parkway",
        version="1",
        description="Durable, human-in-the-loop workflows: start runs, follow their events, answer their pauses.",
        lifespan=lifespan,
        # no Swagger UI or ReDoc page: FastAPI's load their code from a CDN, on the origin whose tab
        # keeps the operator's key; /openapi.json is served, for any viewer of the operator's choice
        docs_url=None,
        redoc_url=None,
        # no redirect from /path/ to /path: its Location would be built from the request's Host header
        redirect_slashes=False,
        dependencies=[Depends(problems.query_casing)],
    )
    problems.install(app)
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)
    app.state.keys = keys
    refused = Refused()
    registry = CollectorRegistry(auto_describe=False)  # the app's own: the global one stays untouched
    registry.register(ParkwayCollector(lambda: pw.store.tallies(now_ms()), refused))

    @app.exception_handler(TooMany)
    async def too_many(request: Request, exc: TooMany) -> JSONResponse:
        return problem(429, "TooManyRequests", f"at most {exc.limit} {exc.what} at once",
                       headers={"Retry-After": str(RETRY_AFTER_S)})

    @app.exception_handler(ParkwayError)
    async def parkway_error(request: Request, exc: ParkwayError) -> JSONResponse:
        if isinstance(exc, StoreUnavailable):
            return _problem(503, exc)
        if isinstance(exc, SessionNotFound) or (
            isinstance(exc, SessionDenied) and getattr(exc, "reason", None) in ("tenant", "owner")
        ):
            # another tenant's or owner's session reads word for word as none: a different answer
            # would tell that one exists
            return _problem(404, SessionNotFound("no such session"))
        if isinstance(exc, SessionDenied):
            return _problem(403, exc)
        if isinstance(exc, SessionError):  # a parked or busy branch, a session id taken
            return _problem(409, exc)
        if isinstance(exc, RunNotFound | InterruptNotFound):
            return _problem(404, exc)
        if isinstance(exc, ValidationError | WorkflowError):
            return _problem(422, exc)
        return _problem(500, exc)

    @app.get("/healthz", tags=["health"], responses={503: {"description": "Redis does not answer"}})
    async def healthz() -> JSONResponse:
        try:
            await anyio.to_thread.run_sync(pw.store.ping)
        except Exception as exc:  # noqa: BLE001 - any failure to reach Redis is "unhealthy"
            return JSONResponse({"redis": "unreachable", "detail": type(exc).__name__}, status_code=503)
        return JSONResponse({"redis": "ok"})

    @app.get("/metrics", tags=["health"], response_class=Response, responses=problems.responses(401, 403, 503))
    def metrics(_: Annotated[None, Depends(_scraper)]) -> Response:
        """Prometheus text exposition: the deployment's counters, kept in Redis (``parkway.http.metrics``)."""
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    @app.post("/v1/runs", status_code=201, response_model=Started, tags=["runs"],
              responses=problems.responses(401, 403, 413, 422, 503))
    def start(body: StartRun, who: Auth) -> dict[str, Any]:
        tenant = _own_tenant(who, body.tenant)
        run_id = pw.start(body.workflow, body.input, run_id=body.run_id, ttl_ms=body.ttl_ms, tenant=tenant,
                          owner=who.owner if who.role == "user" else None, origin=who.origin)
        return {"runId": run_id}

    @app.get("/v1/runs", response_model=RunPage, tags=["runs"], responses=problems.responses(401, 403, 422, 503))
    def list_runs(
        who: Auth,
        status: RunStatus | None = None,
        workflow: str | None = None,
        workflow_prefix: Annotated[
            str | None, Query(alias="workflowPrefix", min_length=1, max_length=MAX_SEARCH)
        ] = None,
        tenant: str | None = None,
        created_after: Annotated[int | None, Query(alias="createdAfter")] = None,
        created_before: Annotated[int | None, Query(alias="createdBefore")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """Runs, newest first: the runs the key may read (a user key its own, a key bound to a tenant
        its tenant's), filtered before paging; ``nextCursor`` is opaque and signed. One request reads
        at most 5,000 index entries: a narrow filter may give a short page whose cursor goes on."""
        query = RunsQuery(
            status=status.value if status is not None else None, workflow=workflow, workflow_prefix=workflow_prefix,
            tenant=tenant, created_after=created_after, created_before=created_before, limit=limit, cursor=cursor,
        )
        return _dump(pw.list_runs(query, caller=who))

    @app.get("/v1/runs/{run_id}", response_model=Run, response_model_by_alias=True, tags=["runs"],
             responses=problems.responses(401, 403, 404, 422, 503))
    def get_run(run_id: str, who: Auth) -> dict[str, Any]:
        pw.check_run(run_id, who, "read")  # by the owner and tenant written on the run
        run = _dump(pw.get_run(run_id))
        return {**run, "error": shown_error(run.get("error"), who)}

    @app.post("/v1/runs/{run_id}/cancel", response_model=CancelResult, tags=["runs"],
              responses=problems.responses(401, 403, 404, 409, 413, 422, 503))
    def cancel(run_id: str, who: Auth, body: Annotated[CancelBody | None, Body()] = None) -> JSONResponse:
        """Cancel the run (and every run below it); a body with a ``reason`` is optional. A run that
        had finished answers as an answered interrupt does: 409, ``already_resolved`` (with its
        ``runStatus``; the outcome read ``already_finished`` before 0.x)."""
        pw.check_run(run_id, who, "cancel")
        result = _dump(pw.cancel(run_id, reason=body.reason if body else None, responder=who.name))
        if result["outcome"] != CancelOutcome.CANCELLED.value:
            return outcome_problem(409, result)
        return JSONResponse(result)

    @app.post("/v1/runs/{run_id}/fork", status_code=201, response_model=Forked, tags=["runs"],
              responses=problems.responses(401, 403, 404, 413, 422, 503))
    def fork(run_id: str, body: ForkBody, who: Auth) -> dict[str, Any]:
        record = pw.check_run(run_id, who, "fork")
        if body.input is not None:  # laid over what the run's starter gave: that rank or higher
            check_overlay(who, run_id, record.origin if record is not None else None)
        # past an answered interrupt only a system caller forks; the others re-open the answered step
        step = body.step if who.role == "system" else pw.gated_step(run_id, body.step)
        new = pw.fork(run_id, step=step, new_run_id=body.run_id, input=body.input)
        return {"runId": new, "forkedFrom": {"runId": run_id, "step": step}}

    @app.get("/v1/runs/{run_id}/events", tags=["runs"], response_class=StreamingResponse,
             responses=problems.responses(401, 403, 404, 422, 429, 503))
    async def stream(
        request: Request,
        run_id: str,
        who: Auth,
        after: str = "0",
        last_event_id: Annotated[str | None, Header()] = None,
    ) -> StreamingResponse:
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
        return streams.open(request, events.sse(run_id, start_at, with_tokens=who.role != "user", still=still_reaches,
                                                who=who))

    @app.get("/v1/interrupts", response_model=InterruptPage, tags=["interrupts"],
             responses=problems.responses(401, 403, 422, 429, 503))
    async def list_interrupts(
        request: Request,
        who: Auth,
        workflow: str | None = None,
        run_id: Annotated[str | None, Query(alias="runId")] = None,
        order: Order = "newest",
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
        cursor: str | None = None,
        tokens: bool = False,
        wait_ms: Annotated[int, Query(alias="waitMs", ge=0, le=MAX_WAIT_MS)] = 0,
        audience: str | None = None,
        tenant: str | None = None,
        session: str | None = None,
        created_after: Annotated[int | None, Query(alias="createdAfter")] = None,
        created_before: Annotated[int | None, Query(alias="createdBefore")] = None,
        status: Status = "pending",
        workflow_prefix: Annotated[
            str | None, Query(alias="workflowPrefix", min_length=1, max_length=MAX_SEARCH)
        ] = None,
        q: Annotated[str | None, Query(min_length=1, max_length=MAX_SEARCH,
                                       description="text the question holds (case ignored)")] = None,
    ) -> dict[str, Any]:
        if tokens and who.role == "user":
            raise HTTPException(403, "a user's key cannot read resume tokens (system and machine keys can)")
        # a key bound to a tenant lists its tenant's interrupts only (its runs', its sessions')
        tenant = _own_tenant(who, tenant)
        if status != "pending" and tenant == who.tenant:
            tenant = None  # ended ones list by workflow or run only: the caller filter keeps its tenant's
        # what the caller may not see is filtered out before paging, and the cursor is opaque
        # (parkway.runtime.authority, parkway.runtime.cursors)
        query = ListingQuery(
            workflow=workflow, run_id=run_id, order=order, limit=limit, cursor=cursor, include_tokens=tokens,
            wait_ms=wait_ms, audience=audience, tenant=tenant, session=session, created_after=created_after,
            created_before=created_before, status=status, workflow_prefix=workflow_prefix, search=q,
        )
        if not wait_ms:
            page = await anyio.to_thread.run_sync(lambda: pw.list_interrupts(query, caller=who))
        else:
            with waiting.slot(request.state.key):  # 429 past the key's bound
                page = await _wait_for_page(pw, pauses, query, who)
        return _dump(page)

    @app.get("/v1/interrupts/events", tags=["interrupts"], response_class=StreamingResponse,
             responses=problems.responses(401, 403, 422, 429, 503))
    async def pause_stream(
        request: Request,
        who: Auth,
        after: str | None = None,
        last_event_id: Annotated[str | None, Header()] = None,
    ) -> StreamingResponse:
        """The pause feed as server-sent events: an ``interrupt.paused`` event (``{runId, workflow}``,
        ``id``: the feed's entry id) for each run that pauses from now on (or after ``Last-Event-ID`` /
        ``?after=``, within the feed's last 2,000 pauses) and that the key may list the interrupts of;
        a comment while none does. What the inbox page follows to read its first page again."""
        start_at = None if (last_event_id or after) is None else events.check_position(last_event_id or after or "")

        def visible(run_ids: list[str]) -> set[str]:
            if who.role == "system" and who.tenant is None:
                return set(run_ids)
            whose = pw.store.authorities(sorted(set(run_ids)))
            return {r for r, (tenant, owner) in whose.items() if reaches(who, tenant, owner, "list")}

        if start_at is None:  # from now on: the feed's newest entry, read before the stream says it is open
            start_at = await anyio.to_thread.run_sync(events.pause_position)
        return streams.open(request, events.pause_sse(start_at, visible, pauses))

    @app.get("/v1/interrupts/{request_id}", response_model=Interrupt, response_model_by_alias=True,
             tags=["interrupts"], responses=problems.responses(401, 403, 404, 422, 503))
    def get_interrupt(
        request_id: str, who: Auth, run_id: Annotated[str | None, Query(alias="runId")] = None
    ) -> dict[str, Any]:
        """One interrupt, open or ended, with its lifecycle record (``runId`` only for a request id
        that does not carry it)."""
        check_id(request_id, "request id")
        found = run_id or telemetry.run_of_request(request_id)
        if found is not None:  # by the owner and tenant written on its run (its summary, once ended)
            pw.check_run(found, who, "list")
        # (with no run id to check, get_interrupt reads nothing: it asks for one, 422)
        return _dump(pw.get_interrupt(request_id, run_id=run_id))

    @app.get("/v1/me", response_model=Me, tags=["health"], responses=problems.responses(401, 403))
    def me(who: Auth) -> dict[str, Any]:
        """Who the key is: role, owner and tenant (what the inbox page says it sees, and why)."""
        return {"name": who.name, "role": who.role, "owner": who.owner, "tenant": who.tenant}

    @app.get("/v1/interrupts/{request_id}/form", response_model=AnswerForm, tags=["interrupts"],
             responses=problems.responses(401, 403, 404, 422, 503))
    def answer_form(
        request_id: str, who: Auth, run_id: Annotated[str | None, Query(alias="runId")] = None
    ) -> dict[str, Any]:
        """What a contract interrupt's answer must fit: its response model's JSON Schema (the inbox
        page builds its form from it); 422 for an interrupt without a contract."""
        interrupt = _reachable_interrupt(pw, who, request_id, run_id, "answer")
        asked = interrupt.request
        if asked is None or asked.contract_ref is None:
            raise ValidationError(f"interrupt {request_id!r} asks no contract: it has no form", request_id=request_id)
        contract = pw.settings.modules.load_contract(asked.contract_ref)
        return {"schemaId": contract.schema_id, "schemaVersion": contract.version,
                "schema": contract.response.model_json_schema()}

    @app.post("/v1/interrupts/{request_id}/answer", response_model=ResumeResult, tags=["interrupts"],
              responses=problems.responses(401, 403, 404, 409, 410, 413, 422, 503))
    def answer(request_id: str, body: AnswerBody, who: Auth) -> JSONResponse:
        """Answer (or cancel) an interrupt by its request id, as the caller: what the inbox page does,
        so no resume token ever reaches a browser. A contract answer that does not fit gets 422 with
        ``problems`` (field path -> why) and the interrupt stays open."""
        check_id(request_id, "request id")
        run_id = body.run_id or telemetry.run_of_request(request_id)
        if run_id is None:
            raise ValidationError("this request id does not carry its run id: send runId")
        try:
            pw.check_run(run_id, who, "answer")
        except RunNotFound:
            return outcome_problem(404, _dump(ResumeResult(outcome=ResumeOutcome.UNKNOWN)))
        token = tokens.mint(pw.backend.options.secret, run_id, request_id)
        try:
            if body.cancel:
                result = pw.cancel_interrupt(token, reason=body.reason, responder=who.name, request_id=request_id)
            else:
                result = pw.resume(token, selected=body.selected, value=body.value, request_id=request_id,
                                   responder=who.name)
        except (InvalidAnswer, MalformedResume, ValidationError) as exc:
            refused.add("invalid")
            return problem(422, type(exc).__name__, exc.message, problems=getattr(exc, "problems", {}))
        if not result.accepted:
            refused.add(result.outcome.value)
            return outcome_problem(_RESUME_STATUS[result.outcome], _dump(result))
        return JSONResponse(_dump(result))

    @app.post(
        "/v1/resume",
        response_model=ResumeResult,
        tags=["interrupts"],
        responses=problems.responses(401, 403, 404, 409, 410, 413, 422, 503),
    )
    def resume(body: ResumeBody, who: Auth) -> JSONResponse:
        # a person answers as themselves; a system or machine caller may name who it answers for
        responder = who.name if who.role == "user" else (body.responder or who.name)
        try:
            pw.check_run(tokens.run_id_of(body.token), who, "answer")
        except MalformedResume as exc:
            refused.add("invalid")
            return _problem(422, exc)
        except RunNotFound:  # another tenant's or owner's run answers as no run
            refused.add(ResumeOutcome.UNKNOWN.value)
            return outcome_problem(404, _dump(ResumeResult(outcome=ResumeOutcome.UNKNOWN)))
        try:
            if body.cancel:
                result = pw.cancel_interrupt(body.token, reason=body.reason, responder=responder,
                                             request_id=body.request_id)
            else:
                result = pw.resume(body.token, selected=body.selected, value=body.value, request_id=body.request_id,
                                   responder=responder)
        except (InvalidAnswer, MalformedResume, ValidationError) as exc:
            refused.add("invalid")
            return _problem(422, exc)
        if not result.accepted:
            refused.add(result.outcome.value)
            return outcome_problem(_RESUME_STATUS[result.outcome], _dump(result))
        return JSONResponse(_dump(result))

    @app.post(
        "/v1/resume-or-start",
        response_model=ResumeOrStartResult,
        tags=["interrupts"],
        responses={201: {"model": ResumeOrStartResult}, **problems.responses(401, 403, 404, 409, 410, 413, 422, 503)},
    )
    def resume_or_start(body: ResumeOrStartBody, who: Auth) -> JSONResponse:
        responder = who.name if who.role == "user" else (body.responder or who.name)
        try:
            run_id = tokens.run_id_of(body.token)
            record = pw.check_run(run_id, who, "restart")
        except MalformedResume as exc:
            refused.add("invalid")
            return _problem(422, exc)
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
            return _problem(422, exc)
        status = {"resumed": 200, "started": 201, "already_resolved": 409, "expired": 410}.get(result.outcome, 404)
        if status >= 400:
            return outcome_problem(status, _dump(result))
        return JSONResponse(_dump(result), status_code=status)

    @app.get("/ui", response_class=HTMLResponse, include_in_schema=False)
    @app.get("/ui/runs", response_class=HTMLResponse, include_in_schema=False)
    @app.get("/ui/runs/{run_id}", response_class=HTMLResponse, include_in_schema=False)
    @app.get("/ui/sessions/{session_id}", response_class=HTMLResponse, include_in_schema=False)
    def live_page(run_id: str | None = None, session_id: str | None = None) -> HTMLResponse:
        """The inbox page: pending interrupts to answer, one run (its timeline over its event stream),
        or one session (its message tree and open interrupts). It calls the API with a key the person
        enters (kept in the tab), and acts with that key's role."""
        return _ui_page()

    @app.get("/a/{link}", response_class=HTMLResponse, tags=["answer links"],
             responses={**_LINK_PAGES, **problems.responses(503, html=True)})
    def link_page(link: str) -> HTMLResponse:
        """Show what the link answers, with a button that POSTs it; a GET never answers."""
        found = _link_state(pw, link)
        if isinstance(found, HTMLResponse):
            return found
        interrupt, answer = found
        label = next((o.label for o in interrupt.asked().options if o.id == answer.option), answer.option)
        return _page(
            "Confirm your answer",
            f"<p>{escape(interrupt.asked().question or 'Your answer')}</p>"
            f"<form method='post'><button type='submit'>Answer “{escape(label)}”</button></form>",
        )

    @app.post("/a/{link}", response_class=HTMLResponse, tags=["answer links"],
              responses={**_LINK_PAGES, 422: {"description": "a page: the answer does not fit"},
                         **problems.responses(503, html=True)})
    def link_answer(link: str) -> HTMLResponse:
        found = _link_state(pw, link)
        if isinstance(found, HTMLResponse):
            return found
        interrupt, answer = found
        token = tokens.mint(pw.backend.options.secret, answer.run_id, answer.request_id)
        selected: Any = [answer.option] if interrupt.asked().multiple else answer.option
        try:
            result = pw.resume(token, selected=selected, request_id=answer.request_id,
                               responder=answer.responder or "answer-link")
        except ValidationError as exc:
            refused.add("invalid")
            return _page("Not recorded", f"<p>{escape(exc.message)}</p>", 422)
        if result.accepted:
            return _page("Thank you", "<p>Your answer is recorded.</p>")
        refused.add(result.outcome.value)
        return _page(*_LINK_OUTCOMES[result.outcome])

    def session_stream(
        request: Request, session_id: str, after: str, incarnation: str, still: Callable[[], bool]
    ) -> StreamingResponse:
        return streams.open(request, events.session_sse(session_id, after, incarnation, still))

    session_http.add_routes(app, pw.sessions, _caller, session_stream)
    return app


def _reachable_interrupt(pw: Parkway, who: Caller, request_id: str, run_id: str | None, door: Door) -> Interrupt:
    """The interrupt ``request_id`` names, if ``who`` may pass ``door`` of its run (else 404, as
    for none)."""
    check_id(request_id, "request id")
    found = run_id or telemetry.run_of_request(request_id)
    if found is None:
        raise InterruptNotFound(f"no interrupt {request_id!r}", request_id=request_id)
    pw.check_run(found, who, door)
    return pw.get_interrupt(request_id, run_id=run_id)


_LINK_PAGES: dict[int | str, dict[str, Any]] = {
    404: {"description": "a page: not a valid link, or no such question"},
    409: {"description": "a page: the question was already answered"},
    410: {"description": "a page: the link, or its question, expired"},
}
"""what an answer link's pages answer besides 200 (HTML, as the 200 is)"""

_LINK_OUTCOMES = {
    ResumeOutcome.ALREADY_RESOLVED: ("Already answered", "<p>This question was already answered.</p>", 409),
    ResumeOutcome.EXPIRED: ("Expired", "<p>This question is no longer open: it expired.</p>", 410),
    ResumeOutcome.UNKNOWN: ("Unknown", "<p>There is no such question.</p>", 404),
}


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    html = (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<meta name='robots' content='noindex'><title>{escape(title)}</title></head>"
        f"<body style='font-family: system-ui, sans-serif; max-width: 32rem; margin: 3rem auto'>"
        f"<h1>{escape(title)}</h1>{body}</body></html>"
    )
    return HTMLResponse(html, status_code=status, headers={**_PAGE_HEADERS, "Content-Security-Policy": _LINK_CSP})


def _link_state(pw: Parkway, text: str) -> tuple[Interrupt, links.AnswerLink] | HTMLResponse:
    """The open interrupt a valid, unexpired link answers, or the page that says why there is none."""
    try:
        answer = links.verify(pw.backend.options.secret, text)
    except MalformedResume:
        return _page("Not a valid link", "<p>This answer link is not valid.</p>", 404)
    if answer.expires_at <= now_ms():
        return _page("Expired", "<p>This answer link has expired.</p>", 410)
    found = pw.lookup(tokens.mint(pw.backend.options.secret, answer.run_id, answer.request_id))
    if isinstance(found, ResumeResult):
        return _page(*_LINK_OUTCOMES[found.outcome])
    return found, answer


class _MaskLinks(logging.Filter):
    """Masks answer links in access log lines: a logged link would answer as its responder."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) > 2 and isinstance(args[2], str):
            record.args = (*args[:2], links.mask(args[2]), *args[3:])  # uvicorn's: client, method, path, ...
        return True


_MASK_LINKS = _MaskLinks()


async def _wait_for_page(
    pw: Parkway, pauses: _PauseWatch | _ShardedPauseWatch | None, query: ListingQuery, who: Caller
) -> InterruptPage:
    """A waiting listing that holds no thread while it waits: list (in a thread, with the pause feed's
    position), and while the page is empty wait on the process's one watch of the feed for a pause
    past that position, then list again, until ``query.wait_ms`` have passed. Embedded (no asyncio
    Redis client), the client's own wait runs in a thread."""
    if pauses is None:
        return await anyio.to_thread.run_sync(lambda: pw.list_interrupts(query, caller=who))
    from ..adapters.redis.layout import pause_wakes

    deadline = anyio.current_time() + query.wait_ms / 1000
    once = replace(query, wait_ms=0)
    # a pause of another tenant or workflow than the listing's does not wake it
    wakes = None if query.tenant is None and query.workflow is None else partial(
        pause_wakes, tenant=query.tenant, workflow=query.workflow)
    while True:
        page, feed = await anyio.to_thread.run_sync(lambda: pw.list_watching(once, caller=who))
        left = deadline - anyio.current_time()
        placed = query.run_id if query.run_id is not None else query.session  # as the router places it
        if page.items or left <= 0 or not await pauses.wait_past(feed, left, placed, wakes):
            return page


class TooMany(Exception):
    """A key holds as many of a bounded resource as it may: 429 with ``Retry-After``."""

    def __init__(self, what: str, limit: int) -> None:
        super().__init__(what)
        self.what, self.limit = what, limit


class _Slots:
    """At most ``limit`` of one kind of long request (waiting listings, event streams) per API key at
    once, ``per_tenant`` for the keys of one share (the keys of one kind bound to one tenant)
    together, and ``total`` in the process; ``slot(key, share)`` raises TooMany past any bound. (The
    event loop is one thread: no lock needed.)"""

    def __init__(self, what: str, limit: int, total: int | None = None, per_tenant: int | None = None) -> None:
        self.what, self.limit, self.total, self.per_tenant = what, limit, total, per_tenant
        self.in_use: dict[str, int] = {}
        self.tenants: dict[str, int] = {}

    @contextmanager
    def slot(self, key: str, share: str | None = None) -> Iterator[None]:
        if self.in_use.get(key, 0) >= self.limit:
            raise TooMany(f"{self.what} of this key", self.limit)
        counted = share is not None and self.per_tenant is not None
        if counted and self.tenants.get(share or "", 0) >= (self.per_tenant or 0):
            raise TooMany(f"{self.what} of the {share}", self.per_tenant or 0)
        if self.total is not None and sum(self.in_use.values()) >= self.total:
            raise TooMany(f"{self.what} of this server", self.total)
        _count(self.in_use, key, 1)
        if counted:
            _count(self.tenants, share or "", 1)
        try:
            yield
        finally:
            _count(self.in_use, key, -1)
            if counted:
                _count(self.tenants, share or "", -1)


def _count(counts: dict[str, int], name: str, by: int) -> None:
    """Add ``by`` to ``counts[name]``; a count that reaches 0 leaves the dict."""
    counts[name] = counts.get(name, 0) + by
    if not counts[name]:
        del counts[name]


def _str(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _feed_id(entry: str) -> tuple[int, int]:
    ms, _, seq = entry.partition("-")
    return int(ms), int(seq or 0)


class _PauseWatch:
    """One XREAD BLOCK on the pause feed for every waiting listing of this process, on one
    connection: a listing waits for an entry past the position it listed at. It reads only while a
    listing waits (then, at most ``STREAM_BLOCK_MS`` longer)."""

    LOG = 1000
    """the feed entries read last that a waiting listing checks against what it could list"""

    def __init__(self, connect: Callable[[], Any]) -> None:
        self.connect = connect
        self.seen = (0, 0)  # the newest feed entry known to exist
        self.start = (0, 0)  # the log holds every entry read past this one (but the ones dropped)
        self.dropped = (0, 0)  # the newest entry the log dropped
        self.log: deque[tuple[tuple[int, int], Any]] = deque(maxlen=self.LOG)
        self.waiting = 0
        self.news = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def wait_past(self, feed: str, timeout: float, placed: str | None = None,
                        wakes: Callable[[Any], bool] | None = None) -> bool:
        """True once the feed holds an entry past ``feed`` (one ``wakes`` keeps, if given: a pause
        the listing could list); False after ``timeout`` seconds (``placed``: the run or session id
        the listing is confined to, which only :class:`_ShardedPauseWatch` needs)."""
        position = _feed_id(feed)
        self.waiting += 1
        try:
            if self.task is None or self.task.done():
                self.task = asyncio.create_task(self._read(feed))
            with anyio.move_on_after(timeout):
                while not self._woken(position, wakes):
                    news = self.news
                    await news.wait()
                return True
            return False
        finally:
            self.waiting -= 1

    def _woken(self, position: tuple[int, int], wakes: Callable[[Any], bool] | None) -> bool:
        if self.seen <= position:
            return False
        if wakes is None or position < self.start or self.dropped > position:
            return True  # (entries it may not have read: wake, as for any pause)
        return any(at > position and wakes(fields) for at, fields in self.log)

    async def _read(self, after: str) -> None:
        from ..adapters.redis import keys

        self.seen = max(self.seen, _feed_id(after))  # ``after`` was the feed's newest entry
        self.start, self.dropped = self.seen, (0, 0)
        self.log.clear()
        after = f"{self.seen[0]}-{self.seen[1]}"
        client = self.connect()  # its own connection, closed when no listing waits any more
        try:
            while self.waiting:
                try:
                    reply = await client.xread({keys.pauses(): after}, count=100, block=STREAM_BLOCK_MS)
                except Exception as exc:  # noqa: BLE001 - Redis away: waiters time out; a later wait reads again
                    log.warning("pause_watch_failed", error=type(exc).__name__)
                    await anyio.sleep(1)
                    continue
                if reply:
                    for entry, fields in reply[0][1]:
                        if len(self.log) == self.LOG:
                            self.dropped = self.log[0][0]
                        self.log.append((_feed_id(_str(entry)), fields))
                    last = reply[0][1][-1][0]
                    after = _str(last)
                    self.seen = max(self.seen, _feed_id(after))
                    self.news.set()
                    self.news = asyncio.Event()
        finally:
            self.task = None  # (no await since the loop ended) a listing that waits from now on starts a new read
            await _close(client)

    async def close(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
            with suppress(asyncio.CancelledError):
                await self.task


class _ShardedPauseWatch:
    """With shards: a :class:`_PauseWatch` of each shard's feed. A listing's feed position is one
    entry id per shard (comma-separated, as the router lists), and a pause past it on any shard
    ends its wait; a listing of one run (``runId``) or one session (``session``: its runs share its
    shard) has that shard's position and waits there."""

    def __init__(self, watches: list[_PauseWatch], shard_of: Callable[[str], int]) -> None:
        self.watches, self.shard_of = watches, shard_of

    async def wait_past(self, feed: str, timeout: float, placed: str | None = None,
                        wakes: Callable[[Any], bool] | None = None) -> bool:
        if placed is not None:
            return await self.watches[self.shard_of(placed)].wait_past(feed, timeout, wakes=wakes)
        parts = feed.split(",")
        if len(parts) != len(self.watches):
            raise ValidationError(f"a position in {len(self.watches)} pause feeds, not {feed!r}")
        # '' : a shard the listing did not reach (down): not watched
        tasks = [asyncio.create_task(w.wait_past(p, timeout, wakes=wakes))
                 for w, p in zip(self.watches, parts, strict=True) if p]
        if not tasks:
            await anyio.sleep(timeout)
            return False
        try:
            for done in asyncio.as_completed(tasks):
                if await done:
                    return True
            return False
        finally:
            for task in tasks:
                task.cancel()

    async def close(self) -> None:
        for watch in self.watches:
            await watch.close()


async def _run_plan(client: Any, plan: Any) -> Any:
    """What a read plan (``parkway.adapters.redis.layout.Plan``) returns, each of its round trips
    sent as one pipeline on the asyncio ``client`` (``RedisStore`` runs the same plans on its own)."""
    try:
        commands = next(plan)
        while True:
            pipe = client.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command)
            commands = plan.send(await pipe.execute())
    except StopIteration as done:
        return done.value


class _EventReader:
    """Reads events for SSE: through Redis's asyncio client when there is a Redis URL (an open
    stream holds no thread), else (embedded) in the thread pool.

    Each open stream reads on a connection of its own, opened with the stream and closed when it
    ends: streams are bounded per key and per process (``MAX_STREAMS_PER_KEY``, ``MAX_STREAMS``), so
    connections are too, and a burst of streams leaves none behind when it is gone."""

    def __init__(self, pw: Parkway) -> None:
        self.pw = pw
        sharded = pw.settings.shards is not None and len(pw.settings.shards) > 1
        self.urls: tuple[str, ...] = ()
        """the Redis servers: one, or with shards each shard's in order; none when embedded"""
        if pw.settings.redis_url is not None:
            self.urls = tuple(pw.settings.shards or ()) if sharded else (pw.settings.redis_url,)
        self.sentinels: dict[str, Any] = {}
        """under Sentinel, by URL: the asyncio clients of the sentinels every stream's connection asks"""

    @property
    def sharded(self) -> bool:
        return len(self.urls) > 1

    def connect(self, key: str | None = None, *, url: str | None = None) -> Any:
        """A client of its own for one stream or watch (its pipeline and its blocking read share it),
        on ``url``, else the Redis of run or session ``key`` (with shards, its shard's), else the
        first; None when embedded. Under Sentinel its connection asks the sentinels where the master is."""
        if not self.urls:
            return None
        from redis import asyncio as aioredis

        from ..adapters.redis.sentinel import async_client, async_sentinels, is_sentinel_url

        if url is None:
            url = self.urls[self.pw.store.shard_of(key)] if key is not None and self.sharded else self.urls[0]  # type: ignore[attr-defined]
        # a read blocks up to STREAM_BLOCK_MS, and on a busy host its reply may come later still
        bounds: dict[str, Any] = {"socket_timeout": STREAM_BLOCK_MS / 1000 + 10, "socket_connect_timeout": 5,
                                  "max_connections": 2}
        if is_sentinel_url(url):
            if url not in self.sentinels:
                self.sentinels[url] = async_sentinels(url)
            return async_client(url, self.sentinels[url], **bounds)
        return aioredis.Redis.from_url(url, **bounds)

    async def _read(self, client: Any, run_id: str, after: str, *, session: bool = False) -> list[Any]:
        from ..adapters.redis import layout

        if client is None:
            if session:
                return await anyio.to_thread.run_sync(self.pw.sessions.store.events, run_id, after, 1000, 100)
            return await anyio.to_thread.run_sync(self.pw.store.read_events, run_id, after, 1000, 100)
        if session:
            found: list[Any] = await _run_plan(client, layout.read_session_events(run_id, after, STREAM_BLOCK_MS, 100))
            return found
        events: list[Any] = await _run_plan(client, layout.read_events(run_id, after, STREAM_BLOCK_MS, 100))
        return events

    async def sse(
        self, run_id: str, after: str, *, with_tokens: bool = True, still: Callable[[], bool] | None = None,
        who: Key | None = None,
    ) -> AsyncIterator[bytes]:
        """``id``/``event``/``data`` frames until ``done``; a comment on every idle read keeps proxies
        from closing the connection. Interrupt events carry their resume token ``with_tokens``, and
        errors as ``who`` may see them (``shown_error``; None: whole).
        ``still()`` (in the thread pool) is asked after every read, before what it read is sent: the
        stream ends when it says False (the caller lost the run, or the id names another run now)."""
        client = self.connect(run_id)
        try:
            while True:
                batch = await self._read(client, run_id, after)
                if still is not None and not await anyio.to_thread.run_sync(still):
                    return
                if not batch:
                    yield b": waiting\n\n"
                    continue
                for stored in batch:
                    after = stored.id
                    event = self.pw.event(run_id, stored)
                    data = event.data if with_tokens else {k: v for k, v in event.data.items() if k != "resumeToken"}
                    if who is not None and "error" in data:
                        data = {**data, "error": shown_error(data["error"], who)}
                    frame = f"id: {event.id}\nevent: {event.type}\ndata: {json.dumps(data, default=str)}\n\n"
                    yield frame.encode()
                    if ends_stream(event.type, "done"):
                        return
        finally:
            await _close(client)

    def check_position(self, value: str) -> str:
        """A position in the pause feed: an event id; with shards, also one per shard, comma-separated
        (the ids a sharded stream sends)."""
        shards = len(getattr(self.pw.store, "stores", ()))
        parts = value.split(",") if shards else [value]
        if len(parts) not in (1, shards):
            raise ValidationError(f"after must be an event id, or one per shard ({shards}) separated by commas, "
                                  f"not {value[:200]!r}")
        for part in parts:
            check_event_id(part, "after")
        return value

    def pause_position(self) -> str:
        """The pause feed's newest entry id now ("0-0" when it is empty): a stream from it sends the
        pauses made after this call. Blocking (the store's own connection pool). With shards, every
        shard's, comma-separated."""
        from ..adapters.redis import keys
        from ..adapters.redis.errors import translated

        store: Any = self.pw.store
        if self.sharded:
            return str(store.pause_position())
        with translated():  # Redis away: StoreUnavailable (503), before the stream opens
            last = store.client.xrevrange(keys.pauses(), "+", "-", count=1)
        return _text_of(last[0][0]) if last else "0-0"

    async def _read_pauses(
        self, client: Any, after: str, pauses: _PauseWatch | _ShardedPauseWatch | None = None
    ) -> tuple[list[tuple[str, str, str, str]], str, bool]:
        """The pause feed's entries after ``after`` as (entry id, workflow, run id, the run's creation),
        the position to read on from, and whether the read reached the feed's end; waits up to
        STREAM_BLOCK_MS. With shards, every shard's feed, read through the router in the thread pool
        without blocking (an entry's id is then the position just past it: one entry id per shard),
        and while they hold nothing new the stream waits on ``pauses`` (the process's one watch of
        each feed), holding no thread."""
        from ..adapters.redis import keys

        store: Any = self.pw.store
        if self.sharded:
            entries, position, ended = await anyio.to_thread.run_sync(lambda: store.read_pauses(after, 0, 100))
            if not entries and pauses is not None and await pauses.wait_past(position, STREAM_BLOCK_MS / 1000):
                entries, position, ended = await anyio.to_thread.run_sync(lambda: store.read_pauses(after, 0, 100))
            return [(at, f.get("w", ""), f.get("r", ""), f.get("c", "")) for at, f in entries], position, ended
        read = client if client is not None else None
        position = after
        if read is not None:
            reply = await read.xread({keys.pauses(): position}, count=100, block=STREAM_BLOCK_MS)
        else:
            reply = await anyio.to_thread.run_sync(
                lambda: store.client.xread({keys.pauses(): position}, count=100, block=1000))
        out = []
        for entry_id, fields in (reply[0][1] if reply else []):
            f = {_text_of(k): _text_of(v) for k, v in fields.items()}
            out.append((_text_of(entry_id), f.get("w", ""), f.get("r", ""), f.get("c", "")))
        return out, out[-1][0] if out else after, len(out) < 100

    async def pause_sse(
        self, after: str, visible: Callable[[list[str]], set[str]],
        pauses: _PauseWatch | _ShardedPauseWatch | None = None,
    ) -> AsyncIterator[bytes]:
        """The pause feed's entries as ``interrupt.paused`` frames, those of runs ``visible`` (asked in
        the thread pool for each batch) keeps and that still hold their id (an entry outlives its run,
        whose id can then be taken by another: it is told only of its own pauses); a comment on every
        idle read (``: waiting``) and after a read that reached the feed's end (``: caught up``).
        With shards, ``pauses`` is what an idle stream waits on (see ``_read_pauses``)."""
        client = None if self.sharded else self.connect()  # with shards: every feed, through the router

        def current(batch: list[tuple[str, str, str, str]]) -> list[tuple[str, str, str, str]]:
            held = self.pw.store.births(sorted({run_id for _, _, run_id, _ in batch}))
            shown = visible([run_id for _, _, run_id, _ in batch])
            return [e for e in batch if e[2] in shown and held.get(e[2]) == e[3]]

        try:
            while True:
                batch, after, ended = await self._read_pauses(client, after, pauses)
                kept = await anyio.to_thread.run_sync(current, batch) if batch else []
                frames = [f"id: {entry_id}\nevent: interrupt.paused\ndata: "
                          f"{json.dumps({'runId': run_id, 'workflow': workflow})}\n\n"
                          for entry_id, workflow, run_id, _ in kept]
                for frame in frames:
                    yield frame.encode()
                # a comment once the read is at the feed's end: nothing before it is left to send
                if not batch:
                    yield b": waiting\n\n"
                elif ended:
                    yield b": caught up\n\n"
        finally:
            await _close(client)

    async def session_sse(
        self, session_id: str, after: str, incarnation: str, still: Callable[[], bool]
    ) -> AsyncIterator[bytes]:
        """A session's events as SSE frames, of its ``incarnation`` only, while ``still()`` (asked in
        the thread pool after every read, before what it read is sent) says the caller still reaches
        that incarnation: the stream ends with the session, when its id is opened again, or at an
        event stamped with another incarnation (unsent)."""
        client = self.connect(session_id)
        try:
            while True:
                batch = await self._read(client, session_id, after, session=True)
                if not await anyio.to_thread.run_sync(still):
                    return
                if not batch:
                    yield b": waiting\n\n"
                    continue
                for stored in batch:
                    if stored.data.get("incarnation") != incarnation:
                        return
                    after = stored.id
                    data = {"eventId": stored.id, "ts": stored.ts, **stored.data}
                    yield f"id: {stored.id}\nevent: {stored.type}\ndata: {json.dumps(data, default=str)}\n\n".encode()
        finally:
            await _close(client)


def _text_of(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def _close(client: Any) -> None:
    """Close a stream's own client, even while the stream is being cancelled (a client that left)."""
    if client is not None:
        with anyio.CancelScope(shield=True):
            await client.aclose()


class _Streams:
    """Opens event-stream responses: at most ``MAX_STREAMS_PER_KEY`` per API key,
    ``MAX_STREAMS_PER_TENANT`` for the keys of one kind bound to one tenant and ``MAX_STREAMS`` in the process (429
    with Retry-After past any), each sending a first byte at once."""

    def __init__(self) -> None:
        self.slots = _Slots("event streams", MAX_STREAMS_PER_KEY, MAX_STREAMS, MAX_STREAMS_PER_TENANT)

    def open(self, request: Request, frames: AsyncIterator[bytes]) -> StreamingResponse:
        key, share = getattr(request.state, "key", "-"), getattr(request.state, "share", None)
        slot = self.slots.slot(key, share)
        slot.__enter__()  # raises TooMany before any response starts
        done = False

        def release() -> None:
            nonlocal done
            if not done:
                done = True
                slot.__exit__(None, None, None)

        async def body() -> AsyncIterator[bytes]:
            try:
                yield b": open\n\n"  # headers and a first byte now, whatever the stream has to say
                async for frame in frames:
                    yield frame
            finally:
                release()
                with anyio.CancelScope(shield=True):
                    await frames.aclose()  # type: ignore[attr-defined]

        # the body's finally runs when it is closed; a client gone before it started still frees the slot
        return StreamingResponse(body(), media_type="text/event-stream", background=BackgroundTask(release),
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


def app_from_env() -> FastAPI:
    """The app as ``uvicorn --factory parkway.http.app:app_from_env`` (and ``parkway serve``) builds it:
    settings from ``PARKWAY_*``; keys from ``PARKWAY_API_KEYS`` (required unless
    ``PARKWAY_API_NO_AUTH=1``); ``PARKWAY_WORKFLOWS`` required: a caller names a workflow, and only
    the operator's modules (and their submodules) may be imported for it, never what happens to
    lie in the working directory."""
    settings = Settings.from_env()
    raw = os.environ.get("PARKWAY_API_KEYS", "")
    if not raw and os.environ.get("PARKWAY_API_NO_AUTH") != "1":
        raise ConfigError(
            "parkway serve needs PARKWAY_API_KEYS (see parkway.http.app), or PARKWAY_API_NO_AUTH=1 for a server "
            "only this machine can reach"
        )
    if settings.workflows is None:
        raise ConfigError(
            "parkway serve needs PARKWAY_WORKFLOWS (or --workflows): the modules whose workflows HTTP callers "
            "may start; it imports nothing else on a caller's request"
        )
    if settings.max_connections is None:  # a burst of requests leaves no more than these behind
        settings = settings.with_(max_connections=API_CONNECTIONS)
    return create_app(Parkway(settings), parse_keys(raw) if raw else None, close_client=True)

