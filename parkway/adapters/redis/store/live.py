"""Live reads on Redis's asyncio client: what an open event stream, the pause feed's stream and a
waiting listing read while they wait, holding no thread.

:class:`LiveFeeds` opens one connection of its own per stream or watch (under Sentinel, one that asks
the sentinels where the master is; with shards, on the shard of the run or session read), reads a
run's or a session's events through the same read plans ``RedisStore`` runs (``layout.Plan``), and
reads the pause feed, decoding its entries (``w`` workflow, ``r`` run id, ``c`` the run's creation).
:class:`PauseWatch` is one blocking read of the feed shared by every waiting listing of a process;
:class:`ShardedPauseWatch` one of each shard's feed. Embedded (no Redis URL) there is no asyncio
client: the reads run on the store's own client in the thread pool.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from contextlib import suppress
from functools import partial
from typing import Any

import anyio

from ....runtime.errors import ValidationError
from ....runtime.logger import get_logger
from ....runtime.protocol import check_event_id
from ....runtime.store import StoredEvent
from .. import keys, layout
from ..connection.errors import translated
from ..connection.sentinel import async_client, async_sentinels, is_sentinel_url

log = get_logger()
STREAM_BLOCK_MS = 4000
"""how long one read of an open event stream waits for news (its client waits 10 s more for the reply);
an idle stream then gets a keep-alive comment"""
READ_COUNT = 100
"""entries one read returns at most"""

Pause = tuple[str, str, str, str]
"""a pause feed entry: (its position, the workflow, the run id, the run's creation)"""


class LiveFeeds:
    """The asyncio reads of one deployment: its Redis at ``redis_url`` (None: embedded) or its
    ``shards``, beside its ``store`` (a ``RedisStore``, or with shards their router)."""

    def __init__(self, redis_url: str | None, shards: tuple[str, ...] | None, store: Any) -> None:
        self.store = store
        sharded = shards is not None and len(shards) > 1
        self.urls: tuple[str, ...] = ()
        """the Redis servers: one, or with shards each shard's in order; none when embedded"""
        if redis_url is not None:
            self.urls = tuple(shards or ()) if sharded else (redis_url,)
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

        if url is None:
            url = self.urls[self.store.shard_of(key)] if key is not None and self.sharded else self.urls[0]
        # a read blocks up to STREAM_BLOCK_MS, and on a busy host its reply may come later still
        bounds: dict[str, Any] = {"socket_timeout": STREAM_BLOCK_MS / 1000 + 10, "socket_connect_timeout": 5,
                                  "max_connections": 2}
        if is_sentinel_url(url):
            if url not in self.sentinels:
                self.sentinels[url] = async_sentinels(url)
            return async_client(url, self.sentinels[url], **bounds)
        return aioredis.Redis.from_url(url, **bounds)

    def watch(self) -> PauseWatch | ShardedPauseWatch | None:
        """The process's one watch of the pause feed (with shards, of each shard's); None embedded."""
        if self.sharded:
            return ShardedPauseWatch([PauseWatch(partial(self.connect, url=u)) for u in self.urls],
                                     self.store.shard_of)
        return PauseWatch(self.connect) if self.urls else None

    async def read_events(self, client: Any, run_id: str, after: str) -> list[StoredEvent]:
        """A run's events after ``after``, waiting up to STREAM_BLOCK_MS for one."""
        events: list[StoredEvent] = await run_plan(client, layout.read_events(run_id, after, STREAM_BLOCK_MS,
                                                                              READ_COUNT))
        return events

    async def read_session_events(self, client: Any, session_id: str, after: str) -> list[StoredEvent]:
        """A session's events after ``after``, waiting up to STREAM_BLOCK_MS for one."""
        plan = layout.read_session_events(session_id, after, STREAM_BLOCK_MS, READ_COUNT)
        events: list[StoredEvent] = await run_plan(client, plan)
        return events

    def check_position(self, value: str) -> str:
        """A position in the pause feed: an event id; with shards, also one per shard, comma-separated
        (the ids a sharded stream sends)."""
        shards = len(getattr(self.store, "stores", ()))
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
        if self.sharded:
            return str(self.store.pause_position())
        with translated():  # Redis away: StoreUnavailable, before the stream opens
            last = self.store.client.xrevrange(keys.pauses(), "+", "-", count=1)
        return _text(last[0][0]) if last else "0-0"

    async def read_pauses(
        self, client: Any, after: str, watch: PauseWatch | ShardedPauseWatch | None = None
    ) -> tuple[list[Pause], str, bool]:
        """The pause feed's entries after ``after``, the position to read on from, and whether the
        read reached the feed's end; waits up to STREAM_BLOCK_MS. With shards, every shard's feed,
        read through the router in the thread pool without blocking (an entry's id is then the
        position just past it: one entry id per shard), and while they hold nothing new the read
        waits on ``watch`` (the process's one watch of each feed), holding no thread."""
        store = self.store
        if self.sharded:
            entries, position, ended = await anyio.to_thread.run_sync(lambda: store.read_pauses(after, 0, READ_COUNT))
            if not entries and watch is not None and await watch.wait_past(position, STREAM_BLOCK_MS / 1000):
                entries, position, ended = await anyio.to_thread.run_sync(
                    lambda: store.read_pauses(after, 0, READ_COUNT))
            return [(at, f.get("w", ""), f.get("r", ""), f.get("c", "")) for at, f in entries], position, ended
        if client is not None:
            reply = await client.xread({keys.pauses(): after}, count=READ_COUNT, block=STREAM_BLOCK_MS)
        else:
            reply = await anyio.to_thread.run_sync(
                lambda: store.client.xread({keys.pauses(): after}, count=READ_COUNT, block=1000))
        out = []
        for entry_id, fields in (reply[0][1] if reply else []):
            f = {_text(k): _text(v) for k, v in fields.items()}
            out.append((_text(entry_id), f.get("w", ""), f.get("r", ""), f.get("c", "")))
        return out, out[-1][0] if out else after, len(out) < READ_COUNT


async def run_plan(client: Any, plan: Any) -> Any:
    """What a read plan (``layout.Plan``) returns, each of its round trips sent as one pipeline on
    the asyncio ``client`` (``RedisStore`` runs the same plans on its own)."""
    try:
        commands = next(plan)
        while True:
            pipe = client.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command)
            commands = plan.send(await pipe.execute())
    except StopIteration as done:
        return done.value


