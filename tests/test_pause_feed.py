"""``list_interrupts(wait_ms=)``: a listing that waits for a new pause instead of being polled.

Run once embedded and once on real Redis. The waiting listing runs on a thread; the pause is made
on the main thread (RQ's worker wants it), so "another thread" is the one that waits.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from parkway import AsyncParkway, InterruptPage, ValidationError
from parkway.adapters.redis import keys
from tests import flows
from tests.conftest import Harness


def _waiting(harness: Harness, **kwargs: Any) -> tuple[Future[tuple[InterruptPage, float]], ThreadPoolExecutor]:
    """Start ``list_interrupts(**kwargs)`` on a thread; its future gives the page and when it came."""

    def listing() -> tuple[InterruptPage, float]:
        page = harness.pw.list_interrupts(**kwargs)
        return page, time.monotonic()

    pool = ThreadPoolExecutor(1)
    return pool.submit(listing), pool


@pytest.mark.parametrize("order", ["newest", "expiring"])
def test_a_waiting_listing_returns_soon_after_a_pause_made_elsewhere(harness: Harness, order: str) -> None:
    """With nothing pending, the listing blocks; it returns the new pause within ~100 ms of its
    commit, in either order."""
    future, pool = _waiting(harness, order=order, include_tokens=True, wait_ms=10_000)
    time.sleep(0.3)
    assert not future.done()
    run_id = harness.start_and_run(flows.one_choice)
    parked_at = time.monotonic()
    page, returned_at = future.result(timeout=10)
    pool.shutdown()
    assert [i.run_id for i in page.items] == [run_id] and page.items[0].resume_token
    assert returned_at - parked_at < 0.1


def test_a_pause_adds_to_the_feed_only_its_workflow_run_creation_and_tenant(harness: Harness) -> None:
    """The pause feed's entry names the workflow, the run, when the run was created (which run
    held the id) and its tenant ('' for none), nothing of the request (no content, no token): the
    listing that wakes on it reads the interrupt itself."""
    client: Any = harness.pw.store.client
    run_id = harness.start_and_run(flows.one_choice)
    acme = harness.pw.start(flows.one_choice, {}, tenant="acme")
    harness.run_jobs()
    created = str(harness.pw.get_run(run_id).created_at).encode()
    acme_created = str(harness.pw.get_run(acme).created_at).encode()
    assert [fields for _id, fields in client.xrange(keys.pauses())] == [
        {b"w": b"one_choice", b"r": run_id.encode(), b"c": created, b"t": b""},
        {b"w": b"one_choice", b"r": acme.encode(), b"c": acme_created, b"t": b"acme"}]


def test_a_waiting_listing_with_nothing_new_returns_an_empty_page_after_wait_ms(harness: Harness) -> None:
    """Nothing pauses: the page is empty, and comes after wait_ms, not before."""
    began = time.monotonic()
    page = harness.pw.list_interrupts(wait_ms=300)
    assert page.items == () and page.next_cursor is None
    assert 0.3 <= time.monotonic() - began < 2


def test_a_listing_that_finds_interrupts_does_not_wait(harness: Harness) -> None:
    """A page with items returns at once, whatever wait_ms says."""
    run_id = harness.start_and_run(flows.one_choice)
    began = time.monotonic()
    assert [i.run_id for i in harness.pw.list_interrupts(wait_ms=10_000).items] == [run_id]
    assert time.monotonic() - began < 1


def test_a_pause_between_the_listing_and_the_block_is_not_missed(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wait starts from the feed position read before the listing, so a pause committed after the
    listing and before the blocking read ends the wait at once."""
    store: Any = harness.pw.store
    list_once = store.list_interrupts
    made: list[str] = []

    def list_then_pause(query: Any) -> Any:
        listing = list_once(query)
        if not made:
            made.append(harness.start_and_run(flows.one_choice))
        return listing

    monkeypatch.setattr(store, "list_interrupts", list_then_pause)
    began = time.monotonic()
    page = harness.pw.list_interrupts(wait_ms=10_000)
    assert [i.run_id for i in page.items] == made
    assert time.monotonic() - began < 5


def test_a_pause_of_another_workflow_does_not_end_the_wait_with_a_wrong_page(harness: Harness) -> None:
    """Waiting on one workflow, a pause of another is not returned (nor an empty page early): the
    wait goes on until a pause of the workflow asked for."""
    future, pool = _waiting(harness, workflow="two_questions", wait_ms=10_000)
    time.sleep(0.2)
    harness.start_and_run(flows.one_choice)
    time.sleep(0.3)
    assert not future.done()
    wanted = harness.start_and_run(flows.two_questions)
    page, _ = future.result(timeout=10)
    pool.shutdown()
    assert [(i.run_id, i.workflow) for i in page.items] == [(wanted, "two_questions")]


def test_a_wait_on_one_run_ignores_the_pauses_of_others(harness: Harness) -> None:
    """Waiting on a run id, another run's pause does not end the wait; that run's pause does."""
    future, pool = _waiting(harness, run_id="run_awaited", wait_ms=10_000)
    time.sleep(0.2)
    harness.start_and_run(flows.one_choice)
    time.sleep(0.3)
    assert not future.done()
    harness.start_and_run(flows.one_choice, run_id="run_awaited")
    page, _ = future.result(timeout=10)
    pool.shutdown()
    assert [i.run_id for i in page.items] == ["run_awaited"]


def test_a_waiting_listing_returns_a_pause_with_a_ttl_shorter_than_its_wait(harness: Harness) -> None:
    """A pause of one second is listed when it wakes a wait longer than that, not left out as if the
    listing ran at the wait's latest end."""
    future, pool = _waiting(harness, wait_ms=10_000)
    time.sleep(0.2)
    run_id = harness.start_and_run(flows.one_choice, {"ttl_ms": 1000})
    page, _ = future.result(timeout=10)
    pool.shutdown()
    assert [i.run_id for i in page.items] == [run_id]


@pytest.mark.parametrize("bad", [-1, 30_001, 10**9, 1.5, "100", True, None])
def test_wait_ms_must_be_an_integer_from_0_to_30_000(harness: Harness, bad: object) -> None:
    """A negative, oversize or non-integer wait raises ValidationError before any read."""
    with pytest.raises(ValidationError, match="wait_ms"):
        harness.pw.list_interrupts(wait_ms=bad)  # type: ignore[arg-type]


def test_the_async_client_waits_too(harness: Harness) -> None:
    """AsyncParkway.list_interrupts takes wait_ms and waits the same way."""
    import asyncio

    async def listing() -> InterruptPage:
        return await AsyncParkway(client=harness.pw).list_interrupts(wait_ms=300)

    began = time.monotonic()
    assert asyncio.run(listing()).items == ()
    assert time.monotonic() - began >= 0.3
