"""The interrupt index read: listings of pending interrupts (by workflow, by a filter, by run and
the runs below it) and of closed ones, one interrupt by id, and the pause feed a listing watches.
Members and cursors are ``codec``'s; the records they stand for are read from the runs' hashes
(``layout``). Part of ``RedisStore``."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ....runtime.store import InterruptListing, InterruptQuery, InterruptRecord
from ... import codec
from ...limits import Limits
from .. import keys, layout
from ..connection.connection import text as _text
from ..connection.errors import translated
from .index_reads import IndexRead, IndexReads, merged


class InterruptListings(IndexReads):
    """The interrupt listings and reads (``RedisStore``'s; no transition)."""

    client: Any
    limits: Limits
    _workflows: list[str] | None = None
    """the workflows with an index, as the last listing across them read them"""

    def get_interrupt(self, run_id: str, request_id: str) -> InterruptRecord | None:
        with translated(run_id):
            fields = self.client.hgetall(keys.run(run_id))
        return layout.interrupt_in(run_id, request_id, fields)

    def read_interrupt(self, run_id: str, request_id: str, now: int) -> InterruptRecord | None:
        with translated(run_id):
            pipe = self.client.pipeline(transaction=False)
            pipe.hgetall(keys.run(run_id))
            pipe.hgetall(keys.summary(run_id))
            fields, summary = pipe.execute()
        return layout.with_lifecycle(run_id, request_id, fields, summary, now)

    def list_interrupts(self, query: InterruptQuery) -> InterruptListing:
        if query.status != "pending":
            return self._closed(query)
        after = codec.parse_cursor(query.cursor, query.order)
        with translated():
            if query.run_id is not None:
                return self._waiting_interrupt(query)
            if query.filtered:
                return self._filtered(query, after)
            members, feed = self._page(query, after)
            entries = [codec.parse_member(m, query.order, wf) for wf, m in members[: query.limit]]
            hashes = self._hashes([e.run_id for e in entries])
        pairs = zip(entries, hashes, strict=True)
        found = (layout.pending_in(e.run_id, e.expires_at, f, s, query.now) for e, (f, s) in pairs)
        items = [record for record in found if record is not None]
        more = len(members) > query.limit
        cursor = codec.make_cursor(members[query.limit - 1][1], query.order) if more else None
        return InterruptListing(items, cursor, feed, read=len(members))

    def _hashes(self, run_ids: Sequence[str]) -> list[tuple[dict[bytes, bytes], dict[bytes, bytes]]]:
        """Each run's hash and summary (as ``HGETALL`` reads them: a map in RESP3, pairs in RESP2), read
        in one round trip without a pipeline's Python around each command (``run_commands``); an
        error reply raises."""
        commands = [("HGETALL", key) for r in run_ids for key in (keys.run(r), keys.summary(r))]
        hashes = [_map(reply) for reply in self._replies(commands)]
        return list(zip(hashes[::2], hashes[1::2], strict=True))

    def _replies(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """The replies of ``commands`` as Redis sends them, in one round trip (``IndexReads.replies``)."""
        return self.replies(commands)

    def _closed(self, query: InterruptQuery) -> InterruptListing:
        """Interrupts that ended ``query.status``, newest end first, within the retention: each
        workflow's closed index read from the cursor down (O(log N + page)), merged, then the runs'
        records and summaries of the page in one round trip. Members past the retention are left
        out (the reconciler's pass prunes them: prune.lua); one whose summary is gone is skipped."""
        after = codec.parse_closed_cursor(query.cursor, query.status)
        want, floor = query.limit + 1, codec.time_floor(max(0, query.now - self.limits.retention_ms))
        with translated():
            if query.run_id is not None:
                return InterruptListing(self._closed_of_run(query), None)
            names = [query.workflow] if query.workflow else sorted(map(_text, self.client.smembers(keys.workflows())))
            pipe = self.client.pipeline(transaction=False)
            for wf in names:
                pipe.zrevrangebylex(keys.closed_index(query.status, wf), b"(" + after if after else "+",
                                    b"[" + floor, start=0, num=want)
            batches = pipe.execute() if names else []
            members = sorted((m for batch in batches for m in batch), reverse=True)[:want]
            page = [codec.parse_closed_member(m) for m in members[: query.limit]]
            hashes = self._hashes([run_id for _, run_id, _ in page])
        items = []
        for (_, run_id, request_id), (fields, summary) in zip(page, hashes, strict=True):
            record = layout.with_lifecycle(run_id, request_id, fields, summary, query.now)
            if record is not None:
                items.append(record)
        more = len(members) > query.limit
        cursor = codec.make_closed_cursor(members[query.limit - 1], query.status) if more else None
        return InterruptListing(items, cursor)

    def _closed_of_run(self, query: InterruptQuery) -> list[InterruptRecord]:
        """One run's interrupts that ended ``query.status`` (its summary holds them all), newest first."""
        r = query.run_id or ""
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(keys.run(r))
        pipe.hgetall(keys.summary(r))
        fields, summary = pipe.execute()
        made = layout.lifecycle_ids(summary, "i", r)
        found = (layout.with_lifecycle(r, request_id, fields, summary, query.now) for request_id in made)
        items = [x for x in found if x is not None and x.lifecycle is not None and x.lifecycle.status == query.status]
        items.sort(key=lambda x: (x.lifecycle.ended_at if x.lifecycle else 0) or 0, reverse=True)
        return items[: query.limit]

    def _with_feed(self, query: InterruptQuery, read: list[tuple[Any, ...]]) -> tuple[list[Any], str | None]:
        """The replies of the commands ``read`` (as Redis sends them), in one round trip. When the query
        watches: with the pause feed's last id read just before them (a pause they miss is after
        that id); when it waits, after an XREAD BLOCK on the feed, in that round trip too (Redis
        runs a connection's commands in order: the ones behind a blocked one run when it returns,
        woken or timed out)."""
        commands: list[tuple[Any, ...]] = []
        watching = query.watch or query.wait_after is not None
        if query.wait_after is not None and query.tenant is not None:
            # a tenant's listing: woken by its tenant's pauses only, then lists (two round trips)
            self._await_pause(query, query.wait_after)
            query = replace(query, wait_after=None)
        if query.wait_after is not None:
            commands.append(("XREAD", "COUNT", 1, "BLOCK", max(1, query.wait_ms), "STREAMS", keys.pauses(),
                             query.wait_after))
        if watching:
            commands.append(("XREVRANGE", keys.pauses(), "+", "-", "COUNT", 1))
        skip = (query.wait_after is not None) + watching
        replies = self._replies([*commands, *read])
        if not watching:
            return replies, None
        last = replies[skip - 1]
        return replies[skip:], _text(last[0][0]) if last else "0-0"

    def _await_pause(self, query: InterruptQuery, after: str) -> None:
        """Block on the pause feed past ``after`` until it holds a pause the query could list
        (``layout.pause_wakes``: its tenant and workflow) or ``query.wait_ms`` passed: another
        tenant's pauses only move the position on."""
        deadline = time.monotonic() + query.wait_ms / 1000
        while (left := math.ceil((deadline - time.monotonic()) * 1000)) > 0:
            reply = self.client.xread({keys.pauses(): after}, count=100, block=left)
            if not reply:
                return
            entries = reply[0][1]
            if any(layout.pause_wakes(fields, query.tenant, query.workflow) for _, fields in entries):
                return
            after = _text(entries[-1][0])

    def _page(self, query: InterruptQuery, after: bytes | None) -> tuple[list[tuple[str, bytes]], str | None]:
        """Up to limit+1 unexpired (workflow, member) after the cursor, in order (expired members await
        the reconciler), and the pause feed's position if the query watches. Without a workflow, the
        workflows' indexes are merged: each gives its first limit+1 (both forms of each index: one
        ``page.lua`` call for all), read together in one round trip with the set of workflows (a
        workflow new to this store is read in one more)."""
        want, newest = query.limit + 1, query.order == "newest"
        floor = codec.time_floor(query.now + 1)

        high, low = codec.created_range(after, query.created_before, query.created_after)

        def first(wf: str) -> IndexRead:
            key = keys.index(query.order, wf)
            if newest:
                return IndexRead(key, "desc", low, high, want)
            # the order itself puts expired members first: start past them
            start = b"(" + after if after and after > floor else b"[" + floor
            return IndexRead(key, "asc", start, "+", want)

        if query.workflow is not None:
            names = [query.workflow]
        elif self._workflows is None:
            names = self._workflows = sorted(_text(n) for n in self.client.smembers(keys.workflows()))
        else:
            names = self._workflows

        reads = [first(wf) for wf in names]
        read = [self.index_command(reads)] if reads else []
        read += [("SMEMBERS", keys.workflows())] if query.workflow is None else []
        replies, feed = self._with_feed(query, read)
        batches = dict(zip(names, merged(reads, replies[0]) if reads else [], strict=True))
        if query.workflow is None:
            known = sorted(_text(n) for n in replies[-1])
            if new := [wf for wf in known if wf not in batches]:
                batches.update(zip(new, self.read_indexes([first(wf) for wf in new]), strict=True))
            self._workflows = known
        out: list[tuple[str, bytes]] = []
        for wf, batch in batches.items():
            out += [(wf, m) for m in (self._unexpired(query, wf, batch, want, low) if newest else batch)]
        out.sort(key=lambda pair: pair[1], reverse=newest)
        return out[:want], feed

    def _unexpired(
        self, query: InterruptQuery, wf: str, batch: list[bytes], want: int, low: bytes | str = "-"
    ) -> list[bytes]:
        """From a ``newest`` batch on, the first ``want`` members of ``wf``'s index not yet expired
        (down to ``low``, the created-after bound). Past expired members (a backlog the reconcilers
        have not reached) each next batch is twice as large, up to ``SKIP_BATCH_MAX``, and the
        reading stops once it holds every unexpired member the expiring index counts: a deep
        backlog costs a few round trips, not one per ``want`` members."""
        key, out, size, left = keys.index("newest", wf), [], want, None
        while True:
            out += [m for m in batch if codec.parse_member(m, "newest", wf).expires_at > query.now]
            if len(out) >= want or len(batch) < size:
                return out[:want]
            if left is None:
                unexpired = b"[" + codec.time_floor(query.now + 1)
                left = int(self.read_indexes([IndexRead(keys.index("expiring", wf), "count", unexpired, "+")])[0])
            if len(out) >= left:
                return out[:want]
            size = min(size * 2, SKIP_BATCH_MAX)
            batch = self.read_indexes([IndexRead(key, "desc", low, b"(" + batch[-1], size)])[0]

    def _filtered(self, query: InterruptQuery, after: bytes | None) -> InterruptListing:
        """A page from one filter index (audience, else session, else tenant), newest first, of the
        pending interrupts that also match the query's other filters. Each batch of members is
        checked against the runs' hashes (one round trip): a member whose interrupt was answered or
        moved in the meantime is skipped. O(log N + page) with one filter; with more, the first's
        members that fail the others are read too, up to ``query.scan`` of them: past it the page
        ends short, its cursor at the last member read."""
        kind, value = next(
            (k, v) for k, v in (("aud", query.audience), ("session", query.session), ("tenant", query.tenant)) if v
        )
        key, want = keys.filter_index(kind, value), query.limit + 1
        high, low = codec.created_range(after, query.created_before, query.created_after)
        first = [IndexRead(key, "desc", low, high, want)]
        replies, feed = self._with_feed(query, [self.index_command(first)])
        batch: list[bytes] = merged(first, replies[0])[0]
        found: list[tuple[bytes, InterruptRecord]] = []
        read, stopped_at = 0, None
        while batch:
            read += len(batch)
            entries = [codec.parse_member(m, "newest", "") for m in batch]
            for m, e, (fields, summary) in zip(batch, entries, self._hashes([e.run_id for e in entries]), strict=True):
                record = layout.pending_in(e.run_id, e.expires_at, fields, summary, query.now)
                if record is not None and e.expires_at > query.now and _matches(record, query):
                    found.append((m, record))
            if len(batch) < want or len(found) >= want:
                break
            if read >= query.scan:  # the read budget: a short page whose cursor reads on
                stopped_at = batch[-1]
                break
            batch = self.read_indexes([IndexRead(key, "desc", low, b"(" + batch[-1], want)])[0]
        more = len(found) > query.limit
        cursor = codec.make_cursor(found[query.limit - 1][0], "newest") if more else None
        if stopped_at is not None and not more:
            cursor = codec.make_cursor(stopped_at, "newest")
        return InterruptListing([r for _, r in found[: query.limit]], cursor, feed, read=read)

    def _waiting_interrupt(self, query: InterruptQuery) -> InterruptListing:
        """The open interrupts of the run and of every run below it (``tree_interrupts``), a page of
        them in the query's order from its cursor."""
        r = query.run_id or ""
        replies, feed = self._with_feed(query, _read_below(r))
        found = [x for x in self.tree_interrupts(r, query.now, first=replies)
                 if x.expires_at > query.now and _matches(x, query)]
        member = {id(x): codec.member(codec.entry_of(x), query.order) for x in found}
        newest = query.order == "newest"
        found.sort(key=lambda x: member[id(x)], reverse=newest)
        after = codec.parse_cursor(query.cursor, query.order)
        if after is not None:
            found = [x for x in found if (member[id(x)] < after if newest else member[id(x)] > after)]
        more = len(found) > query.limit
        cursor = codec.make_cursor(member[id(found[query.limit - 1])], query.order) if more else None
        return InterruptListing(found[: query.limit], cursor, feed)

    def tree_interrupts(self, run_id: str, now: int, first: Sequence[Any] | None = None) -> list[InterruptRecord]:
        """The interrupts the run and the runs below it wait on, read level by level (one round trip
        each): a run waiting on a child follows it (``use_workflow``), one whose interrupt a child
        races follows that child too (``use_first(child=)``, while the interrupt is pending), and a
        fan-out follows its live children (``use_workflows``). ``first``: the run's replies of
        ``_read_below`` already read."""
        level, out = [run_id], []
        replies = list(first) if first is not None else None
        for _ in range(MAX_TREE_DEPTH):
            if not level:
                break
            if replies is None:
                replies = self._replies([command for r in level for command in _read_below(r)])
            below: list[str] = []
            for i, r in enumerate(level):
                fields, summary, children = _map(replies[3 * i]), _map(replies[3 * i + 1]), replies[3 * i + 2]
                waited = layout.interrupt_waited(fields, r)
                record = layout.with_lifecycle(r, waited, fields, summary, now) if waited else None
                if record is not None:
                    out.append(record)
                below += layout.children_below(fields, r)
                below += sorted(_text(c) for c in children)
            level, replies = below[:MAX_TREE_RUNS], None
        return out


SKIP_BATCH_MAX = 4096
"""the most members one round trip of a ``newest`` listing reads past expired ones"""


MAX_TREE_DEPTH = 16
"""how far down a tree of child runs a listing by run id looks for the interrupts it waits on"""


MAX_TREE_RUNS = 10_000
"""the most runs of one level of a tree a listing by run id reads (a fan-out's children)"""


def _read_below(run_id: str) -> list[tuple[Any, ...]]:
    """The reads that say what a run waits on and what runs below it (``tree_interrupts``): its
    hash, its summary (its interrupt's lifecycle record), its fan-out's live children."""
    return [("HGETALL", keys.run(run_id)), ("HGETALL", keys.summary(run_id)), ("SMEMBERS", keys.fanout(run_id))]


def _map(reply: Any) -> dict[bytes, Any]:
    """A hash as ``HGETALL`` sends it (a map in RESP3, pairs in RESP2) as redis-py's ``hgetall`` reads it."""
    return reply if isinstance(reply, dict) else dict(zip(reply[::2], reply[1::2], strict=True))


def _matches(record: InterruptRecord, query: InterruptQuery) -> bool:
    """Whether a record (read from one filter index, or by run id) matches every filter of the query."""
    if query.created_after is not None and record.created_at < query.created_after:
        return False
    if query.created_before is not None and record.created_at >= query.created_before:
        return False
    wanted = (
        (query.workflow, record.workflow),
        (query.audience, record.audience),
        (query.tenant, record.tenant),
        (query.session, record.session),
    )
    return all(want is None or want == have for want, have in wanted)
