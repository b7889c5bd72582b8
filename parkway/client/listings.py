"""The client's listings: pending and ended interrupts (a page of what the caller may see, filtered
before paging, waiting for a pause when asked), and runs. ``Parkway.list_interrupts``,
``list_watching`` and ``list_runs`` are these, with their documentation."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace

from ..runtime import cursors
from ..runtime.authority import Caller, reaches
from ..runtime.clock import now_ms
from ..runtime.errors import ValidationError
from ..runtime.listing import ListingQuery, RunsQuery
from ..runtime.protocol import InterruptPage, RunPage
from ..runtime.store import ClientStore, InterruptListing, InterruptQuery, InterruptRecord, RunIndexQuery
from .views import ReadInterrupts, interrupt_view, run_summary

READ_BUDGET = 2000
"""index members one listing request reads at most to fill a page of what its caller may see and
its ``search`` / ``workflow_prefix`` keep: past it the page ends short, ``budget_reached``, with a
cursor that reads on"""
PAUSE_WAIT_SLICE_MS = 4_000
"""longest single blocking read of the pause feed: below the Redis client's 5 s socket timeout"""


def _ALL(found: list[InterruptRecord]) -> list[InterruptRecord]:
    """A listing's keeper that keeps everything."""
    return found


class Listings:
    """A client's listings over ``store``: cursors sealed with ``secret``; the pending interrupts a
    page shows are kept in ``read`` (answered then without a lookup)."""

    def __init__(self, store: ClientStore, secret: bytes, read: ReadInterrupts) -> None:
        self.store = store
        self.secret = secret
        self.read = read

    def interrupts(self, asked: ListingQuery, caller: Caller | None) -> InterruptPage:
        """``Parkway.list_interrupts``."""
        keep = self._keeper(caller, asked.matcher())
        stored = self._store_query(asked, watch=asked.wait_ms > 0, caller=caller)
        if stored is None:
            return InterruptPage(items=())  # another tenant's interrupts: none this caller may list
        listing = self.store.list_interrupts(stored)
        if asked.wait_ms and not keep(listing.items) and asked.status == "pending":
            listing = self._wait_for_pause(stored, listing, time.monotonic() + asked.wait_ms / 1000, keep)
        return self._page(stored, listing, asked.include_tokens, keep, filtered=keep is not _ALL)


    def watching(self, query: ListingQuery, caller: Caller | None) -> tuple[InterruptPage, str]:
        """``list_interrupts(query)`` once, without waiting, and the position of the pause feed read
        just before that listing: a caller that waits by itself (the HTTP server, asynchronously, many
        listings on one connection) waits for a feed entry past that position, then lists again (a
        pause made since the listing is always past it)."""
        if not isinstance(query, ListingQuery):
            raise ValidationError(f"list_watching takes a ListingQuery, not {type(query).__name__}")
        if query.wait_ms:
            raise ValidationError("list_watching does not wait: wait for the feed past its position, then list again")
        keep = self._keeper(caller, query.matcher())
        stored = self._store_query(query, watch=True, caller=caller)
        if stored is None:  # another tenant's: nothing, and a position to wait from (read with its own tenant's)
            own = self._store_query(replace(query, tenant=None, limit=1), watch=True, caller=caller)
            assert own is not None
            return InterruptPage(items=()), self.store.list_interrupts(own).feed or "0-0"
        listing = self.store.list_interrupts(stored)
        page = self._page(stored, listing, query.include_tokens, keep, filtered=keep is not _ALL)
        return page, listing.feed or "0-0"


    def _store_query(self, query: ListingQuery, *, watch: bool, caller: Caller | None = None) -> InterruptQuery | None:
        """The store's query for a listing (it watches the pause feed if it waits), the cursor unsealed
        (``parkway.runtime.cursors``). A caller bound to a tenant (every user) reads its tenant's
        index of pending interrupts, not every tenant's (newest order: the index's); None when it
        asks for another tenant's."""
        position = None if query.cursor is None else cursors.unseal(self.secret, query.cursor)
        tenant = query.tenant
        if caller is not None and caller.tenant is not None and query.status == "pending":
            if tenant is not None and tenant != caller.tenant:
                return None
            if query.order == "newest":
                tenant = caller.tenant
        return InterruptQuery(
            query.workflow, query.run_id, query.order, query.limit, position, now_ms(), watch=watch,
            audience=query.audience, tenant=tenant, session=query.session,
            created_after=query.created_after, created_before=query.created_before, status=query.status,
            scan=READ_BUDGET,
        )

    def _keeper(
        self, caller: Caller | None, match: Callable[[InterruptRecord], bool] | None = None
    ) -> Callable[[list[InterruptRecord]], list[InterruptRecord]]:
        """What of a page ``caller`` may see and ``match`` keeps (all of it without either)."""
        if caller is not None and not isinstance(caller, Caller):
            raise ValidationError("caller must be a parkway Caller")
        if caller is None and match is None:
            return _ALL
        if caller is None:
            return lambda found: [r for r in found if match(r)]  # type: ignore[misc]
        if match is None:
            return lambda found: self._may_see(found, caller)
        return lambda found: self._may_see([r for r in found if match(r)], caller)

    def _page(
        self,
        query: InterruptQuery,
        listing: InterruptListing,
        include_tokens: bool,
        keep: Callable[[list[InterruptRecord]], list[InterruptRecord]],
        *,
        filtered: bool,
    ) -> InterruptPage:
        """The page a caller gets: what it may see, filtered before paging (read on, a page of what is
        missing at a time, until the page is full, so its cursor follows an item the caller saw, or
        until ``READ_BUDGET`` index members are read: then the page says so, ``budget_reached``), with
        the cursor sealed, and the shards that did not answer (``missing_shards``)."""
        found, next_cursor, spent = keep(listing.items), listing.next_cursor, max(listing.read, len(listing.items))
        missing = set(listing.missing)
        while filtered and len(found) < query.limit and next_cursor is not None and spent < READ_BUDGET:
            left = READ_BUDGET - spent
            more = self.store.list_interrupts(replace(
                query, cursor=next_cursor, limit=min(query.limit - len(found), left), watch=False, wait_after=None,
                scan=left,
            ))
            found, next_cursor = found + keep(more.items), more.next_cursor
            spent += max(more.read, len(more.items), 1)
            missing.update(more.missing)
        if query.status == "pending":
            for record in found:
                self.read.put(record)
        items = tuple(interrupt_view(r, self.secret, include_token=include_tokens) for r in found)
        sealed = None if next_cursor is None else cursors.seal(self.secret, next_cursor)
        stopped = filtered and len(found) < query.limit and next_cursor is not None and spent >= READ_BUDGET
        return InterruptPage(items=items, next_cursor=sealed, budget_reached=stopped,
                             missing_shards=tuple(sorted(missing)))

    def _may_see(self, records: list[InterruptRecord], caller: Caller) -> list[InterruptRecord]:
        """The interrupts ``caller`` may see: of runs it may answer, by the tenant and owner their
        runs' summaries were created with (an interrupt whose run has none left: nobody's but an
        unbound system caller's)."""
        if caller.role == "system" and caller.tenant is None:
            return records
        whose = self.store.authorities(sorted({r.run_id for r in records}))
        return [r for r in records if r.run_id in whose and reaches(caller, *whose[r.run_id], "list")]


    def runs(self, asked: RunsQuery, caller: Caller | None) -> RunPage:
        """``Parkway.list_runs``."""
        if caller is not None and not isinstance(caller, Caller):
            raise ValidationError("caller must be a parkway Caller")
        tenant, owner = asked.tenant, None
        if caller is not None and caller.tenant is not None:
            if tenant is not None and tenant != caller.tenant:
                return RunPage(items=())  # another tenant's runs: none this caller may read
            tenant = caller.tenant
        if caller is not None and caller.role == "user":
            owner = caller.owner
        position = None if asked.cursor is None else cursors.unseal(self.secret, asked.cursor)
        listing = self.store.list_runs(RunIndexQuery(
            limit=asked.limit, cursor=position, now=now_ms(), status=asked.status, workflow=asked.workflow,
            workflow_prefix=asked.workflow_prefix, tenant=tenant, owner=owner, created_after=asked.created_after,
            created_before=asked.created_before,
        ))
        items = [r for r in listing.items if caller is None or reaches(caller, r.tenant, r.owner, "read")]
        sealed = None if listing.next_cursor is None else cursors.seal(self.secret, listing.next_cursor)
        return RunPage(items=tuple(run_summary(r) for r in items), next_cursor=sealed,
                       missing_shards=listing.missing)


    def _wait_for_pause(
        self,
        query: InterruptQuery,
        listing: InterruptListing,
        deadline: float,
        keep: Callable[[list[InterruptRecord]], list[InterruptRecord]],
    ) -> InterruptListing:
        """List again after each pause past the feed position read with the last listing (so a pause
        made since is not missed), until the page has items or ``deadline`` (``time.monotonic()``)
        passes. Each wait and its listing are one round trip; a pause of another workflow or run
        wakes it to an empty page, and it waits again (so does a page of nothing ``keep`` keeps)."""
        while not keep(listing.items):
            left_ms = math.ceil((deadline - time.monotonic()) * 1000)  # never end short of it
            if left_ms <= 0:
                break
            # the listing runs when the wait ends, but what it finds paused during the wait and woke
            # it at once: ``now`` as the wait begins leaves out nothing that is still pending
            block = min(left_ms, PAUSE_WAIT_SLICE_MS)
            wait = replace(query, now=now_ms(), wait_after=listing.feed or "0-0", wait_ms=block)
            listing = self.store.list_interrupts(wait)
        return listing

