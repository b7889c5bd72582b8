"""Long requests (waiting listings, event streams) against a real server process: bounded per key, and
never in the way of other requests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import pytest
import redis

from parkway.api import MAX_WAITING_PER_KEY, hash_key
from tests.test_api import KEY, Server, close_api_clients, serving

KEYS = [f"load-key-{i}-" + "l" * 24 for i in range(3)]


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    close_api_clients()


@pytest.fixture
def loaded(redis_url: str, redis_client: redis.Redis) -> Iterator[Server]:
    """The server with three more machine keys, and a worker."""
    with serving(redis_url, "".join(f",{hash_key(k)}=machine" for k in KEYS)) as srv:
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
    assert woke < 10, woke


def test_a_key_past_its_bound_of_waiting_listings_gets_429_with_retry_after(loaded: Server) -> None:
    """One key's waiting listings past MAX_WAITING_PER_KEY are refused at once with 429 and
    Retry-After; another key is not affected, and a slot is free again once a listing ends."""

    async def scenario() -> tuple[list[int], int, int]:
        async with _client(loaded, KEYS[0]) as one, _client(loaded, KEYS[1]) as other:
            params = {"workflow": "never_pauses", "waitMs": "2000"}
            waits = [asyncio.create_task(one.get("/v1/interrupts", params=params))
                     for _ in range(MAX_WAITING_PER_KEY)]
            await asyncio.sleep(0.5)
            refused = await one.get("/v1/interrupts", params=params)
            assert refused.headers.get("retry-after", "").isdigit(), refused.headers
            others = await other.get("/v1/interrupts", params={"workflow": "never_pauses", "waitMs": "100"})
            statuses = [r.status_code for r in await asyncio.gather(*waits)]
            again = await one.get("/v1/interrupts", params={"workflow": "never_pauses", "waitMs": "100"})
            return statuses + [others.status_code], refused.status_code, again.status_code

    statuses, refused, again = asyncio.run(scenario())
    assert statuses == [200] * (MAX_WAITING_PER_KEY + 1)
    assert refused == 429
    assert again == 200
