"""What a listing costs: a caller bound to a tenant reads its tenant's index, not every tenant's; a
search reads a bounded number of interrupts per request and says when it stopped there; a waiting
listing of one tenant is not woken by another tenant's pauses. Counted in Redis commands
(``INFO commandstats`` deltas) on a real Redis."""

from __future__ import annotations

import pytest
import redis

from parkway import InterruptPage
from parkway.client import sync
from parkway.runtime.authority import Caller
from tests import flows
from tests.conftest import Harness

ADA = Caller("user", "ada", "acme")


def commands(client: redis.Redis) -> int:
    """Redis commands the server has run so far (every client's), by ``INFO commandstats``."""
    stats = client.info("commandstats")
    return sum(int(v["calls"]) for v in stats.values())


def counted(client: redis.Redis, call: object) -> tuple[object, int]:
    """``call()`` and the Redis commands it cost (less the INFO that reads the count)."""
    before = commands(client)
    result = call()  # type: ignore[operator]
    return result, commands(client) - before - 1


@pytest.fixture
def on_redis(harness: Harness) -> Harness:
    if harness.connection is None:
        pytest.skip("counted on a real Redis")
    return harness


@pytest.mark.parametrize("harness", ["redis"], indirect=True)
def test_a_tenants_search_reads_its_own_tenants_interrupts_not_every_tenants(on_redis: Harness) -> None:
    """A user of acme searching for nothing (``search="zzz"``, a page of 1,000) costs the same few
    commands whether another tenant has 0 or 600 interrupts pending: it reads acme's index."""
    pw, client = on_redis.pw, on_redis.connection
    assert client is not None
    for _ in range(3):
        pw.start(flows.one_choice, {}, tenant="acme")
    on_redis.run_jobs()
    _, alone = counted(client, lambda: pw.list_interrupts(search="zzz", limit=1000, caller=ADA))
    for _ in range(600):
        pw.start(flows.one_choice, {}, tenant="big")
    on_redis.run_jobs()
    page, crowded = counted(client, lambda: pw.list_interrupts(search="zzz", limit=1000, caller=ADA))
    assert isinstance(page, InterruptPage) and page.items == () and not page.budget_reached
    assert crowded <= alone + 2, (alone, crowded)
    machine = pw.list_interrupts(limit=1000, caller=Caller("machine", None, "acme"))
    assert len(machine.items) == 3 and {i.tenant for i in machine.items} == {"acme"}
    assert pw.list_interrupts(tenant="big", caller=ADA).items == ()  # another tenant's: nothing


@pytest.mark.parametrize("harness", ["redis"], indirect=True)
def test_a_search_stops_at_its_read_budget_and_its_cursor_reads_on(
    on_redis: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search that matches little reads at most ``READ_BUDGET`` interrupts a request: the page
    ends short, ``budget_reached``, with a cursor; followed, the cursors find every match once."""
    pw, client = on_redis.pw, on_redis.connection
    assert client is not None
    monkeypatch.setattr(sync, "READ_BUDGET", 40)
    wanted = {pw.start(flows.one_choice, {}, tenant="acme") for _ in range(2)}
    for _ in range(100):
        pw.start(flows.two_questions, {}, tenant="acme")
    wanted.add(pw.start(flows.one_choice, {}, tenant="acme"))
    on_redis.run_jobs()
    first, cost = counted(client, lambda: pw.list_interrupts(search="pick a", limit=10, caller=ADA))
    assert isinstance(first, InterruptPage)
    assert first.budget_reached and first.next_cursor is not None and len(first.items) < 10
    assert cost <= 2 * 40 + 15, cost  # two reads (a run and its summary) for each of 40 interrupts
    found, page, pages = [i.run_id for i in first.items], first, 1
    while page.next_cursor is not None:
        page = pw.list_interrupts(search="pick a", limit=10, caller=ADA, cursor=page.next_cursor)
        found += [i.run_id for i in page.items]
        pages += 1
        assert pages < 20
    assert sorted(found) == sorted(wanted) and not page.budget_reached
    assert pages >= 3  # 103 interrupts, 40 a request
