"""Long requests (waiting listings, event streams) against a real server process: bounded per key, and
never in the way of other requests."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator

import httpx
import pytest
import redis

from parkway.http.app import API_CONNECTIONS, MAX_STREAMS_PER_KEY, MAX_STREAMS_PER_TENANT, MAX_WAITING_PER_KEY, hash_key
from tests.procs import open_fds, redis_connections, wait_for
from tests.test_api import KEY, Server, _api, _wait_status, close_api_clients, serving

KEYS = [f"load-key-{i}-" + "l" * 24 for i in range(3)]
TENANT_KEYS = [f"acme-load-key-{i}-" + "l" * 24 for i in range(3)]
"""machine keys bound to tenant acme (``loaded`` serves them too)"""
TENANT_USER_KEYS = [f"acme-user-key-{i}-" + "l" * 24 for i in range(3)]
"""user keys of tenant acme (users u0, u1, u2; ``loaded`` serves them too)"""


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    close_api_clients()


@pytest.fixture
def loaded(redis_url: str, redis_client: redis.Redis) -> Iterator[Server]:
    """The server with three more machine keys, three machine and three user keys of tenant acme, and a worker."""
    keys = "".join(f",{hash_key(k)}=machine" for k in KEYS)
    keys += "".join(f",{hash_key(k)}=machine::acme" for k in TENANT_KEYS)
    keys += "".join(f",{hash_key(k)}=user:u{i}:acme" for i, k in enumerate(TENANT_USER_KEYS))
    with serving(redis_url, keys) as srv:
        yield srv


def _client(srv: Server, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=srv.url, headers={"Authorization": f"Bearer {key}"}, timeout=40,
                             limits=httpx.Limits(max_connections=200, max_keepalive_connections=0))


def test_waiting_listings_hold_no_thread_and_a_plain_get_stays_fast(loaded: Server) -> None:
    """45 listings waiting for a pause (15 per key) leave a plain GET under 0.5 s, and the pause
    they wait for ends every one of them with its page."""

    async def scenario() -> tuple[list[float], list[int], float]:
        clients = [_client(loaded, k) for k in KEYS]
        params = {"workflow": "one_choice", "waitMs": "30000"}
        try:
            waits = [asyncio.create_task(clients[i % 3].get("/v1/interrupts", params=params)) for i in range(45)]
            await asyncio.sleep(1.0)  # every one is in and waiting (none has an item to return)
            assert not any(w.done() for w in waits), [w.result().text for w in waits if w.done()]
            plain = []
            async with _client(loaded, KEY) as api:
                for _ in range(3):
                    began = time.monotonic()
                    answer = await api.get("/v1/interrupts")
                    plain.append(time.monotonic() - began)
                    assert answer.status_code == 200
                began = time.monotonic()
                started = await api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}})
                assert started.status_code == 201
            pages = await asyncio.gather(*waits)
            woke = time.monotonic() - began
            return plain, [len(p.json()["items"]) for p in pages if p.status_code == 200], woke
        finally:
            for c in clients:
                await c.aclose()

    plain, items, woke = asyncio.run(scenario())
    assert max(plain) < 0.5, plain
    assert items == [1] * 45
    assert woke < 20, woke  # (the run must start and pause first: slow on a loaded machine)


def test_a_key_past_its_bound_of_waiting_listings_gets_429_with_retry_after(loaded: Server) -> None:
    """One key's waiting listings past MAX_WAITING_PER_KEY are refused at once with 429 and
    Retry-After; another key is not affected, and a slot is free again once a listing ends."""

    async def scenario() -> tuple[list[tuple[int, bool, float]], int, int]:
        async with _client(loaded, KEYS[0]) as one, _client(loaded, KEYS[1]) as other:
            params = {"workflow": "never_pauses", "waitMs": "5000"}

            async def listing() -> tuple[int, bool, float]:
                began = time.monotonic()
                answer = await one.get("/v1/interrupts", params=params)
                return answer.status_code, answer.headers.get("retry-after", "").isdigit(), time.monotonic() - began

            waits = [asyncio.create_task(listing()) for _ in range(MAX_WAITING_PER_KEY + 1)]
            others = await other.get("/v1/interrupts", params={"workflow": "never_pauses", "waitMs": "100"})
            done = await asyncio.gather(*waits)
            again = await one.get("/v1/interrupts", params={"workflow": "never_pauses", "waitMs": "100"})
            return done, others.status_code, again.status_code

    done, others, again = asyncio.run(scenario())
    assert sorted(status for status, _, _ in done) == [200] * MAX_WAITING_PER_KEY + [429]
    refused = next((retry, took) for status, retry, took in done if status == 429)
    assert refused[0] and refused[1] < 4.5, refused  # at once, with Retry-After
    assert others == 200 and again == 200


def _waiting_run(srv: Server) -> str:
    api = _api(srv)
    run_id: str = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}}).json()["runId"]
    _wait_status(api, run_id, "waiting")
    return run_id


async def _hold(client: httpx.AsyncClient, path: str, opened: list[int], until: asyncio.Event) -> None:
    """Open an event stream, note its status, read it until ``until`` is set (or until refused)."""
    async with client.stream("GET", path) as response:
        opened.append(response.status_code)
        if response.status_code != 200:
            assert response.headers.get("retry-after", "").isdigit()
            return
        reading = asyncio.create_task(response.aread())
        await until.wait()
        reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reading


async def _all_open(opened: list[int], n: int, until: asyncio.Event) -> None:
    """Set ``until`` once ``n`` streams have their status (then hold them a moment longer)."""
    while len(opened) < n:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    until.set()


def test_streams_of_one_key_past_its_bound_get_429(loaded: Server) -> None:
    """300 event streams from one key: MAX_STREAMS_PER_KEY open, the rest get 429 with Retry-After."""
    run_id = _waiting_run(loaded)

    async def scenario() -> list[int]:
        opened: list[int] = []
        until = asyncio.Event()
        async with _client(loaded, KEYS[0]) as client:
            await asyncio.gather(*(_hold(client, f"/v1/runs/{run_id}/events", opened, until) for _ in range(300)),
                                 _all_open(opened, 300, until))
        return opened

    opened = asyncio.run(scenario())
    assert opened.count(200) == MAX_STREAMS_PER_KEY and opened.count(429) == 300 - MAX_STREAMS_PER_KEY


def test_streams_of_one_tenants_keys_past_its_bound_get_429(loaded: Server) -> None:
    """300 event streams from three keys of one tenant (100 each, each key within its own bound):
    MAX_STREAMS_PER_TENANT open, the rest get 429 with Retry-After, and a key of no tenant still
    opens one: a tenant with many keys cannot take all of a process's streams."""
    tenant_api = _api(loaded, TENANT_KEYS[0])
    run_id: str = tenant_api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}}).json()["runId"]
    _wait_status(tenant_api, run_id, "waiting")
    assert 3 * MAX_STREAMS_PER_KEY > MAX_STREAMS_PER_TENANT >= MAX_STREAMS_PER_KEY

    async def scenario() -> tuple[list[int], list[int]]:
        opened: list[int] = []
        others: list[int] = []
        until = asyncio.Event()
        clients = [_client(loaded, k) for k in TENANT_KEYS]
        try:
            per_key = [_hold(c, f"/v1/runs/{run_id}/events", opened, until) for c in clients
                       for _ in range(MAX_STREAMS_PER_KEY)]
            await asyncio.gather(*per_key, _all_open(opened, 3 * MAX_STREAMS_PER_KEY, until),
                                 _then_one(loaded, run_id, others, opened, until))
        finally:
            for c in clients:
                await c.aclose()
        return opened, others

    opened, others = asyncio.run(scenario())
    assert opened.count(200) == MAX_STREAMS_PER_TENANT, sorted(set(opened))
    assert opened.count(429) == 3 * MAX_STREAMS_PER_KEY - MAX_STREAMS_PER_TENANT
    assert others == [200]


