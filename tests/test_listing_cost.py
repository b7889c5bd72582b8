"""What a listing costs: a caller bound to a tenant reads its tenant's index, not every tenant's; a
search reads a bounded number of interrupts per request and says when it stopped there; a waiting
listing of one tenant is not woken by another tenant's pauses. Counted in Redis commands
(``INFO commandstats`` deltas) on a real Redis."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis

from parkway import InterruptPage, Parkway, Settings
from parkway.adapters.redis import keys
from parkway.client import listings as client_listings
from parkway.runtime.authority import Caller
from tests import flows
from tests.conftest import SECRET, Harness
from tests.procs import RedisServer, Worker, wait_for

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


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server of this module's own: its command counts are this module's alone (the
    suite's Redis serves other tests at once)."""
    srv = RedisServer(tmp_path_factory.mktemp("listing-cost"), appendonly=False)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def on_redis(server: RedisServer) -> Iterator[Harness]:
    client = redis.Redis.from_url(server.url)
    client.flushdb()
    settings = Settings(redis_url=server.url, secret=SECRET)
    with Parkway(settings) as pw:
        yield Harness("redis", pw, settings, client)
    client.close()


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


def test_a_search_stops_at_its_read_budget_and_its_cursor_reads_on(
    on_redis: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search that matches little reads at most ``READ_BUDGET`` interrupts a request: the page
    ends short, ``budget_reached``, with a cursor; followed, the cursors find every match once."""
    pw, client = on_redis.pw, on_redis.connection
    assert client is not None
    monkeypatch.setattr(client_listings, "READ_BUDGET", 40)
    wanted = {pw.start(flows.one_choice, {}, tenant="acme") for _ in range(2)}
    for _ in range(100):
        pw.start(flows.two_questions, {}, tenant="acme")
    wanted.add(pw.start(flows.one_choice, {}, tenant="acme"))
    on_redis.run_jobs()
    first, cost = counted(client, lambda: pw.list_interrupts(search="pick a", limit=10, caller=ADA))
    assert isinstance(first, InterruptPage)
    assert first.budget_reached and first.next_cursor is not None and len(first.items) < 10
    # two reads (a run and its summary) for each of 40 interrupts, and per batch of 11 the read function's
    # few commands (format 4: the single zset, the bucket the cursor is in, the next: page.lua)
    assert cost <= 2 * 40 + 15 + 4 * 4, cost
    found, page, pages = [i.run_id for i in first.items], first, 1
    while page.next_cursor is not None:
        page = pw.list_interrupts(search="pick a", limit=10, caller=ADA, cursor=page.next_cursor)
        found += [i.run_id for i in page.items]
        pages += 1
        assert pages < 20
    assert sorted(found) == sorted(wanted) and not page.budget_reached
    assert pages >= 3  # 103 interrupts, 40 a request
def listings(client: redis.Redis) -> int:
    """Reads of an index of pending interrupts so far (``page.lua``, called with ``FCALL_RO``: no
    transition is)."""
    return int(client.info("commandstats").get("cmdstat_fcall_ro", {}).get("calls", 0))


def test_a_waiting_listing_is_not_woken_by_another_tenants_pause(on_redis: Harness) -> None:
    """A user of acme waiting for a pause lists nothing again on 30 pauses of another tenant, and
    wakes for acme's own."""
    pw, client = on_redis.pw, on_redis.connection
    assert client is not None
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(lambda: pw.list_interrupts(wait_ms=15_000, caller=ADA))
        time.sleep(0.3)
        before = listings(client)
        for _ in range(30):
            pw.start(flows.one_choice, {}, tenant="big")
            on_redis.run_jobs()
        time.sleep(0.3)
        assert not future.done()
        assert listings(client) == before
        mine = pw.start(flows.one_choice, {}, tenant="acme")
        on_redis.run_jobs()
        page = future.result(timeout=10)
    assert [i.run_id for i in page.items] == [mine]


def test_a_pause_feed_entry_without_a_tenant_wakes_every_tenants_listing(on_redis: Harness) -> None:
    """An entry written before entries named their tenant (no ``t``) may be anyone's: a tenant's
    waiting listing wakes and lists again; an entry of a run without a tenant (``t`` empty) does
    not wake it."""
    pw, client = on_redis.pw, on_redis.connection
    assert client is not None
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(lambda: pw.list_interrupts(wait_ms=3_000, caller=ADA))
        time.sleep(0.3)
        before = listings(client)
        client.xadd(keys.pauses(), {"w": "one_choice", "r": "someone", "c": "1", "t": ""})
        time.sleep(0.3)
        untouched = listings(client)
        client.xadd(keys.pauses(), {"w": "one_choice", "r": "older", "c": "1"})
        time.sleep(0.3)
        woken = listings(client)
        assert future.result(timeout=10).items == ()
    assert untouched == before and woken == before + 1


def test_a_waiting_listing_over_http_is_not_woken_by_another_tenants_pause(server: RedisServer) -> None:
    """`parkway serve`: a user key's waiting listing (``waitMs``) lists nothing again while 20 runs
    of another tenant pause, and returns its own tenant's pause."""
    import httpx

    from tests.test_api import KEY, USER_KEY, Server

    client = redis.Redis.from_url(server.url)
    client.flushdb()
    srv, worker = Server(server.url), Worker(server.url, SECRET)
    got: list[httpx.Response] = []
    try:
        with httpx.Client(base_url=srv.url, timeout=30) as api:
            machine = {"Authorization": f"Bearer {KEY}"}

            def wait() -> None:
                got.append(api.get("/v1/interrupts", params={"waitMs": 20_000},
                                   headers={"Authorization": f"Bearer {USER_KEY}"}))

            waiter = threading.Thread(target=wait)
            waiter.start()
            time.sleep(0.5)
            before = listings(client)
            others = [api.post("/v1/runs", headers=machine, json={
                "workflow": "tests.flows:one_choice", "input": {}, "tenant": "big"}).json()["runId"] for _ in range(20)]
            wait_for(lambda: all(api.get(f"/v1/runs/{r}", headers=machine).json()["status"] == "waiting"
                                 for r in others), 30, "the other tenant's runs to park")
            time.sleep(0.3)
            assert listings(client) == before and not got
            mine = api.post("/v1/runs", headers=machine, json={
                "workflow": "tests.flows:one_choice", "input": {}, "tenant": "acme"}).json()["runId"]
            waiter.join(25)
        assert [i["runId"] for i in got[0].json()["items"]] == [mine]
    finally:
        worker.stop()
        srv.stop()
        client.close()


def test_a_waiting_listing_over_shards_is_not_woken_by_another_tenants_pause(tmp_path: Path) -> None:
    """Over two shards, a user of acme waiting for a pause lists nothing again on pauses of another
    tenant on either shard's feed, and lists again on one of acme's."""
    servers = []
    for i in range(2):
        (tmp_path / f"s{i}").mkdir()
        servers.append(RedisServer(tmp_path / f"s{i}", appendonly=False))
        servers[-1].start()
    clients = [redis.Redis.from_url(s.url) for s in servers]
    try:
        with Parkway(Settings(shards=(servers[0].url, servers[1].url), secret=SECRET)) as pw, \
                ThreadPoolExecutor(1) as pool:
            future = pool.submit(lambda: pw.list_interrupts(wait_ms=3_000, caller=ADA))
            time.sleep(0.5)
            before = [listings(c) for c in clients]
            for c in clients:
                for n in range(5):
                    c.xadd(keys.pauses(), {"w": "one_choice", "r": f"big~{n}", "c": "1", "t": "big"})
            time.sleep(0.5)
            assert [listings(c) for c in clients] == before
            clients[1].xadd(keys.pauses(), {"w": "one_choice", "r": "acme~x", "c": "1", "t": "acme"})
            time.sleep(0.5)
            assert [listings(c) for c in clients] == [n + 1 for n in before]
            assert future.result(timeout=10).items == ()
    finally:
        for c in clients:
            c.close()
        for s in servers:
            s.stop()
