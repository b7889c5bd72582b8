"""Server-sent events: a run's events, a session's and the pause feed's, as frames, and the bounded
responses that stream them.

The frames are read through :class:`parkway.adapters.redis.store.live.LiveFeeds` (Redis's asyncio client:
an open stream holds no thread; embedded, the client's reads in the thread pool). Each open stream
reads on a connection of its own, opened with the stream and closed when it ends: streams are bounded
per key, per tenant and per process (:func:`open_stream`, ``parkway.http.limits``), so connections are
too, and a burst of streams leaves none behind when it is gone.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from fastapi import Request
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask

from ..adapters.redis.store.live import LiveFeeds, Pause, PauseWatch, ShardedPauseWatch, close
from ..client.sync import Parkway, ends_stream
from ..runtime.store import StoredEvent
from .auth import Key, shown_error
from .limits import Slots


def _frame(event_id: str, kind: str, data: Any) -> bytes:
    return f"id: {event_id}\nevent: {kind}\ndata: {json.dumps(data, default=str)}\n\n".encode()


async def _run_batch(pw: Parkway, feeds: LiveFeeds, client: Any, run_id: str, after: str) -> list[StoredEvent]:
    if client is None:
        return await anyio.to_thread.run_sync(pw.store.read_events, run_id, after, 1000, 100)
    return await feeds.read_events(client, run_id, after)


async def run_frames(
    pw: Parkway, feeds: LiveFeeds, run_id: str, after: str, *, with_tokens: bool = True,
    still: Callable[[], bool] | None = None, who: Key | None = None,
) -> AsyncIterator[bytes]:
    """A run's ``id``/``event``/``data`` frames until ``done``; a comment on every idle read keeps
    proxies from closing the connection. Interrupt events carry their resume token ``with_tokens``,
    and errors as ``who`` may see them (``shown_error``; None: whole). ``still()`` (in the thread
    pool) is asked after every read, before what it read is sent: the stream ends when it says False
    (the caller lost the run, or the id names another run now)."""
    client = feeds.connect(run_id)
    try:
        while True:
            batch = await _run_batch(pw, feeds, client, run_id, after)
            if still is not None and not await anyio.to_thread.run_sync(still):
                return
            if not batch:
                yield b": waiting\n\n"
                continue
            for stored in batch:
                after = stored.id
                event = pw.event(run_id, stored)
                data = event.data if with_tokens else {k: v for k, v in event.data.items() if k != "resumeToken"}
                if who is not None and "error" in data:
                    data = {**data, "error": shown_error(data["error"], who)}
                yield _frame(event.id, event.type, data)
                if ends_stream(event.type, "done"):
                    return
    finally:
        await close(client)


async def pause_frames(
    pw: Parkway, feeds: LiveFeeds, after: str, visible: Callable[[list[str]], set[str]],
    watch: PauseWatch | ShardedPauseWatch | None = None,
) -> AsyncIterator[bytes]:
    """The pause feed's entries as ``interrupt.paused`` frames, those of runs ``visible`` (asked in
    the thread pool for each batch) keeps and that still hold their id (an entry outlives its run,
    whose id can then be taken by another: it is told only of its own pauses); a comment on every
    idle read (``: waiting``) and after a read that reached the feed's end (``: caught up``).
    With shards, ``watch`` is what an idle stream waits on (``LiveFeeds.read_pauses``)."""
    client = None if feeds.sharded else feeds.connect()  # with shards: every feed, through the router

    def current(batch: list[Pause]) -> list[Pause]:
        held = pw.store.births(sorted({run_id for _, _, run_id, _ in batch}))
        shown = visible([run_id for _, _, run_id, _ in batch])
        return [e for e in batch if e[2] in shown and held.get(e[2]) == e[3]]

    try:
        while True:
            batch, after, ended = await feeds.read_pauses(client, after, watch)
            kept = await anyio.to_thread.run_sync(current, batch) if batch else []
            for entry_id, workflow, run_id, _ in kept:
                yield _frame(entry_id, "interrupt.paused", {"runId": run_id, "workflow": workflow})
            # a comment once the read is at the feed's end: nothing before it is left to send
            if not batch:
                yield b": waiting\n\n"
            elif ended:
                yield b": caught up\n\n"
    finally:
        await close(client)


async def session_frames(
    pw: Parkway, feeds: LiveFeeds, session_id: str, after: str, incarnation: str, still: Callable[[], bool]
) -> AsyncIterator[bytes]:
    """A session's events as SSE frames, of its ``incarnation`` only, while ``still()`` (asked in
    the thread pool after every read, before what it read is sent) says the caller still reaches
    that incarnation: the stream ends with the session, when its id is opened again, or at an
    event stamped with another incarnation (unsent)."""
    client = feeds.connect(session_id)
    try:
        while True:
            if client is None:
                batch = await anyio.to_thread.run_sync(pw.sessions.store.events, session_id, after, 1000, 100)
            else:
                batch = await feeds.read_session_events(client, session_id, after)
            if not await anyio.to_thread.run_sync(still):
                return
            if not batch:
                yield b": waiting\n\n"
                continue
            for stored in batch:
                if stored.data.get("incarnation") != incarnation:
                    return
                after = stored.id
                yield _frame(stored.id, stored.type, {"eventId": stored.id, "ts": stored.ts, **stored.data})
    finally:
        await close(client)


def open_stream(slots: Slots, request: Request, frames: AsyncIterator[bytes]) -> StreamingResponse:
    """The response that streams ``frames``, holding one of ``slots`` (the app's event streams: at most
    so many per API key, per tenant's kind of key and per process; 429 with Retry-After past any)
    until it ends; it sends a first byte at once."""
    key, share = getattr(request.state, "key", "-"), getattr(request.state, "share", None)
    slot = slots.slot(key, share)
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
