"""Housekeeping: what the reconciler and the worker's heartbeat keep up, apart from the runs'
transitions: leases, the due outbox and expiry claims, holding an overdue run's records, the
streams a park folded, pruning what no run holds, the reconciler's lock, the tallies. Part of
``RedisStore``."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ...._lazy import LazyModule
from ....runtime import telemetry
from ....runtime.protocol import ID_PATTERN
from ....runtime.store import Due, IndexEntry, Overdue, Tallies
from ... import codec
from ...limits import Limits
from .. import keys, layout
from ..connection.connection import function_missing
from ..connection.connection import text as _text
from ..connection.errors import translated
from ..scripts.scripts import ScriptCall
from .index_reads import IndexRead, IndexReads

if TYPE_CHECKING:
    from ..scripts import calls
else:  # the calls' classes load with the first transition (see parkway._lazy)
    calls = LazyModule("parkway.adapters.redis.scripts.calls")


FUNCTIONS_IDLE_MS = 24 * 3600 * 1000
"""a function library of another version none loaded for this long is deleted (``_prune_functions``)"""
LIBRARY_NAME = re.compile(r"pw_[a-z][a-z0-9_]*_[0-9a-f]{16}")
"""the name of one of parkway's libraries (``scripts.library``): only such a name is ever deleted"""