def test_a_tenants_users_cannot_take_its_machine_keys_streams(loaded: Server) -> None:
    """Three user keys of a tenant holding all the streams their kind may (MAX_STREAMS_PER_TENANT
    together) leave the tenant's machine key its own share: it still opens a stream, and one more
    user stream gets 429."""
    start = {"workflow": "tests.flows:one_choice", "input": {}}
    machine = _api(loaded, TENANT_KEYS[0])
    machine_run: str = machine.post("/v1/runs", json=start).json()["runId"]
    user_runs = [_api(loaded, key).post("/v1/runs", json=start).json()["runId"] for key in TENANT_USER_KEYS]
    _wait_status(machine, machine_run, "waiting")
    share = [MAX_STREAMS_PER_KEY, MAX_STREAMS_PER_KEY, MAX_STREAMS_PER_TENANT - 2 * MAX_STREAMS_PER_KEY]
    assert share[2] > 0

    async def scenario() -> tuple[list[int], list[int], list[int]]:
        opened: list[int] = []
        late: list[int] = []
        machines: list[int] = []
        until = asyncio.Event()
        clients = [_client(loaded, k) for k in TENANT_USER_KEYS]

        async def then() -> None:
            """Once the users' streams all have their status: one more user stream, then the machine's."""
            while len(opened) < MAX_STREAMS_PER_TENANT:
                await asyncio.sleep(0.05)
            await _hold(clients[2], f"/v1/runs/{user_runs[2]}/events", late, until)
            async with _client(loaded, TENANT_KEYS[0]) as client:
                await asyncio.gather(_hold(client, f"/v1/runs/{machine_run}/events", machines, until),
                                     _all_open(machines, 1, until))

        try:
            await asyncio.gather(*(_hold(c, f"/v1/runs/{run_id}/events", opened, until)
                                   for c, run_id, n in zip(clients, user_runs, share, strict=True) for _ in range(n)),
                                 then())
        finally:
            for c in clients:
                await c.aclose()
        return opened, late, machines

    opened, late, machines = asyncio.run(scenario())
    assert opened.count(200) == MAX_STREAMS_PER_TENANT, sorted(set(opened))
    assert late == [429]
    assert machines == [200]


