"""Past one Redis core: runs placed on several independent Redis servers (shards) by their run id.

``PARKWAY_SHARDS=<url or redis+sentinel:// spec>,...`` names the shards, in order. A run's keys all
carry its hash tag (``keys.hash_tag``: its id up to the first ``--``), so a run, its child tree and a
session with its branch runs share one tag; the tag's CRC-32 picks one of :data:`BUCKETS` virtual
buckets, and a fixed bucket -> shard table (:func:`default_table`: contiguous ranges) picks the
shard. Each shard stores the table it belongs to (``keys.shard_table``: its index, the number of
shards and the table's digest) and every process checks it at connect, as the token key's
fingerprint is checked: a process with another list of shards (one added, removed or reordered) is
refused instead of reading or writing runs where they are not. Adding a shard is a migration of
buckets, not a change of the variable.

:class:`ShardedStore` implements the store protocol over one ``RedisStore`` per shard: per-run calls
go to the run's shard; listings of interrupts (pending, every filter, and ended ones) merge the
shards' pages: the pending listing in two phases (index members from every shard, then only the
page's records from their shards), so one page costs about what one Redis costs; the one cursor is
an index member's position, and members sort the same way on every shard (times, then run id), so
pages follow one another without gaps or repeats. A listing that waits watches every shard's pause
feed (its position is one id per shard); one of a run or of a session reads and watches its shard
alone. One shard down costs its runs only: a listing across shards (of interrupts, of runs, the
pause feeds) waits at most :data:`SHARD_ANSWER_S` for each shard and leaves out, and names
(``missing``), one that has not answered (:class:`_Health` keeps one call at a time on a shard that
failed); a process that starts with a shard down builds that shard's store at the first call that
reaches it (:class:`DeferredShard`). Counters are summed. The reconciler and the workers are
per shard (``parkway worker --shard K``): each serves the runs of its shard alone.

Sessions are placed as runs are, by their id (``sessions.store.session_store``: one session store
per shard); a session's branch runs share its hash tag. The store-wide run index listing is merged
naively (each shard's page, then cut).
"""

from __future__ import annotations

import inspect
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

from ....runtime.errors import ConfigError, StoreUnavailable, ValidationError
from ....runtime.store import (
    ForkOutcome,
    InterruptListing,
    InterruptQuery,
    InterruptRecord,
    NewRun,
    RunIndexPage,
    RunIndexQuery,
    RunRecord,
    Store,
    Tallies,
)
from ... import codec
from .. import keys, layout
from .errors import translated

T = TypeVar("T")

SHARD_ANSWER_S = 0.5
"""how long a listing across shards waits for the shards' answers: a shard that has not answered
by then (down, unreachable, frozen) is left out of the page and named in it (``missing``)"""

BUCKETS = 1024
"""virtual buckets a run's hash tag is hashed into; fixed: the bucket -> shard table maps them"""


def bucket_of(run_id: str) -> int:
    """The virtual bucket of a run (or session) id: its hash tag's CRC-32, modulo :data:`BUCKETS`."""
    return zlib.crc32(keys.hash_tag(run_id).encode()) % BUCKETS