class Housekeeping(IndexReads):
    """The upkeep of indexes, leases and keys' lifetimes (``RedisStore``'s); no run transition."""

    client: Any
    limits: Limits
    queue_script: Callable[[Any, ScriptCall], None]
    """queue a script call on a pipeline (``RedisStore.queue_script``)"""
    call_script: Callable[[str | None, Any], Any]
    """make a script call (``RedisStore.call_script``)"""
    function_names: Callable[[], set[str]]
    """the function libraries this process calls (``RedisStore.function_names``)"""
    _ancestors: Callable[[Sequence[tuple[str, int]]], list[calls.Ancestor]]
    """the keys of a run's ancestors (``Transitions._ancestors``)"""

    def _index_keys(self, workflow: str) -> list[str]:
        """The workflow's two indexes of pending interrupts (there is no index across workflows: a
        listing of every workflow merges theirs)."""
        return [keys.index("newest", workflow), keys.index("expiring", workflow)]

    def heartbeat(self, run_ids: Sequence[str], lease_until: int) -> None:
        if run_ids:
            with translated():
                self.client.zadd(keys.leases(), dict.fromkeys(run_ids, lease_until), xx=True)

    def due(self, now: int, outbox_age_ms: int, limit: int) -> Due:
        """One round trip: the leases and the outbox entries due."""
        with translated():
            pipe = self.client.pipeline(transaction=False)
            pipe.zrangebyscore(keys.leases(), "-inf", now, start=0, num=limit)
            pipe.zrangebyscore(keys.outbox(), "-inf", now - outbox_age_ms, start=0, num=limit)
            leases, outbox = pipe.execute()
        return Due([_text(m) for m in leases], [keys.outbox_job(_text(m)) for m in outbox])

    def _due_members(self, before: int, count: int) -> list[IndexEntry]:
        """The first ``count`` members of each workflow's expiring index that expired before
        ``before`` (they sort first there; both forms of the index: ``page.lua``), merged earliest
        first. Two round trips."""
        with translated():
            workflows = sorted(_text(n) for n in self.client.smembers(keys.workflows()))
            if not workflows:
                return []
            found = self.read_indexes([IndexRead(keys.index("expiring", wf), "asc", "-",
                                                 b"(" + codec.time_floor(before), count) for wf in workflows])
        due = [codec.parse_member(m, "expiring", wf) for wf, ms in zip(workflows, found, strict=True) for m in ms]
        due.sort(key=lambda e: e.expires_at)
        return due

    def claim_due(self, now: int, limit: int, claim_ms: int) -> list[IndexEntry]:
        """Reads as many more members than ``limit`` as there are live claims (those it skips), then
        claims each with ZADD NX: a run another reconciler claimed first is left to it. Lapsed
        claims are dropped first. Four round trips."""
        with translated():
            pipe = self.client.pipeline(transaction=False)
            pipe.zremrangebyscore(keys.expiry_claims(), "-inf", now)
            pipe.zcard(keys.expiry_claims())
            claimed = int(pipe.execute()[1])
        due = self._due_members(now, limit + claimed)[: limit + claimed]
        if not due:
            return []
        with translated():
            pipe = self.client.pipeline(transaction=False)
            for entry in due:
                pipe.zadd(keys.expiry_claims(), {entry.run_id: now + claim_ms}, nx=True)
            won = pipe.execute()
        return [entry for entry, added in zip(due, won, strict=True) if added][:limit]

    def release_claims(self, run_ids: Sequence[str]) -> None:
        if run_ids:
            with translated():
                self.client.zrem(keys.expiry_claims(), *run_ids)

    def extend_overdue(self, now: int, before: int, until: int, limit: int) -> int:
        """Reads each run's step and lineage, then extends (PEXPIREAT GT: never shortens, never
        revives) what its expiry needs: its hash, the journal of its step, its workflow state,
        snapshots and stream, its ancestors' (``_ancestors``, as park keeps them), and the
        summaries to the retention past them. A run that moved on meanwhile keeps its records a little longer, no
        more. Two round trips, then two per ``EXTEND_CHUNK`` runs."""
        due = self._due_members(before, limit)[:limit]
        for at in range(0, len(due), EXTEND_CHUNK):
            self._extend(due[at : at + EXTEND_CHUNK], until)
        return len(due)

    def _extend(self, due: Sequence[IndexEntry], until: int) -> None:
        with translated():
            pipe = self.client.pipeline(transaction=False)
            for entry in due:
                pipe.hmget(keys.run(entry.run_id), *layout.EXTEND_FIELDS)
            found = pipe.execute()
            pipe = self.client.pipeline(transaction=False)
            for entry, values in zip(due, found, strict=True):
                found_step = layout.extend_step(values)
                if found_step is None:  # its records are gone already: nothing to keep
                    continue
                r, (step, ancestors) = entry.run_id, found_step
                kept = [keys.run(r), keys.journal(r, step), keys.workflow_state(r), keys.snapshots(r),
                        keys.events(r), keys.summary(r)]
                kept += [key for a in self._ancestors(ancestors) for key in a.keys()]
                summaries = {keys.summary(r), *(keys.summary(a) for a, _ in ancestors)}
                for key in kept:
                    pipe.pexpireat(key, until + self.limits.retention_ms if key in summaries else until, gt=True)
            pipe.execute()

    def overdue(self, now: int) -> Overdue:
        """Two round trips: the workflows' names, then each one's count of due members and its first."""
        with translated():
            workflows = sorted(_text(n) for n in self.client.smembers(keys.workflows()))
            if not workflows:
                return Overdue()
            replies = self.read_indexes([read for wf in workflows for read in _read_overdue(wf, now)])
        return _overdue(replies)

    def reclaim_folded(self, now: int, limit: int = 1000) -> int:
        """Touch the streams of the runs parked (by the pause feed) from where the last pass stopped
        up to ``now`` less ``FOLD_WAKE_MS`` and a margin: a park that folded a run's events into its
        hash left its stream to expire then, and Redis drops an expired key when it is read, where
        its own sampling of expiring keys could take minutes in a large keyspace. A live stream (not
        folded, or refilled since) is only read. Parks the feed trimmed before a pass reached them
        are left to Redis. Three round trips (two when the feed holds no new park)."""
        until = now - layout.FOLD_WAKE_MS - RECLAIM_MARGIN_MS
        with translated():
            after = self.client.get(keys.reclaimed())
            start = "(" + _text(after) if after else "-"
            entries = self.client.xrange(keys.pauses(), start, str(max(0, until)), count=limit)
            if not entries:
                return 0
            pipe = self.client.pipeline(transaction=False)
            for _, fields in entries:
                run_id = _text(fields.get(b"r", b""))
                if ID_PATTERN.fullmatch(run_id):
                    pipe.exists(keys.events(run_id))
            pipe.set(keys.reclaimed(), entries[-1][0])
            pipe.execute()
        return len(entries)

    def prune_idle(self, now: int) -> list[str]:
        """Drop what no run holds any more (``prune.lua``): each workflow's closed interrupts past
        the retention; a workflow with none left in any index; the pause feed once no workflow is
        left; and the function libraries of other versions than this process's that none loaded for
        ``FUNCTIONS_IDLE_MS`` (``_prune_functions``). The workflows it forgot. Two round trips (the
        workflows and the libraries' loads read together, then one script per workflow), and one
        more when there are libraries to delete."""
        floor = codec.time_floor(max(0, now - self.limits.retention_ms))
        with translated():
            pipe = self.client.pipeline(transaction=False)
            pipe.smembers(keys.workflows())
            pipe.hgetall(keys.functions())
            names, loaded = pipe.execute()
            self._prune_functions(now, {_text(name): int(at) for name, at in loaded.items()})
            workflows = sorted(_text(n) for n in names)
            if not workflows:
                return []
            pipe = self.client.pipeline(transaction=False)
            for wf in workflows:
                self.queue_script(pipe, ScriptCall.of(None, self._prune_call(wf, floor)))
            pruned = pipe.execute(raise_on_error=False)
            for i, (wf, reply) in enumerate(zip(workflows, pruned, strict=True)):
                if function_missing(reply):  # the server lost the function since it was loaded: ran nothing
                    pruned[i] = self.call_script(None, self._prune_call(wf, floor))
                elif isinstance(reply, Exception):
                    raise reply
        return [wf for wf, gone in zip(workflows, pruned, strict=True) if gone]

    def _prune_functions(self, now: int, loaded: dict[str, int]) -> list[str]:
        """Delete parkway's function libraries that are not this process's version and none loaded
        for ``FUNCTIONS_IDLE_MS`` (``loaded``: ``keys.functions``, each library a process had Redis
        load, with when), in one round trip: every deploy of changed scripts loads new ones beside
        the old, and Redis keeps them (and persists them) until deleted. A process still calling a
        deleted one loads it again on its next call (``connection.run_script``); so the libraries of
        a version left running are deleted at most once a day. A name the hash holds that is not one
        of parkway's (written there by another hand) is left alone. The libraries it deleted."""
        mine = self.function_names()
        idle = [name for name, at in loaded.items()
                if LIBRARY_NAME.fullmatch(name) and name not in mine and at < now - FUNCTIONS_IDLE_MS]
        if not idle:
            return []
        pipe = self.client.pipeline(transaction=False)
        for name in idle:
            pipe.function_delete(name)
        pipe.hdel(keys.functions(), *idle)
        for reply in pipe.execute(raise_on_error=False):
            # a library deleted by another reconciler, or by hand, is not there: nothing to do
            if isinstance(reply, Exception) and "not found" not in str(reply).lower():
                raise reply
        return idle

    def _prune_call(self, workflow: str, floor: bytes) -> calls.Prune:
        resolved, cancelled, expired = (keys.closed_index(status, workflow) for status in telemetry.CLOSED_STATUSES)
        newest, expiring = self._index_keys(workflow)
        return calls.Prune(
            workflows=keys.workflows(), newest=newest, expiring=expiring, resolved=resolved, cancelled=cancelled,
            expired=expired, pauses=keys.pauses(), reclaimed=keys.reclaimed(), workflow=workflow, floor=floor,
        )

    def try_lock(self, owner: str, ttl_ms: int) -> bool:
        with translated():
            if self.client.set(keys.reconciler_lock(), owner, nx=True, px=ttl_ms):
                return True
            if _text(self.client.get(keys.reconciler_lock()) or b"") == owner:
                self.client.pexpire(keys.reconciler_lock(), ttl_ms)
                return True
            return False

    def tallies(self, now: int) -> Tallies:
        """Two round trips: the counters, the workflows' names, the leases' and the outbox's sizes and
        the outbox's oldest entry, then (one ``page.lua`` call) per workflow the count of its expiring
        index from now on (O(log N) for the single zset; for its buckets, their count less the members
        below now, counted over the buckets those fill: expired members await the reconciler) and the
        reads of its backlog (``overdue``)."""
        with translated():
            pipe = self.client.pipeline(transaction=False)
            pipe.hgetall(keys.metrics())
            pipe.smembers(keys.workflows())
            pipe.zcard(keys.leases())
            pipe.zcard(keys.outbox())
            pipe.zrange(keys.outbox(), 0, 0, withscores=True)
            pipe.xlen(keys.notices())
            pipe.xlen(keys.dead_notices())
            counters, names, running, outstanding, oldest, notices, dead = pipe.execute()
            workflows = sorted(_text(n) for n in names)
            unexpired = b"[" + codec.time_floor(now + 1)
            replies = self.read_indexes([read for wf in workflows for read in (
                IndexRead(keys.index("expiring", wf), "count", unexpired, "+"), *_read_overdue(wf, now))])
        counts = replies[0::3]
        overdue = _overdue([r for i, r in enumerate(replies) if i % 3])
        return Tallies(
            {_text(k): int(v) for k, v in counters.items()},
            layout.WAIT_BUCKETS_S,
            dict(zip(workflows, counts, strict=True)),
            running=int(running),
            outstanding=int(outstanding),
            oldest_outstanding_at=int(oldest[0][1]) if oldest else None,
            overdue=overdue.count,
            overdue_ms=overdue.age_ms(now),
            node_buckets=layout.NODE_BUCKETS_S,
            notices=int(notices),
            notices_dead=int(dead),
        )


RECLAIM_MARGIN_MS = 1000
"""how much longer the reconciler waits before it touches a parked run's stream: the pause feed's
ids are Redis's clock, ``now`` the worker's"""
EXTEND_CHUNK = 1000
"""runs whose records one round trip of ``extend_overdue`` keeps"""


def _read_overdue(workflow: str, now: int) -> list[IndexRead]:
    """The two reads ``_overdue`` sums: the workflow's due members (counted) and its first."""
    key, due = keys.index("expiring", workflow), b"(" + codec.time_floor(now)
    return [IndexRead(key, "count", "-", due), IndexRead(key, "asc", "-", due, 1)]


def _overdue(replies: Sequence[Any]) -> Overdue:
    """The backlog from ``_read_overdue``'s replies, two per workflow."""
    count, oldest = 0, None
    for i in range(0, len(replies), 2):
        count += int(replies[i])
        if replies[i + 1]:
            first = codec.parse_member(replies[i + 1][0], "expiring", "").expires_at
            oldest = first if oldest is None else min(oldest, first)
    return Overdue(count, oldest)
