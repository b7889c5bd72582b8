"""What a route is given: the app's state (:class:`Surface`, on ``app.state.surface``), the
caller's listing and the bounded resources it takes, as FastAPI dependencies.

A route names what it needs (``Client``, ``House``, ``Listing``, ``Waiting``, with ``Who`` from
``parkway.http.auth``); nothing is reached through a closure over ``create_app``'s locals.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.responses import StreamingResponse
from prometheus_client import CollectorRegistry

from ..adapters.redis.store.live import LiveFeeds, PauseWatch, ShardedPauseWatch
from ..client.sync import Parkway
from ..runtime.clock import now_ms
from ..runtime.listing import ListingQuery, RunsQuery
from .auth import Who, own_tenant
from .limits import MAX_STREAMS, MAX_STREAMS_PER_KEY, MAX_STREAMS_PER_TENANT, MAX_WAITING_PER_KEY, Slots
from .metrics import ParkwayCollector, Refused
from .queries import LISTING, RUNS
from .streams import open_stream, session_frames


@dataclass
class Surface:
    """One app's state: its client, its live reads and pause watch, its bounded resources and its
    metrics."""

    pw: Parkway
    feeds: LiveFeeds
    watch: PauseWatch | ShardedPauseWatch | None
    waiting: Slots = field(default_factory=lambda: Slots("waiting listings", MAX_WAITING_PER_KEY))
    streams: Slots = field(default_factory=lambda: Slots("event streams", MAX_STREAMS_PER_KEY, MAX_STREAMS,
                                                         MAX_STREAMS_PER_TENANT))
    refused: Refused = field(default_factory=Refused)
    registry: CollectorRegistry = field(default_factory=lambda: CollectorRegistry(auto_describe=False))

    @classmethod
    def of(cls, pw: Parkway) -> Surface:
        feeds = LiveFeeds(pw.settings.redis_url, pw.settings.shards, pw.store)
        house = cls(pw, feeds, feeds.watch())
        # the app's own registry: the global one stays untouched
        house.registry.register(ParkwayCollector(lambda: pw.store.tallies(now_ms()), house.refused))
        return house

    def stream(self, request: Request, frames: AsyncIterator[bytes]) -> StreamingResponse:
        """A bounded event-stream response (``parkway.http.streams.open_stream``)."""
        return open_stream(self.streams, request, frames)

    def session_stream(
        self, request: Request, session_id: str, after: str, incarnation: str, still: Callable[[], bool]
    ) -> StreamingResponse:
        """A session's events of ``incarnation`` while ``still()``, as a bounded event stream."""
        return self.stream(request, session_frames(self.pw, self.feeds, session_id, after, incarnation, still))


def surface(request: Request) -> Surface:
    found: Surface = request.app.state.surface
    return found


def parkway(request: Request) -> Parkway:
    return surface(request).pw


House = Annotated[Surface, Depends(surface)]
Client = Annotated[Parkway, Depends(parkway)]


def listing(who: Who, asked: Annotated[dict[str, Any], Depends(LISTING)]) -> ListingQuery:
    """The interrupt listing the caller may ask for: a user's key reads no resume tokens (403), a key
    bound to a tenant lists its tenant's interrupts only (its runs', its sessions'); what else it may
    not see is filtered out before paging (``parkway.runtime.authority``)."""
    if asked["include_tokens"] and who.role == "user":
        raise HTTPException(403, "a user's key cannot read resume tokens (system and machine keys can)")
    tenant = own_tenant(who, asked["tenant"])
    if asked["status"] != "pending" and tenant == who.tenant:
        tenant = None  # ended ones list by workflow or run only: the caller filter keeps its tenant's
    return ListingQuery(**{**asked, "tenant": tenant})


Listing = Annotated[ListingQuery, Depends(listing)]


def runs_listing(asked: Annotated[dict[str, Any], Depends(RUNS)]) -> RunsQuery:
    return RunsQuery(**asked)


Runs = Annotated[RunsQuery, Depends(runs_listing)]


async def waiting_slot(request: Request, query: Listing, house: House) -> AsyncIterator[None]:
    """A waiting listing (``waitMs``) holds one of the key's waiting slots while it waits (429 past
    ``MAX_WAITING_PER_KEY``)."""
    if not query.wait_ms:
        yield
        return
    with house.waiting.slot(request.state.key):
        yield


Waiting = Depends(waiting_slot)