def default_table(shards: int) -> tuple[int, ...]:
    """The bucket -> shard table for ``shards`` shards: contiguous, equal ranges of buckets."""
    if not 1 <= shards <= BUCKETS:
        raise ConfigError(f"PARKWAY_SHARDS names 1 to {BUCKETS} shards, not {shards}")
    return tuple(b * shards // BUCKETS for b in range(BUCKETS))


def split_shards(text: str) -> tuple[str, ...]:
    """``PARKWAY_SHARDS``: URLs separated by commas (a ``redis+sentinel://`` spec's own commas, between
    its sentinels, stay inside it: a new shard starts only where a scheme does)."""
    import re

    parts = [p.strip() for p in re.split(r",(?=\s*(?:redis|rediss|unix|redis\+sentinel)://)", text) if p.strip()]
    if not parts:
        raise ConfigError("PARKWAY_SHARDS names no shard")
    return tuple(parts)


class ShardedStore:
    """The store protocol over one store per shard (see the module)."""

    def __init__(self, stores: Sequence[Any], table: Sequence[int] | None = None) -> None:
        self.stores = list(stores)
        self.table = tuple(table) if table is not None else default_table(len(self.stores))
        self.limits = self.stores[0].limits
        self._pool = ThreadPoolExecutor(max_workers=max(2, 2 * len(self.stores)), thread_name_prefix="pw-shards")
        self._lock = threading.Lock()
        self._feeds = _PauseFeeds(self.stores)
        self._health = _Health(len(self.stores))

    # --- placement -------------------------------------------------------------------

    def shard_of(self, run_id: str) -> int:
        return self.table[bucket_of(run_id)]

    def store_of(self, run_id: str) -> Any:
        return self.stores[self.shard_of(run_id)]

    def colocated(self, run_id: str, candidate: str) -> bool:
        """Whether ``candidate``'s records would live in ``run_id``'s bucket (a fork's new id)."""
        return bucket_of(candidate) == bucket_of(run_id)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        for s in self.stores:
            with translated():
                (s.raw_client if isinstance(s, DeferredShard) else s.client).close()

    def _all(self, call: Callable[[Any], Any]) -> list[Any]:
        """``call(store)`` on every shard at once; the replies in shard order."""
        return list(self._pool.map(call, self.stores))

    # --- per run: Store's methods that name a run go to its shard (see _ROUTED, set below the class) ---

    def fork(self, new: NewRun, step: int) -> ForkOutcome:
        old = new.forked_from[0] if new.forked_from else new.run_id
        if self.shard_of(old) != self.shard_of(new.run_id):
            raise ValidationError(f"run {new.run_id} would live on another shard than {old}: a fork's id must be "
                                  "in its run's bucket (leave new_run_id out and parkway mints one)", run_id=old)
        result: ForkOutcome = self.store_of(old).fork(new, step)
        return result

    def _by_shard(self, run_ids: Sequence[str]) -> dict[int, list[str]]:
        out: dict[int, list[str]] = {}
        for r in run_ids:
            out.setdefault(self.shard_of(r), []).append(r)
        return out

    # --- every shard ---------------------------------------------------------------------

    def ping(self) -> None:
        self._all(lambda s: s.ping())

    def tallies(self, now: int) -> Tallies:
        each: list[Tallies] = self._all(lambda s: s.tallies(now))
        counters: dict[str, int] = {}
        pending: dict[str, int] = {}
        for t in each:
            for k, v in t.counters.items():
                counters[k] = counters.get(k, 0) + v
            for k, v in t.pending.items():
                pending[k] = pending.get(k, 0) + v
        oldest = [t.oldest_outstanding_at for t in each if t.oldest_outstanding_at is not None]
        return Tallies(
            counters, each[0].wait_buckets, pending, running=sum(t.running for t in each),
            outstanding=sum(t.outstanding for t in each), oldest_outstanding_at=min(oldest) if oldest else None,
            overdue=sum(t.overdue for t in each), overdue_ms=max(t.overdue_ms for t in each),
            node_buckets=each[0].node_buckets, notices=sum(t.notices for t in each),
            notices_dead=sum(t.notices_dead for t in each),
        )

    def list_runs(self, query: RunIndexQuery) -> RunIndexPage:
        """Every shard's page, merged newest first and cut (naive: each shard reads a whole page); a
        shard that does not answer in time is left out and named (``missing``)."""
        answered, missing = self._answers(lambda i: self.stores[i].list_runs(query))
        pages: list[RunIndexPage] = list(answered.values())
        def position(r: RunRecord) -> bytes:
            return codec.run_member(r.created_at, r.run_id)

        stops = [codec.parse_run_cursor(p.next_cursor) for p in pages if p.next_cursor]
        page, last = _cut(sorted((r for p in pages for r in p.items), key=position, reverse=True), position,
                          stops, query.limit, newest=True)
        return RunIndexPage(page, codec.make_run_cursor(last) if last is not None else None, tuple(missing))

    # --- listings --------------------------------------------------------------------------

    def list_interrupts(self, query: InterruptQuery) -> InterruptListing:
        one = query.run_id if query.run_id is not None else query.session  # a session's runs share its shard
        if one is not None:
            result: InterruptListing = self.store_of(one).list_interrupts(query)
            return result
        positions = self._positions(query.wait_after)
        if query.wait_after is not None:
            # a pause of another tenant or workflow than the listing's does not wake it
            narrowed = query.tenant is not None or query.workflow is not None
            wakes = partial(layout.pause_wakes, tenant=query.tenant, workflow=query.workflow) if narrowed else None
            self._wait_for_a_pause(positions, query.wait_ms, wakes)
            query = replace(query, wait_after=None, watch=True)
        if query.status == "pending" and not query.filtered:
            return self._pending(query)
        return self._merged(query)

    def _positions(self, feed: str | None) -> list[str]:
        """One position per shard ('' for a shard a listing did not reach: not watched)."""
        parts = (feed or "").split(",")
        return parts if len(parts) == len(self.stores) else ["0-0"] * len(self.stores)

    def _answers(self, call: Callable[[int], T], shards: Sequence[int] | None = None) -> tuple[dict[int, T], list[int]]:
        """``call(i)`` on each shard ``i`` of ``shards`` (every one by default) at once: the answers
        by shard, and the shards that did not answer within ``SHARD_ANSWER_S`` (StoreUnavailable, or
        still waiting) or that are known to be down with a call on them still out (``_Health``: one
        at a time asks a shard that went down, and the first answer brings it back). Any other
        error is raised; so is StoreUnavailable when no shard answered."""
        asked = list(range(len(self.stores))) if shards is None else list(shards)
        futures: dict[int, Future[T]] = {}
        for i in asked:
            if self._health.may_ask(i):
                futures[i] = in_thread(call, i)
                futures[i].add_done_callback(partial(self._health.answered, i))
        if futures:
            wait(futures.values(), timeout=SHARD_ANSWER_S)
        answers: dict[int, T] = {}
        missing: list[int] = []
        failure: BaseException | None = None
        for i in asked:
            if i not in futures:
                missing.append(i)
                continue
            future = futures[i]
            if not future.done():
                self._health.late(i, future)
                missing.append(i)
                continue
            error = future.exception()
            if error is None:
                answers[i] = future.result()
            elif isinstance(error, StoreUnavailable):
                missing.append(i)
                failure = error
            else:
                raise error
        if asked and not answers:
            raise failure or StoreUnavailable(f"no shard answered within {SHARD_ANSWER_S} s (shards {missing})")
        return answers, missing

    def _wait_for_a_pause(self, positions: list[str], wait_ms: int, wakes: Callable[[Any], bool] | None = None) -> None:
        """Block until a pause after ``positions`` on any shard's feed (one ``wakes`` keeps, if
        given), or ``wait_ms`` (one shared read of each shard's feed for every waiter of this
        process: :class:`_PauseFeeds`)."""
        self._feeds.wait(positions, wait_ms, wakes)

    # --- the pause feeds, as one (``GET /v1/interrupts/events``) ------------------------------

    def pause_position(self) -> str:
        """Every shard's pause feed's newest entry id now ("0-0" for an empty one), comma-separated
        in shard order: the position of a stream that sends the pauses made after this call. A
        shard that does not answer in time (``_answers``) is placed at this moment's time (a feed's
        entry ids are its times in ms): its pauses from now on are sent once it is back."""
        def last(i: int) -> str:
            with translated():
                newest = self.stores[i].client.xrevrange(keys.pauses(), "+", "-", count=1)
            return _text(newest[0][0]) if newest else "0-0"

        lasts, _ = self._answers(last)
        now = f"{int(time.time() * 1000)}-0"
        return ",".join(lasts.get(i, now) for i in range(len(self.stores)))

    def read_pauses(self, after: str, block_ms: int, count: int) -> tuple[list[tuple[str, dict[str, str]]], str, bool]:
        """The pause feeds' entries past ``after`` (one entry id per shard, comma-separated, or one
        id for every shard), up to ``count`` of each shard's, waiting up to ``block_ms`` for one
        when there is none: a list of (the position just past the entry, its fields) in entry id
        order, the position past them all, and whether every feed was read to its end. Each
        position names every shard's place, so a stream picked up at any of them (``Last-Event-ID``)
        sends each shard's later pauses once. A shard that does not answer in time keeps its place
        (its pauses are sent once it is back)."""
        positions = self._feed_positions(after)

        def read(i: int) -> list[Any]:
            with translated():
                reply = self.stores[i].client.xread({keys.pauses(): positions[i]}, count=count)
            return list(reply[0][1]) if reply else []

        def read_all() -> list[list[Any]]:
            answered, _ = self._answers(read)
            return [answered.get(i, []) for i in range(len(self.stores))]

        replies = read_all()
        if block_ms and not any(replies):
            self._wait_for_a_pause(positions, block_ms)
            replies = read_all()
        merged = sorted((_entry_order(_text(eid)), i, _text(eid), fields)
                        for i, reply in enumerate(replies) for eid, fields in reply)
        out = []
        for _, i, eid, fields in merged:
            positions[i] = eid
            out.append((",".join(positions), {_text(k): _text(v) for k, v in fields.items()}))
        return out, ",".join(positions), all(len(reply) < count for reply in replies)

    def _feed_positions(self, after: str) -> list[str]:
        parts = after.split(",")
        if len(parts) == 1:
            return parts * len(self.stores)
        if len(parts) != len(self.stores):
            raise ValidationError(f"a position in the pause feeds of {len(self.stores)} shards is one event id, or "
                                  f"{len(self.stores)} of them separated by commas (one per shard), not {after!r}")
        return parts

    def _pending(self, query: InterruptQuery) -> InterruptListing:
        """Two phases: each shard's index members after the cursor (no records), merged in the
        order's member order; then the page's records, each from its shard, in one round trip per
        shard. The cursor is the last member's position, valid on every shard. A shard that does
        not answer either phase in time is left out and named (``missing``)."""
        after = codec.parse_cursor(query.cursor, query.order)
        newest = query.order == "newest"

        def page(i: int) -> tuple[list[tuple[str, bytes]], str | None]:
            with translated():
                found: tuple[list[tuple[str, bytes]], str | None] = self.stores[i]._page(query, after)
            return found

        pages, missing = self._answers(page)
        merged = sorted(((m, wf, i) for i, (members, _) in pages.items() for wf, m in members), reverse=newest)
        want = merged[: query.limit]
        entries = [(i, codec.parse_member(m, query.order, wf)) for m, wf, i in want]

        def records(i: int) -> dict[str, InterruptRecord | None]:
            mine = [e for j, e in entries if j == i]
            store = self.stores[i]
            with translated():
                pipe = store.client.pipeline(transaction=False)
                for e in mine:
                    pipe.hgetall(keys.run(e.run_id))
                    pipe.hgetall(keys.summary(e.run_id))
                replies = pipe.execute()
            pairs = zip(mine, replies[::2], replies[1::2], strict=True)
            return {e.run_id: layout.pending_in(e.run_id, e.expires_at, f, s, query.now) for e, f, s in pairs}

        found: dict[str, InterruptRecord | None] = {}
        if entries:
            parts, lost = self._answers(records, sorted({i for i, _ in entries}))
            missing = sorted({*missing, *lost})
            for part in parts.values():
                found.update(part)
        items = [r for _, e in entries if (r := found.get(e.run_id)) is not None]
        more = len(merged) > query.limit
        cursor = codec.make_cursor(want[-1][0], query.order) if more and want else None
        feed = self._feed_of({i: f for i, (_, f) in pages.items()}) if query.watch else None
        read = sum(len(members) for members, _ in pages.values())
        return InterruptListing(items, cursor, feed, read=read, missing=tuple(missing))

    def _feed_of(self, positions: Mapping[int, str | None]) -> str:
        """A listing's position in the shards' pause feeds: each shard's that answered, '' for one
        that did not (a wait does not watch it)."""
        return ",".join((positions[i] or "0-0") if i in positions else "" for i in range(len(self.stores)))

    def _merged(self, query: InterruptQuery) -> InterruptListing:
        """Filtered and ended listings: each shard's page (records read on each), merged by the
        listing's member order and cut; the cursor is the last item's member. A shard that does not
        answer in time is left out and named (``missing``)."""
        answered, missing = self._answers(lambda i: self.stores[i].list_interrupts(query))
        pages: list[InterruptListing] = list(answered.values())
        closed = query.status != "pending"
        newest = closed or query.order == "newest"

        def position(r: InterruptRecord) -> bytes:
            if closed:
                ended = r.lifecycle.ended_at if r.lifecycle and r.lifecycle.ended_at else 0
                return codec.closed_member(ended, r.run_id, r.request_id)
            return codec.member(codec.entry_of(r), query.order)

        def stop(cursor: str) -> bytes | None:
            if closed:
                return codec.parse_closed_cursor(cursor, query.status)
            return codec.parse_cursor(cursor, query.order)

        stops = [stop(p.next_cursor) for p in pages if p.next_cursor]
        page, last = _cut(sorted((r for p in pages for r in p.items), key=position, reverse=newest), position,
                          stops, query.limit, newest=newest)
        cursor = None
        if last is not None:
            cursor = codec.make_closed_cursor(last, query.status) if closed else codec.make_cursor(last, query.order)
        feed = self._feed_of({i: p.feed for i, p in answered.items()}) if query.watch else None
        return InterruptListing(page, cursor, feed, read=sum(p.read for p in pages), missing=tuple(missing))


_RUN_ARGUMENTS = ("run_id", "run", "entry")
"""the names of the argument a Store method's run is found by: its id, or an object carrying it"""

_ROUTED = ("create_run", "fork_point", "begin", "write_entry", "advance", "park", "spawn", "fan_out", "runs_below",
           "finish", "release", "lookup", "resume", "recover", "redispatch", "expire", "get_run", "read_activation",
           "gate_steps", "get_interrupt", "read_interrupt", "close_raced", "refuse", "read_events")
"""Store's methods about one run: each runs on that run's shard (:func:`_on_the_runs_shard`)"""

_SPREAD = ("heartbeat", "authorities", "births")
"""Store's methods about several runs (``run_ids``): each shard is asked about its own, the answers
joined (:func:`_on_each_runs_shard`)"""

_PER_SHARD = {"due": "due", "overdue": "overdue", "claim_due": "claim_due", "release_claims": "release_claims",
              "extend_overdue": "extend_overdue", "try_lock": "the reconciler's lock", "prune_runs": "prune_runs",
              "prune_idle": "prune_idle", "reclaim_folded": "reclaim_folded"}
"""Store's housekeeping, which runs per shard (a worker and its reconciler serve one shard each):
refused over several, naming what was asked"""


def _on_the_runs_shard(name: str) -> Callable[..., Any]:
    """``Store.<name>`` on the shard of the run its arguments name: the first of :data:`_RUN_ARGUMENTS`
    in the protocol's signature (a run id, or the ``run_id`` of the object passed there)."""
    params = list(inspect.signature(getattr(Store, name)).parameters)[1:]
    arg = next(p for p in params if p in _RUN_ARGUMENTS)
    at = params.index(arg)

    def routed(self: ShardedStore, *args: Any, **kwargs: Any) -> Any:
        value = kwargs[arg] if arg in kwargs else args[at]
        run_id = value if arg == "run_id" else value.run_id
        return getattr(self.store_of(run_id), name)(*args, **kwargs)

    routed.__name__ = routed.__qualname__ = name
    routed.__doc__ = f"``Store.{name}`` on the shard of the run named by its ``{arg}``."
    return routed


def _on_each_runs_shard(name: str) -> Callable[..., Any]:
    """``Store.<name>(run_ids, ...)`` with each shard asked about its runs; mappings answered are joined."""

    def spread(self: ShardedStore, run_ids: Sequence[str], *args: Any) -> Any:
        answers = [getattr(self.stores[shard], name)(ids, *args) for shard, ids in self._by_shard(run_ids).items()]
        if name == "heartbeat":
            return None
        return {k: v for answer in answers for k, v in answer.items()}

    spread.__name__ = spread.__qualname__ = name
    spread.__doc__ = f"``Store.{name}`` asked of each shard about its own runs, the answers joined."
    return spread


def _refused_per_shard(name: str, what: str) -> Callable[..., Any]:
    def per_shard(self: ShardedStore, *args: Any, **kwargs: Any) -> Any:
        raise ConfigError(f"{what} runs per shard: a worker (parkway worker --shard K) and its reconciler serve "
                          "one shard each")

    per_shard.__name__ = per_shard.__qualname__ = name
    per_shard.__doc__ = f"``Store.{name}`` is per shard: refused over several (a ConfigError)."
    return per_shard


for _name in _ROUTED:
    setattr(ShardedStore, _name, _on_the_runs_shard(_name))
for _name in _SPREAD:
    setattr(ShardedStore, _name, _on_each_runs_shard(_name))
for _name, _what in _PER_SHARD.items():
    setattr(ShardedStore, _name, _refused_per_shard(_name, _what))
_UNROUTED = {n for n in dir(Store) if not n.startswith("_")} - set(dir(ShardedStore))
if _UNROUTED:  # a method added to Store is routed by a rule above, or written in the class
    raise TypeError(f"ShardedStore does not route Store's {sorted(_UNROUTED)}")


def _cut(
    items: list[Any], position: Callable[[Any], bytes], stops: Sequence[bytes | None], limit: int, *, newest: bool
) -> tuple[list[Any], bytes | None]:
    """A merged page of the shards' pages (``items``, in the listing's order) and the position its
    cursor names (None: the listing ends). A shard whose page goes on (its cursor at ``stops``) has
    read nothing past its cursor, so the page keeps no item past the nearest such stop (another
    shard's items there come again on the next page) and its cursor never passes it: a shard's page
    cut short (a filter, a scan bound, a record gone) skips none of its runs."""
    known = [s for s in stops if s is not None]
    bound = (max(known) if newest else min(known)) if known else None
    kept = items if bound is None else [i for i in items if (position(i) >= bound if newest else position(i) <= bound)]
    if len(kept) > limit:
        return kept[:limit], position(kept[limit - 1])
    return kept, bound


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _entry_order(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


class _PauseFeeds:
    """The pause feeds of the shards, watched for every waiting listing of this process at once: one
    thread per shard blocks on its feed (``XREAD BLOCK``, one pooled connection) while any listing
    waits, and wakes them all when it reads an entry; a listing waits until some shard's feed holds
    an entry past its position there. (A thread and a blocking read per waiting listing and shard
    held that many connections of the pools every call of the process draws from.)"""

    READ_MS = 1000
    """one blocking read's bound: a reader ends at most this long after its last waiter"""
    LOG = 1000
    """the entries of each feed read last that a waiting listing looks for a pause it could list in"""

    def __init__(self, stores: Sequence[Any]) -> None:
        self.stores = stores
        self.cond = threading.Condition()
        self.seen = [(0, 0)] * len(stores)
        """per shard: an entry at or past this id is known to exist"""
        self.at = ["0-0"] * len(stores)
        """per shard: where its reader reads on from"""
        self.reading = [False] * len(stores)
        self.waiters = 0
        self.failed = [False] * len(stores)
        """per shard: its reader's last read failed (it reads again after ``READ_MS``)"""
        self.failure: BaseException | None = None
        self.log: list[deque[tuple[tuple[int, int], Any]]] = [deque(maxlen=self.LOG) for _ in stores]
        """per shard: the entries read last (id, fields), what a waiting listing could list is looked for in"""
        self.start = [(0, 0)] * len(stores)
        """per shard: its log holds every entry past this id that its reader read (but the dropped ones)"""
        self.dropped = [(0, 0)] * len(stores)
        """per shard: the newest entry its log dropped"""

    def wait(self, positions: Sequence[str], wait_ms: int, wakes: Callable[[Any], bool] | None = None) -> None:
        """Return once a shard's feed holds an entry past ``positions`` (each a feed entry id read
        from that shard, "0-0" for an empty feed; '' for a shard not watched) that ``wakes`` keeps
        (if given: a pause the listing could list), or after ``wait_ms``; raise what a reader met
        when every shard watched is away."""
        watched = [i for i, p in enumerate(positions) if p]  # '' : a shard the listing did not reach
        mine = [_entry_order(p) if p else (1 << 62, 0) for p in positions]
        deadline = time.monotonic() + wait_ms / 1000
        with self.cond:
            self.waiters += 1
            try:
                for i in watched:
                    position = positions[i]
                    if not self.reading[i]:
                        self.reading[i], self.at[i] = True, position
                        self.start[i], self.dropped[i] = mine[i], (0, 0)
                        self.log[i].clear()
                        threading.Thread(target=self._read, args=(i,), daemon=True, name=f"pw-shard-feed-{i}").start()
                    elif mine[i] < _entry_order(self.at[i]) and not self.seen[i] > mine[i]:
                        # its reader is past this position, with nothing seen past it yet: it reads
                        # again from here after its current read (a position is a caller's: the
                        # pause feed's ``after``, which may name no entry; seen is only ever what
                        # a reader read, so no position makes the others wake for nothing)
                        self.at[i] = position
                        self.start[i] = min(self.start[i], mine[i])
                while not any(self._woken(i, mine[i], wakes) for i in watched):
                    if self.failure is not None and watched and all(self.failed[i] for i in watched):
                        raise self.failure  # every shard it watches is away: as on one Redis
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return
                    self.cond.wait(left)
            finally:
                self.waiters -= 1

    def _woken(self, i: int, mine: tuple[int, int], wakes: Callable[[Any], bool] | None) -> bool:
        """Whether shard ``i``'s feed holds an entry past ``mine`` that ``wakes`` keeps (held by the lock)."""
        if not self.seen[i] > mine:
            return False
        if wakes is None or mine < self.start[i] or self.dropped[i] > mine:
            return True  # (entries it may not have read: wake, as for any pause)
        return any(at > mine and wakes(fields) for at, fields in self.log[i])

    def _read(self, i: int) -> None:
        """Shard ``i``'s reader: reads on from ``at[i]`` while anyone waits, each entry read noted."""
        while True:
            with self.cond:
                if not self.waiters:
                    self.reading[i] = False
                    return
                at = self.at[i]
            try:
                with translated():
                    reply = self.stores[i].client.xread({keys.pauses(): at}, count=100, block=self.READ_MS)
            except StoreUnavailable as exc:  # a shard away: the waiters wait on the others' feeds
                with self.cond:
                    self.failed[i], self.failure = True, exc
                    self.cond.notify_all()
                time.sleep(self.READ_MS / 1000)
                continue
            except BaseException as exc:  # noqa: BLE001 - handed to the waiters
                with self.cond:
                    self.failed[i], self.failure, self.reading[i] = True, exc, False
                    self.cond.notify_all()
                return
            with self.cond:
                self.failed[i] = False
            entries = reply[0][1] if reply else []
            if entries:
                last = _text(entries[-1][0])
                with self.cond:
                    for entry, fields in entries:
                        if len(self.log[i]) == self.LOG:
                            self.dropped[i] = self.log[i][0][0]
                        self.log[i].append((_entry_order(_text(entry)), fields))
                    self.at[i] = last
                    self.seen[i] = max(self.seen[i], _entry_order(last))
                    self.cond.notify_all()


def in_thread(call: Callable[[int], T], i: int) -> Future[T]:
    """``call(i)`` on a daemon thread of its own: a call stuck on a shard that went down (up to the
    connection's ~10 s of retries) holds no pool thread and never delays the process's exit."""
    future: Future[T] = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(call(i))
        except BaseException as exc:  # noqa: BLE001 - handed to the listing through the future
            future.set_exception(exc)

    threading.Thread(target=run, daemon=True, name=f"pw-shard-call-{i}").start()
    return future


class DeferredShard:
    """A shard that did not answer while the process started (``backend``): its store and dispatcher
    are built, after the checks a process makes of every shard at connect (its shard table, the
    token key's fingerprint), by the first call that reaches it. Until then a call on it raises
    what building raises (StoreUnavailable while it is down; at once while another call is
    building it), so a listing across shards leaves it out and names it."""

    def __init__(self, index: int, client: Any, limits: Any, build: Callable[[], tuple[Any, Any]]) -> None:
        self.index, self.raw_client, self.limits = index, client, limits
        self._build = build
        self._lock = threading.Lock()
        self._built: tuple[Any, Any] | None = None

    def built(self) -> tuple[Any, Any]:
        """The shard's store and dispatcher, built now if they were not."""
        if self._built is None:
            if not self._lock.acquire(blocking=False):
                raise StoreUnavailable(f"shard {self.index} has not answered since this process started")
            try:
                if self._built is None:
                    self._built = self._build()
            finally:
                self._lock.release()
        return self._built

    def __getattr__(self, name: str) -> Any:
        return getattr(self.built()[0], name)

    def dispatcher_view(self) -> Any:
        """The shard's dispatcher, as ``ShardedDispatcher`` calls it (built as the store is)."""
        return _DeferredDispatcher(self)


class _DeferredDispatcher:
    def __init__(self, shard: DeferredShard) -> None:
        self.shard = shard

    def __getattr__(self, name: str) -> Any:
        return getattr(self.shard.built()[1], name)


class _Health:
    """Which shards failed to answer a listing in time. A listing asks every other shard; a shard
    that failed is asked by one call at a time (the others leave it out at once), so a shard that
    went down holds one of the pool's threads, not one per listing, and its first answer brings
    it back into every listing."""

    def __init__(self, shards: int) -> None:
        self.lock = threading.Lock()
        self.down = [False] * shards
        self.asking = [False] * shards

    def may_ask(self, i: int) -> bool:
        with self.lock:
            if not self.down[i]:
                return True
            if self.asking[i]:
                return False
            self.asking[i] = True
            return True

    def late(self, i: int, future: Future[Any]) -> None:
        """A call on shard ``i`` is still out past a listing's bound: the shard counts as down, and
        that call is the one asking it, until it ends (``answered``: a future runs its callbacks
        after it is done, so one not done under the lock has its callback still to come)."""
        with self.lock:
            if not future.done() and not self.down[i]:
                self.down[i] = self.asking[i] = True

    def answered(self, i: int, future: Future[Any]) -> None:
        """A call on shard ``i`` ended: it is down while calls on it end in StoreUnavailable."""
        error = future.exception() if not future.cancelled() else None
        with self.lock:
            self.asking[i] = False
            self.down[i] = isinstance(error, StoreUnavailable)


class ShardedDispatcher:
    """The dispatchers of the shards (each enqueues on its shard's queue), routed by run id."""

    def __init__(self, store: ShardedStore, dispatchers: Sequence[Any]) -> None:
        self.store, self.dispatchers = store, list(dispatchers)

    def enqueue(self, run_id: str, step: int, fence: int) -> None:
        self.dispatchers[self.store.shard_of(run_id)].enqueue(run_id, step, fence)

    def is_pending(self, run_id: str, fence: int) -> bool:
        return bool(self.dispatchers[self.store.shard_of(run_id)].is_pending(run_id, fence))

    def discard(self, run_id: str, fence: int) -> None:
        self.dispatchers[self.store.shard_of(run_id)].discard(run_id, fence)

    def workers(self) -> list[Any]:
        return [w for d in self.dispatchers for w in d.workers()]

    def queued(self) -> int:
        return sum(int(d.queued()) for d in self.dispatchers)
