"""AsyncParkway: the client's behaviours, awaited, against the embedded and the Redis deployments."""

from __future__ import annotations

import asyncio
import time

import pytest

from parkway import AsyncParkway, InvalidAnswer, ResumeOutcome, RunStatus, ValidationError, WaitTimeout
from tests import flows
from tests.conftest import Harness


def test_start_wait_list_resume_stream_and_cancel_awaited(harness: Harness) -> None:
    """Every call of the sync client works awaited, with the same validation and outcomes."""

    async def scenario() -> None:
        pw = AsyncParkway(client=harness.pw)
        run_id = await pw.start(flows.one_choice, {})
        harness.run_jobs()  # (RQ's worker wants the main thread)
        assert (await pw.wait(run_id, timeout=10)).status is RunStatus.WAITING
        page = await pw.list_interrupts(run_id=run_id, include_tokens=True)
        token = page.items[0].resume_token
        assert token is not None
        with pytest.raises(InvalidAnswer):
            await pw.resume(token, selected="green")
        settled = [e.type async for e in pw.stream(run_id, until="settled", timeout=10)]
        assert settled[-1] == "interrupt"
        assert (await pw.resume(token, selected="red")).accepted
        assert (await pw.resume(token, selected="red")).accepted  # the same answer again (a retry)
        assert (await pw.resume(token, selected="blue")).outcome is ResumeOutcome.ALREADY_RESOLVED
        harness.run_jobs()  # (RQ's worker wants the main thread)
        events = [e async for e in pw.stream(run_id, timeout=10)]
        assert events[-1].type == "done" and (await pw.get_run(run_id)).output["painted"] == "red"
        ended = await pw.get_interrupt(page.items[0].request_id)
        assert ended.lifecycle is not None and (ended.lifecycle.outcome, ended.lifecycle.failures) == ("resumed", 1)
        assert [i.run_id for i in (await pw.list_interrupts(status="resolved")).items] == [run_id]
        other = await pw.start(flows.denial, {})
        harness.run_jobs()  # (RQ's worker wants the main thread)
        await pw.wait(other, timeout=10)
        cancelled = await pw.cancel(other, reason="no")
        assert (cancelled.outcome.value, cancelled.status.value) == ("cancelled", "cancelled")

    asyncio.run(scenario())


def test_streams_time_out_without_blocking_the_loop(harness: Harness) -> None:
    """A stream with nothing new raises WaitTimeout on time while other tasks keep running."""

    async def scenario() -> None:
        pw = AsyncParkway(client=harness.pw)
        run_id = await pw.start(flows.one_choice, {})
        harness.run_jobs()  # (RQ's worker wants the main thread)
        await pw.wait(run_id, timeout=10)
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.05)
                ticks += 1

        task = asyncio.create_task(ticker())
        started = time.monotonic()
        last = harness.pw.store.read_events(run_id, "0", None, 100)[-1].id
        with pytest.raises(WaitTimeout):
            async for _ in pw.stream(run_id, after=last, timeout=1.0):
                pass
        task.cancel()
        assert 0.9 <= time.monotonic() - started < 3 and ticks >= 10

    asyncio.run(scenario())


def test_sessions_awaited(harness: Harness) -> None:
    """The session surface, awaited: the same outcomes and refusals as the sync client's."""
    from parkway import Caller
    from parkway.errors import BranchParked
    from tests import session_flows

    ada = Caller("user", "ada", "acme")

    async def scenario() -> None:
        pw = AsyncParkway(client=harness.pw)
        sid = await pw.sessions.open(session_flows.mail, owner="ada", tenant="acme")
        sent = await pw.sessions.send(sid, "mail bob", caller=ada)
        harness.run_jobs()  # (RQ's worker wants the main thread)
        view = await pw.sessions.get(sid, caller=ada)
        with pytest.raises(BranchParked):
            await pw.sessions.send(sid, "and?", caller=ada)
        resume = {"type": "interrupt.resume", "interrupt_id": view.parked_by()[0], "payload": {"approved": True}}
        assert (await pw.sessions.resume(sid, resume, caller=ada)).outcome == "resumed"
        harness.run_jobs()
        view = await pw.sessions.get(sid)
        assert view.messages[view.head].content == "done: sent" and view.messages[view.head].run_id == sent.run_id
        assert [e.type for e in await pw.sessions.events(sid)][0] == "session.opened"

    asyncio.run(scenario())



def test_stream_validates_its_position(harness: Harness) -> None:
    """A malformed ``after`` is refused awaited too, before any read."""

    async def scenario() -> None:
        pw = AsyncParkway(client=harness.pw)
        with pytest.raises(ValidationError, match="event id"):
            async for _ in pw.stream("run-1", after="not-an-id", timeout=1):
                pass

    asyncio.run(scenario())


def _public_methods(cls: type) -> dict[str, object]:
    return {n: v for n, v in vars(cls).items() if not n.startswith("_") and callable(v)}


def test_the_async_client_has_every_method_of_the_sync_one_with_the_same_signature() -> None:
    """Each public method of Parkway is AsyncParkway's too, awaited (an async generator for ``stream``),
    with the same parameters, defaults and annotations; the exceptions are named, with a reason, in
    ``NOT_AWAITED``."""
    import inspect

    from parkway import Parkway
    from parkway.client.aio import NOT_AWAITED

    sync, awaited = _public_methods(Parkway), _public_methods(AsyncParkway)
    assert set(NOT_AWAITED) <= set(sync), "NOT_AWAITED names a method Parkway does not have"
    assert set(sync) - set(NOT_AWAITED) == set(awaited), "AsyncParkway's methods differ from Parkway's"
    for name, method in awaited.items():
        assert inspect.iscoroutinefunction(method) or inspect.isasyncgenfunction(method), name
        mine, theirs = inspect.signature(method), inspect.signature(sync[name])  # type: ignore[arg-type]
        assert mine.parameters == theirs.parameters, name
        returns = str(mine.return_annotation).removeprefix("Async")
        assert returns == str(theirs.return_annotation), name
    assert isinstance(vars(Parkway)["sessions"], property) and isinstance(vars(AsyncParkway)["sessions"], property)


def test_a_listing_takes_one_query_object_or_its_keywords(harness: Harness) -> None:
    """list_interrupts takes a ListingQuery or its fields as keywords (not both), awaited or not;
    each field is checked as the query is built."""
    from parkway import ListingQuery

    async def scenario() -> None:
        pw = AsyncParkway(client=harness.pw)
        run_id = await pw.start(flows.one_choice, {})
        harness.run_jobs()  # (RQ's worker wants the main thread)
        await pw.wait(run_id, timeout=10)
        query = ListingQuery(run_id=run_id, include_tokens=True)
        by_object, by_keywords = await pw.list_interrupts(query), await pw.list_interrupts(run_id=run_id)
        assert [i.request_id for i in by_object.items] == [i.request_id for i in by_keywords.items]
        assert by_object.items[0].resume_token is not None and by_keywords.items[0].resume_token is None
        assert harness.pw.list_interrupts(query).items == by_object.items
        with pytest.raises(ValidationError, match="not both"):
            await pw.list_interrupts(query, limit=5)

    asyncio.run(scenario())
    with pytest.raises(ValidationError, match="limit"):
        ListingQuery(limit=0)
    with pytest.raises(ValidationError, match="order 'newest'"):
        ListingQuery(order="expiring", tenant="t1")
    with pytest.raises(TypeError):
        harness.pw.list_interrupts(nonsense=1)
