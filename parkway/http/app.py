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
``POST /slack/interactions``                 Slack's clicks on a message's buttons, signed by Slack (no
                                            key): answers as the Slack user's mapped caller (see
                                            ``parkway.http.routes.slack``)
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
comma-separated; ``parkway.http.auth.hash_key`` or ``parkway serve --hash-key`` makes
the hash) and map to a caller: ``system``, ``machine`` or ``user`` with an owner
and a tenant. A resume's responder defaults to the caller. What each caller reaches is read from the
records (the owner, tenant and origin written on every run and its summary when it is created), at
every door: see :mod:`parkway.runtime.authority` for the role table. What a caller may not reach
answers as what does not exist (404).

The app is assembled from routers, one module per resource (``parkway.http.routes``: ``health``,
``runs``, ``interrupts``, ``links``, ``ui``, ``slack``; the sessions feature's own, ``parkway.sessions.http``).
A route declares what it needs as FastAPI dependencies: the caller (``parkway.http.auth``), the
app's state, its listing and the bounds it takes (``parkway.http.deps``, ``parkway.http.limits``).

Blocking Redis calls run in the thread pool, never on the event loop; event
streams read Redis through its asyncio client, and waiting listings wait on one
shared watch of the pause feed, so neither holds a thread while it waits. With
shards (``PARKWAY_SHARDS``) a stream reads its run's shard, and waiting listings
share one watch of each shard's feed; the pause feed's stream merges the shards'
feeds, read through the router (in the pool, without blocking) when that watch
says there is something to read.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import anyio
from fastapi import Depends, FastAPI

import parkway.problems as problems

from ..client.sync import Parkway
from ..config import Settings
from ..runtime.errors import ConfigError
from ..sessions import http as session_http
from ..tracing import http as tracing_http
from . import failures
from .auth import Key, caller, hash_key, parse_keys
from .deps import Surface
from .limits import MAX_BODY_BYTES, MAX_STREAMS_PER_KEY, MAX_STREAMS_PER_TENANT, MAX_WAITING_PER_KEY, BodyLimit
from .routes import health, interrupts, links, runs, slack, ui

__all__ = ["API_CONNECTIONS", "MAX_STREAMS_PER_KEY", "MAX_STREAMS_PER_TENANT", "MAX_WAITING_PER_KEY",
           "app_from_env", "create_app", "hash_key", "parse_keys"]

API_CONNECTIONS = 16
"""the fixed pool of Redis connections the server's request threads share (event streams and the
pause watch have their own, each closed when it ends)"""


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Masks answer links in the access log while the app runs; on shutdown closes the pause watch,
    and the client too when the app owns it."""
    access = logging.getLogger("uvicorn.access")  # configured by the server by now
    access.addFilter(links.MASK_LINKS)
    house: Surface = app.state.surface
    try:
        yield
    finally:
        access.removeFilter(links.MASK_LINKS)
        if house.watch is not None:
            await house.watch.close()
        if app.state.close_client:
            await anyio.to_thread.run_sync(house.pw.close)


def create_app(pw: Parkway, keys: Mapping[str, Key] | None = None, *, close_client: bool = False) -> FastAPI:
    """The app for one deployment; ``keys`` maps key hashes to callers (None: no authentication,
    for a server only the machine it runs on can reach). Shutting the app down closes the connections
    it opened itself, and ``pw`` too with ``close_client`` (else its owner closes it)."""
    app = FastAPI(
        title="parkway",
        version="1",
        description="Durable, human-in-the-loop workflows: start runs, follow their events, answer their pauses.",
        lifespan=_lifespan,
        # no Swagger UI or ReDoc page: FastAPI's load their code from a CDN, on the origin whose tab
        # keeps the operator's key; /openapi.json is served, for any viewer of the operator's choice
        docs_url=None,
        redoc_url=None,
        # no redirect from /path/ to /path: its Location would be built from the request's Host header
        redirect_slashes=False,
        dependencies=[Depends(problems.query_casing)],
    )
    app.state.surface, app.state.keys, app.state.close_client = Surface.of(pw), keys, close_client
    problems.install(app)
    failures.install(app)
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)
    tracing_http.install(app)  # a caller's traceparent: the runs it starts are in its trace
    for router in (health.router, runs.router, interrupts.router, links.router, ui.router, slack.router):
        app.include_router(router)
    app.include_router(session_http.router, dependencies=[Depends(caller)])  # the feature's routes, as the caller
    return app


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