async def _then_one(srv: Server, run_id: str, others: list[int], opened: list[int], until: asyncio.Event) -> None:
    """Once the tenant's streams all have their status, one stream of a key of no tenant."""
    while len(opened) < 3 * MAX_STREAMS_PER_KEY:
        await asyncio.sleep(0.05)
    async with _client(srv, KEYS[0]) as client:
        await _hold(client, f"/v1/runs/{run_id}/events", others, until)


def test_a_stream_sends_its_first_byte_at_once(loaded: Server) -> None:
    """A stream with nothing new to say (after the run's last event) still sends a byte at once."""
    run_id = _waiting_run(loaded)
    api = _api(loaded)
    last = ""
    with api.stream("GET", f"/v1/runs/{run_id}/events") as response:
        for line in response.iter_lines():
            last = line[4:] if line.startswith("id: ") else last
            if line == "event: interrupt":  # the run's last event while it waits
                break
    began = time.monotonic()
    with api.stream("GET", f"/v1/runs/{run_id}/events", params={"after": last}) as response:
        next(response.iter_bytes())
        first = time.monotonic() - began
    assert first < 0.5, first


def test_a_burst_of_clients_and_streams_leaves_a_small_fixed_pool_behind(loaded: Server, redis_url: str) -> None:
    """30 API clients and 30 event streams come and go, twice: within seconds of each burst the
    server is back to a small fixed pool of Redis connections and file descriptors, the second
    burst no larger than the first."""
    run_id = _waiting_run(loaded)
    pid, port = loaded.proc.pid, int(redis_url.rsplit(":", 1)[1].split("/")[0])

    async def burst() -> None:
        async def api_client(i: int) -> None:
            async with _client(loaded, KEYS[i % 3]) as client:
                for _ in range(3):
                    assert (await client.get("/v1/interrupts")).status_code == 200
                    assert (await client.get(f"/v1/runs/{run_id}")).status_code == 200

        opened: list[int] = []
        until = asyncio.Event()
        async with _client(loaded, KEY) as streams:
            await asyncio.gather(*(api_client(i) for i in range(30)), _all_open(opened, 30, until),
                                 *(_hold(streams, f"/v1/runs/{run_id}/events", opened, until) for _ in range(30)))
        assert opened == [200] * 30

    baseline_fds = open_fds(pid)
    after = []
    for _ in range(2):
        asyncio.run(burst())
        settled = wait_for(lambda: (c := redis_connections(pid, port)) <= API_CONNECTIONS
                           and open_fds(pid) <= baseline_fds + API_CONNECTIONS and (c, open_fds(pid)), 8,
                           f"connections and fds to settle (now {redis_connections(pid, port)} "
                           f"connections, {open_fds(pid)} fds, baseline {baseline_fds} fds)")
        after.append(settled)
    assert after[1][0] <= after[0][0] + 2 and after[1][1] <= after[0][1] + 2, after
