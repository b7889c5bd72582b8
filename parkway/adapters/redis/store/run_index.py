"""The store-wide run index read and kept: a listing of runs, newest first, filtered before paging,
and the reconciler's pruning of runs whose summary is gone (a walk over the index). The index (``keys.runs``) is written
by the scripts that create runs (``list_run`` in ``_common.lua``); a member's time and id are
``codec.run_member``'s. Part of ``RedisStore``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...._lazy import LazyModule
from ....runtime.store import RunIndexPage, RunIndexQuery, RunRecord
from ... import codec
from ...limits import Limits
from .. import keys, layout
from ..connection.errors import translated
from .index_reads import IndexRead, IndexReads
from .records import folded_reply, read_folded

if TYPE_CHECKING:
    from ..scripts import calls
else:  # the calls' classes load with the first read or transition (see parkway._lazy)
    calls = LazyModule("parkway.adapters.redis.scripts.calls")


class RunIndex(IndexReads):
    """The run listing and the run index's upkeep (``RedisStore``'s; no transition)."""

    client: Any
    limits: Limits
    call_script: Callable[[str | None, Any], Any]
    """make a script call (``RedisStore.call_script``)"""

    def list_runs(self, query: RunIndexQuery) -> RunIndexPage:
        """Newest first from the cursor: each batch of members (one read of both the index's forms:
        ``page.lua``, O(log N + batch))
        and its runs' hashes and summaries (one pipelined round trip of HMGETs), kept when they match
        every filter, until the page holds ``limit`` runs or ``scan`` members were read (the page
        then ends short, its cursor after the last member read). A member whose run's hash and
        summary are both gone (the reconciler drops it soon) is skipped."""
        after = codec.parse_run_cursor(query.cursor)
        high, low = codec.created_range(after, query.created_before, query.created_after)
        found: list[tuple[bytes, RunRecord]] = []
        read, last = 0, None
        batch_size = min(max(query.limit + 1, 100), query.scan)
        with translated():
            while read < query.scan:
                size = min(batch_size, query.scan - read)
                batch: list[bytes] = self.read_indexes([IndexRead(keys.runs(), "desc", low, high, size)])[0]
                if not batch:
                    return RunIndexPage([r for _, r in found[: query.limit]], None)
                read += len(batch)
                pipe = self.client.pipeline(transaction=False)
                parsed = [codec.parse_run_member(m) for m in batch]
                for _, run_id in parsed:
                    pipe.hmget(keys.run(run_id), *layout.LISTED_RUN_FIELDS)
                    pipe.hmget(keys.summary(run_id), *layout.LISTED_RUN_FIELDS[:8])
                    read_folded(pipe, run_id)
                replies = iter(pipe.execute())
                for m, (created, run_id) in zip(batch, parsed, strict=True):
                    hashed, summed = next(replies), next(replies)
                    summed = layout.summary_values(run_id, summed, folded_reply(replies, run_id),
                                                   layout.LISTED_RUN_FIELDS[:8])
                    record = layout.listed_run(run_id, hashed, summed)
                    # a member left by an earlier run of that id (its summary expired, the id taken again)
                    if record is not None and record.created_at == created and _matches(record, query):
                        found.append((m, record))
                        if len(found) > query.limit:
                            cursor = codec.make_run_cursor(found[query.limit - 1][0])
                            return RunIndexPage([r for _, r in found[: query.limit]], cursor)
                last = batch[-1]
                if len(batch) < size:
                    return RunIndexPage([r for _, r in found], None)
                high = b"(" + last
        # read as far as the bound allows: the page may be short, the cursor goes on from there
        return RunIndexPage([r for _, r in found], codec.make_run_cursor(last) if last else None)

    def prune_runs(self, now: int, limit: int) -> int:
        """Walk the run index, ``limit`` members at a time from where the last walk stopped
        (``keys.runs_walked``), over the members created before ``now`` less the retention (a younger
        run's summary is surely there: a summary lives the retention past its run's last transition):
        each whose summary is gone (or is another run's: an id taken again) leaves the index. A walk
        that reaches that bound starts again from the oldest member. The index costs a member per
        run (no schedule beside it); a run's member leaves within one walk of its summary's end.
        How many it dropped; two round trips, three when it writes the walk's place, four when it
        drops members too."""
        horizon = now - self.limits.retention_ms
        with translated():
            at: bytes | None = self.client.get(keys.runs_walked())
            low: bytes | str = b"(" + at if at else "-"
            batch: list[bytes] = self.read_indexes(
                [IndexRead(keys.runs(), "asc", low, b"(" + codec.time_floor(horizon), limit)])[0]
            if not batch and at is None:
                return 0
            gone: list[bytes] = []
            if batch:
                pipe = self.client.pipeline(transaction=False)
                parsed = [codec.parse_run_member(m) for m in batch]
                for _, run_id in parsed:
                    pipe.hget(keys.summary(run_id), "created")
                    read_folded(pipe, run_id)
                replies = iter(pipe.execute())
                born = [layout.summary_values(run_id, [next(replies)], folded_reply(replies, run_id), ["created"])[0]
                        for _, run_id in parsed]
                # gone, or another run's now (its id taken again)
                gone = [m for m, (created, _), b in zip(batch, parsed, born, strict=True)
                        if b is None or int(b) != created]
            if gone:  # from whichever form holds them (unlist.lua)
                self.call_script(None, calls.Unlist(index=keys.runs(), members=gone))
            pipe = self.client.pipeline(transaction=False)
            if len(batch) == limit:
                pipe.set(keys.runs_walked(), batch[-1])
            else:  # the walk reached the bound: the next starts from the oldest
                pipe.delete(keys.runs_walked())
            pipe.delete(keys.runs_due())  # the schedule parkway wrote before the walk
            pipe.execute()
        return len(gone)


def _matches(run: RunRecord, query: RunIndexQuery) -> bool:
    """Whether a listed run matches every filter of the query (its time bounds are the index's range)."""
    if query.status is not None and run.status.value != query.status:
        return False
    if query.workflow_prefix is not None and not run.workflow.startswith(query.workflow_prefix):
        return False
    wanted = ((query.workflow, run.workflow), (query.tenant, run.tenant), (query.owner, run.owner))
    return all(want is None or want == have for want, have in wanted)