async def close(client: Any) -> None:
    """Close a stream's own client, even while the stream is being cancelled (a client that left)."""
    if client is not None:
        with anyio.CancelScope(shield=True):
            await client.aclose()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _feed_id(entry: str) -> tuple[int, int]:
    ms, _, seq = entry.partition("-")
    return int(ms), int(seq or 0)


class PauseWatch:
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
        the listing is confined to, which only :class:`ShardedPauseWatch` needs)."""
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
        self.seen = max(self.seen, _feed_id(after))  # ``after`` was the feed's newest entry
        self.start, self.dropped = self.seen, (0, 0)
        self.log.clear()
        after = f"{self.seen[0]}-{self.seen[1]}"
        client = self.connect()  # its own connection, closed when no listing waits any more
        try:
            while self.waiting:
                try:
                    reply = await client.xread({keys.pauses(): after}, count=READ_COUNT, block=STREAM_BLOCK_MS)
                except Exception as exc:  # noqa: BLE001 - Redis away: waiters time out; a later wait reads again
                    log.warning("pause_watch_failed", error=type(exc).__name__)
                    await anyio.sleep(1)
                    continue
                if reply:
                    for entry, fields in reply[0][1]:
                        if len(self.log) == self.LOG:
                            self.dropped = self.log[0][0]
                        self.log.append((_feed_id(_text(entry)), fields))
                    after = _text(reply[0][1][-1][0])
                    self.seen = max(self.seen, _feed_id(after))
                    self.news.set()
                    self.news = asyncio.Event()
        finally:
            self.task = None  # (no await since the loop ended) a listing that waits from now on starts a new read
            await close(client)

    async def close(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
            with suppress(asyncio.CancelledError):
                await self.task


class ShardedPauseWatch:
    """With shards: a :class:`PauseWatch` of each shard's feed. A listing's feed position is one
    entry id per shard (comma-separated, as the router lists), and a pause past it on any shard
    ends its wait; a listing of one run (``runId``) or one session (``session``: its runs share its
    shard) has that shard's position and waits there."""

    def __init__(self, watches: list[PauseWatch], shard_of: Callable[[str], int]) -> None:
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
