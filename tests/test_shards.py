"""Shards (issue 24): runs placed on two Redis servers by their run id's hash tag, one client over
both (``PARKWAY_SHARDS``): started on both, listed as one page stream with one cursor (no gaps, no
repeats), resumed through the router, each shard served by its own worker (``--shard K``), sessions with
their branch runs on their id's shard, and a process with another list of shards refused."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from parkway import AsyncParkway, Caller, ConfigError, Parkway, Settings
from parkway.adapters.redis import keys
from parkway.adapters.redis.connection.shards import (
    BUCKETS,
    ShardedDispatcher,
    ShardedStore,
    bucket_of,
    default_table,
    split_shards,
)
from tests import flows
from tests import session_flows as sf
from tests.conftest import SECRET
from tests.procs import ROOT, RedisServer, Worker, wait_for

ADA = Caller("user", "ada", "acme")


def test_shards_split_on_schemes_and_buckets_map_to_contiguous_shards() -> None:
    """PARKWAY_SHARDS splits where a scheme starts (a Sentinel spec keeps its commas); 1,024 buckets in
    equal ranges; a run's children and a session's branch runs share its bucket."""
    spec = "redis+sentinel://a:1,b:2/m/0"
    assert split_shards(f"redis://x:1/0, {spec},redis://y:2/3") == ("redis://x:1/0", spec, "redis://y:2/3")
    table = default_table(2)
    assert len(table) == BUCKETS and table.count(0) == table.count(1) == BUCKETS // 2
    assert bucket_of("acme~order-1--abc--def") == bucket_of("acme~order-1")
    assert bucket_of(keys.tagged_run_id("sess-1", "ff00")) == bucket_of("sess-1")


@pytest.mark.slow
def test_runs_on_two_shards_list_as_one_stream_resume_through_the_router_and_each_worker_serves_its_shard(
    two: tuple[RedisServer, RedisServer],
) -> None:
    urls = (two[0].url, two[1].url)
    env = {"PARKWAY_SHARDS": ",".join(urls)}
    settings = Settings(shards=urls, secret=SECRET)
    with Parkway(settings) as pw:
        store = pw.store
        assert isinstance(store, ShardedStore)
        run_ids = [pw.start(flows.one_choice, {"n": n}) for n in range(24)]
        on = {r: store.shard_of(r) for r in run_ids}
        assert set(on.values()) == {0, 1}, on
        assert pw.start(flows.one_choice, {"n": 0}, run_id="fixed-1") == "fixed-1"  # a caller-chosen id too
        run_ids.append("fixed-1")
        on["fixed-1"] = store.shard_of("fixed-1")
        for r, shard in on.items():  # each run's records on its shard alone
            with redis.Redis.from_url(urls[shard]) as mine, redis.Redis.from_url(urls[1 - shard]) as other:
                assert mine.exists(keys.run(r)) and not other.exists(keys.run(r))

        first = Worker(urls[0], SECRET, "--shard", "0", env=env)
        try:
            waiting = {r for r in run_ids if on[r] == 0}
            wait_for(lambda: all(pw.get_run(r).status.value == "waiting" for r in waiting), 30, "shard 0's runs")
            assert all(pw.get_run(r).status.value == "queued" for r in run_ids if on[r] == 1)  # not served
            second = Worker(urls[1], SECRET, "--shard", "1", env=env)
            try:
                wait_for(lambda: all(pw.get_run(r).status.value == "waiting" for r in run_ids), 30, "every run")

                # one page stream over both shards: newest first, pages of 4, one cursor
                seen: list[str] = []
                created: list[int] = []
                cursor = None
                while True:
                    page = pw.list_interrupts(limit=4, cursor=cursor, include_tokens=True)
                    seen += [i.run_id for i in page.items]
                    created += [i.created_at for i in page.items]
                    cursor = page.next_cursor
                    if cursor is None:
                        break
                assert sorted(seen) == sorted(run_ids) and len(seen) == len(set(seen))
                assert created == sorted(created, reverse=True)
                expiring = pw.list_interrupts(order="expiring", limit=100).items
                assert sorted(i.run_id for i in expiring) == sorted(run_ids)

                # resumed through the router, each on its shard, then worked there
                for item in pw.list_interrupts(limit=100, include_tokens=True).items:
                    assert pw.resume(item.resume_token or "", selected="red").accepted
                wait_for(lambda: all(pw.get_run(r).status.value == "completed" for r in run_ids), 30, "every run")
                ended: list[str] = []
                cursor = None
                while True:
                    page = pw.list_interrupts(status="resolved", limit=5, cursor=cursor)
                    ended += [i.run_id for i in page.items]
                    if (cursor := page.next_cursor) is None:
                        break
                assert sorted(ended) == sorted(run_ids)
                tallies = store.tallies(0)
                counted = tallies.counters.items()
                waits = sum(v for k, v in counted if k.startswith("wait:one_choice:") and not k.endswith("_ms"))
                assert waits == len(run_ids)  # the wait histogram counts the accepted resumes, summed over shards
                # a listing that waits watches both shards' pause feeds: a pause on shard 1 ends it
                late = next(f"late-{n}" for n in range(100) if store.shard_of(f"late-{n}") == 1)
                got: list[Any] = []
                waiter = threading.Thread(target=lambda: got.append(pw.list_interrupts(wait_ms=20_000)))
                waiter.start()
                time.sleep(0.3)
                started = time.monotonic()
                pw.start(flows.one_choice, {}, run_id=late)
                waiter.join(25)
                assert time.monotonic() - started < 10 and [i.run_id for i in got[0].items] == [late]
                # a session lives on its id's shard, its branch runs with it, served by that shard's worker
                # (ids are random: open until each shard holds two, as four alone miss one shard 1 time in 8)
                by_shard: dict[int, list[str]] = {0: [], 1: []}
                for _ in range(40):
                    sid = pw.sessions.open(sf.echo, owner="ada", tenant="acme")
                    by_shard[store.shard_of(sid)].append(sid)
                    if min(len(ids) for ids in by_shard.values()) >= 2:
                        break
                sessions = by_shard[0][:2] + by_shard[1][:2]
                assert {store.shard_of(sid) for sid in sessions} == {0, 1} and len(sessions) == 4
                for sid in sessions:
                    sent = pw.sessions.send(sid, "hello", caller=ADA)
                    assert store.shard_of(sent.run_id) == store.shard_of(sid)
                    wait_for(lambda r=sent.run_id: pw.get_run(r).status.value == "completed", 30, "the reply")
                    view = pw.sessions.get(sid, caller=ADA)
                    assert view.messages[view.head].content == "you said hello"
                forked = pw.fork(run_ids[0], step=0)
                assert bucket_of(forked) == bucket_of(run_ids[0])
            finally:
                second.stop()
        finally:
            first.stop()

    with pytest.raises(ConfigError, match="shard table"):  # the same servers, in another order
        Parkway(Settings(shards=(urls[1], urls[0]), secret=SECRET))


def _shard_env(urls: tuple[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARKWAY_")}
    return {**env, "PARKWAY_SHARDS": ",".join(urls), "PARKWAY_SECRET": SECRET, "PYTHONPATH": str(ROOT)}


def _started_on_both(pw: Parkway, n: int = 8) -> dict[str, int]:
    """Runs started until each shard holds at least two (ids are random), with their shard."""
    store = pw.store
    assert isinstance(store, ShardedStore)
    on: dict[str, int] = {}
    for k in range(40):
        run_id = pw.start(flows.one_choice, {"n": k}, tenant="acme", owner="ada")
        on[run_id] = store.shard_of(run_id)
        if len(on) >= n and min(list(on.values()).count(s) for s in (0, 1)) >= 2:
            break
    assert set(on.values()) == {0, 1}, on
    return on


@pytest.mark.slow
def test_parkway_reconcile_with_shards_reconciles_every_shard(two: tuple[RedisServer, RedisServer]) -> None:
    """`parkway reconcile` under PARKWAY_SHARDS (a process, two redis-servers): the lost jobs of
    both shards are enqueued again, each on its own shard's queue (it used to exit 1: "due runs per
    shard")."""
    urls = (two[0].url, two[1].url)
    with Parkway(Settings(shards=urls, secret=SECRET)) as pw:
        on = _started_on_both(pw)
        for url in urls:  # every job lost before a worker took it, and its outbox entry old
            with redis.Redis.from_url(url) as r:
                r.delete(*r.keys("rq:*"))
                r.zadd(keys.outbox(), {m: 0 for m in r.zrange(keys.outbox(), 0, -1)})
        done = subprocess.run([sys.executable, "-m", "parkway.cli", "reconcile"], cwd=ROOT, env=_shard_env(urls),
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert sorted(report["redispatched"]) == sorted(on)
        dispatcher = pw.backend.dispatcher
        assert isinstance(dispatcher, ShardedDispatcher)
        for run_id, shard in on.items():  # each job again on its own shard's queue
            assert dispatcher.dispatchers[shard].is_pending(run_id, 0) or dispatcher.dispatchers[shard].is_pending(
                run_id, 1), run_id
            with redis.Redis.from_url(urls[1 - shard]) as other:
                assert not any(run_id.encode() in k for k in other.keys("rq:job:*"))


@pytest.mark.slow
def test_the_async_client_pages_every_shard_with_one_cursor(two: tuple[RedisServer, RedisServer]) -> None:
    """AsyncParkway over shards: interrupts and runs paged as the sync client pages them (one
    cursor over both shards, no gaps, no repeats), every filter through the router, and a waiting
    listing ended by a pause on either shard."""
    urls = (two[0].url, two[1].url)
    env = {"PARKWAY_SHARDS": ",".join(urls)}
    workers = [Worker(urls[k], SECRET, "--shard", str(k), env=env) for k in (0, 1)]

    async def check(apw: AsyncParkway, on: dict[str, int]) -> None:
        seen: list[str] = []
        cursor = None
        while True:
            page = await apw.list_interrupts(limit=3, cursor=cursor)
            seen += [i.run_id for i in page.items]
            if (cursor := page.next_cursor) is None:
                break
        assert sorted(seen) == sorted(on) and len(seen) == len(set(seen))
        runs: list[str] = []
        cursor = None
        while True:
            ran = await apw.list_runs(limit=3, cursor=cursor, status="waiting")
            runs += [r.run_id for r in ran.items]
            if (cursor := ran.next_cursor) is None:
                break
        assert sorted(runs) == sorted(on) and len(runs) == len(set(runs))
        for filters in ({"tenant": "acme"}, {"workflow": "one_choice"}, {"order": "expiring"},
                        {"created_after": 0}, {"workflow_prefix": "one_"}, {"caller": ADA}):
            listed = await apw.list_interrupts(limit=100, **filters)
            assert sorted(i.run_id for i in listed.items) == sorted(on), filters
        for shard in (0, 1):  # a waiting listing ends on a pause of either shard
            late = next(f"late{shard}-{n}" for n in range(200) if apw.sync.store.shard_of(f"acme~late{shard}-{n}")
                        == shard)
            waiting = asyncio.create_task(apw.list_interrupts(wait_ms=20_000, run_id=f"acme~{late}"))
            await asyncio.sleep(0.3)
            await apw.start(flows.one_choice, {}, run_id=late, tenant="acme")
            got = await asyncio.wait_for(waiting, 25)
            assert [i.run_id for i in got.items] == [f"acme~{late}"]
            page = await apw.list_interrupts(wait_ms=20_000)
            assert page.items  # something pending: no wait

    try:
        with Parkway(Settings(shards=urls, secret=SECRET)) as pw:
            on = _started_on_both(pw)
            wait_for(lambda: all(pw.get_run(r).status.value == "waiting" for r in on), 30, "every run to park")
            asyncio.run(check(AsyncParkway(client=pw), on))
    finally:
        for w in workers:
            w.stop()


@pytest.mark.slow
def test_parkway_serve_over_shards_answers_every_route_across_both_shards(
    two: tuple[RedisServer, RedisServer],
) -> None:
    """`parkway serve` (a uvicorn process) with PARKWAY_SHARDS: runs started over HTTP land on both
    shards; interrupts and runs page with one cursor over both; a waiting listing ends on a pause of
    either shard; a run's event stream, an answer by request id, /metrics and /healthz work; and the
    pause feed (``/v1/interrupts/events``, what the inbox page follows) sends the pauses of every shard,
    from a position and live (it answered 500: the router has no one Redis connection)."""
    import httpx

    from tests.test_api import KEY, Server
    from tests.test_live_feeds import _frames, paused_until_caught_up
    from tests.test_metrics import METRICS_KEYS, SCRAPER

    urls = (two[0].url, two[1].url)
    env = {"PARKWAY_SHARDS": ",".join(urls)}
    workers = [Worker(urls[k], SECRET, "--shard", str(k), env=env) for k in (0, 1)]
    srv = Server(urls[0], METRICS_KEYS, PARKWAY_SHARDS=",".join(urls))
    try:
        with Parkway(Settings(shards=urls, secret=SECRET)) as pw, httpx.Client(
            base_url=srv.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=30
        ) as api:
            store = pw.store
            assert isinstance(store, ShardedStore)
            on: dict[str, int] = {}
            for k in range(40):
                made = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {"n": k},
                                                  "tenant": "acme"})
                assert made.status_code == 201, made.text
                on[made.json()["runId"]] = store.shard_of(made.json()["runId"])
                if len(on) >= 6 and min(list(on.values()).count(s) for s in (0, 1)) >= 2:
                    break
            assert set(on.values()) == {0, 1}
            wait_for(lambda: all(api.get(f"/v1/runs/{r}").json()["status"] == "waiting" for r in on), 30, "parked")

            def paged(path: str, **params: Any) -> list[str]:
                out: list[str] = []
                cursor = None
                while True:
                    body = api.get(path, params={**params, "limit": 2, **({"cursor": cursor} if cursor else {})})
                    assert body.status_code == 200, body.text
                    out += [i["runId"] for i in body.json()["items"]]
                    if (cursor := body.json().get("nextCursor")) is None:
                        return out

            assert sorted(paged("/v1/interrupts")) == sorted(on)
            assert sorted(paged("/v1/interrupts", tenant="acme")) == sorted(on)
            assert sorted(paged("/v1/runs")) == sorted(on)
            assert sorted(paged("/v1/runs", status="waiting", workflow="one_choice")) == sorted(on)
            assert api.get("/healthz").status_code == 200
            metrics = httpx.get(f"{srv.url}/metrics", headers={"Authorization": f"Bearer {SCRAPER}"}, timeout=30)
            assert metrics.status_code == 200, metrics.text
            waiting = [line for line in metrics.text.splitlines() if line.startswith("parkway_interrupts_pending")]
            assert waiting and sum(float(line.split()[-1]) for line in waiting) == len(on), waiting
            # the pause feed from its start: every shard's pauses
            seen = paused_until_caught_up(srv.url, KEY, after="0")
            assert sorted(e["runId"] for e in seen) == sorted(on)
            # each frame's id is a position on both shards: picked up from any, the rest, once each
            ids: list[tuple[str, str]] = []
            with httpx.stream("GET", f"{srv.url}/v1/interrupts/events", params={"after": "0"},
                              headers={"Authorization": f"Bearer {KEY}"}, timeout=30) as stream:
                frame_id = ""
                for line in stream.iter_lines():
                    if line.startswith("id: "):
                        frame_id = line[4:]
                    elif line.startswith("data: "):
                        ids.append((frame_id, json.loads(line[6:])["runId"]))
                    elif line in (": caught up", ": waiting"):
                        break
            assert all(len(i.split(",")) == 2 for i, _ in ids), ids
            for k in range(len(ids)):
                rest = paused_until_caught_up(srv.url, KEY, after=ids[k][0])
                assert [e["runId"] for e in rest] == [r for _, r in ids[k + 1:]], k
            assert api.get("/v1/interrupts/events", params={"after": "0,0,0"}).status_code == 422
            for shard in (0, 1):
                late = next(f"late{shard}-{n}" for n in range(200) if store.shard_of(f"acme~late{shard}-{n}") == shard)
                # a waiting listing, and the live pause feed, each ended by this shard's pause
                got: list[Any] = []
                waiter = threading.Thread(target=lambda r=late, out=got: out.append(api.get(
                    "/v1/interrupts", params={"waitMs": 20_000, "runId": f"acme~{r}"})))
                with httpx.stream("GET", f"{srv.url}/v1/interrupts/events", headers={"Authorization": f"Bearer {KEY}"},
                                  timeout=30) as live:
                    waiter.start()
                    time.sleep(0.3)
                    made = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {},
                                                      "tenant": "acme", "runId": late})
                    assert made.status_code == 201, made.text
                    event, data = next(_frames(live))
                    assert (event, json.loads(data)["runId"]) == ("interrupt.paused", f"acme~{late}")
                waiter.join(25)
                assert [i["runId"] for i in got[0].json()["items"]] == [f"acme~{late}"]
                on[f"acme~{late}"] = shard
            # a run's event stream and an answer by request id, on each shard
            for shard in (0, 1):
                run_id = next(r for r, s in on.items() if s == shard)
                item = api.get("/v1/interrupts", params={"runId": run_id}).json()["items"][0]
                answered = api.post(f"/v1/interrupts/{item['requestId']}/answer", json={"selected": "red"})
                assert answered.status_code == 200 and answered.json()["outcome"] == "accepted", answered.text
                with httpx.stream("GET", f"{srv.url}/v1/runs/{run_id}/events",
                                  headers={"Authorization": f"Bearer {KEY}"}, timeout=30) as events:
                    kinds = [event for event, _ in _frames(events)]
                assert kinds[0] == "run.started" and "run.completed" in kinds and kinds[-1] == "done", kinds
            # a session's event stream, on each shard (its id's)
            opened: dict[int, str] = {}
            for _ in range(40):
                made = api.post("/v1/sessions", json={"agent": "tests.session_flows:echo", "owner": "ada",
                                                      "tenant": "acme"})
                assert made.status_code == 201, made.text
                opened.setdefault(store.shard_of(made.json()["sessionId"]), made.json()["sessionId"])
                if len(opened) == 2:
                    break
            for sid in opened.values():
                with httpx.stream("GET", f"{srv.url}/v1/sessions/{sid}/stream",
                                  headers={"Authorization": f"Bearer {KEY}"}, timeout=30) as stream:
                    assert next(_frames(stream))[0] == "session.opened"
    finally:
        out = srv.stop()
        for w in workers:
            w.stop()
    assert "Traceback" not in out, out[-3000:]


def test_a_filtered_run_listing_over_shards_skips_no_run_a_shard_had_not_read_yet(
    two: tuple[RedisServer, RedisServer],
) -> None:
    """A run listing whose filter leaves a shard's page short at its scan bound (its cursor then
    stops where it read to, not at a run) goes on from there on that shard: the merged cursor never
    passes a shard's own. Before, it followed the other shard's last run, past runs the first had
    not read (here the one matching run of shard 0, never listed)."""
    from parkway.runtime.store import RunIndexQuery

    urls = (two[0].url, two[1].url)
    with Parkway(Settings(shards=urls, secret=SECRET)) as pw:
        store = pw.store
        assert isinstance(store, ShardedStore)

        def on(shard: int, stem: str) -> str:
            return next(f"{stem}-{n}" for n in range(500) if store.shard_of(f"{stem}-{n}") == shard)

        def start(workflow: Any, shard: int, stem: str) -> str:
            run_id = pw.start(workflow, {}, run_id=on(shard, stem))
            time.sleep(0.003)  # created in this order, in distinct milliseconds
            return run_id

        older = [start(flows.one_choice, 1, f"b{k}") for k in range(3)]  # shard 1, oldest
        middle = start(flows.one_choice, 0, "a0")  # shard 0
        for k in range(5):  # shard 0, newest: of another workflow
            start(flows.two_questions, 0, f"x{k}")
        listed: list[str] = []
        cursor = None
        for _ in range(20):
            page = store.list_runs(RunIndexQuery(limit=2, cursor=cursor, now=0, workflow="one_choice", scan=3))
            listed += [r.run_id for r in page.items]
            if (cursor := page.next_cursor) is None:
                break
        assert listed == [middle, *reversed(older)]


def test_a_redis_url_outside_the_shards_is_refused_not_ignored(two: tuple[RedisServer, RedisServer]) -> None:
    """With PARKWAY_SHARDS set, `--redis-url` naming another Redis (or, for a worker, another shard
    than its --shard) is refused with what to do; it was ignored, and the command read the shards."""
    urls = (two[0].url, two[1].url)

    def parkway(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "parkway.cli", *args], cwd=ROOT, env=_shard_env(urls),
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)

    elsewhere = "redis://127.0.0.1:1/0"
    refused = parkway("interrupts", "--redis-url", elsewhere)
    assert refused.returncode == 1 and "PARKWAY_SHARDS" in refused.stderr, refused.stderr
    assert parkway("interrupts", "--redis-url", urls[1]).returncode == 0  # one of them: every shard is read
    wrong = parkway("worker", "--burst", "--redis-url", urls[0], "--shard", "1")
    assert wrong.returncode == 1 and "shard 1" in wrong.stderr, wrong.stderr
    assert parkway("worker", "--burst", "--redis-url", urls[1], "--shard", "1").returncode == 0


def _blocked_reads(url: str) -> int:
    with redis.Redis.from_url(url) as r:
        return sum(1 for c in r.client_list() if c.get("cmd") == "xread")


@pytest.mark.slow
def test_waiting_listings_over_shards_share_one_blocking_read_per_shard(two: tuple[RedisServer, RedisServer]) -> None:
    """Many listings waiting at once (``wait_ms``, the HTTP server's waitMs listings and pause feeds
    over shards) hold one blocking read of each shard's pause feed between them, not one connection
    each per shard (12 waiting listings held 12 XREADs on each shard, out of the pool every call of
    the process draws from); a pause on either shard still ends each of them."""
    urls = (two[0].url, two[1].url)
    worker = Worker(urls[1], SECRET, "--shard", "1", env={"PARKWAY_SHARDS": ",".join(urls)})
    try:
        with Parkway(Settings(shards=urls, secret=SECRET)) as pw:
            store = pw.store
            assert isinstance(store, ShardedStore)
            got: list[Any] = []
            waiters = [threading.Thread(target=lambda: got.append(pw.list_interrupts(wait_ms=20_000, tenant="acme")))
                       for _ in range(12)]
            for w in waiters:
                w.start()
            # shard 0 has no worker: every blocked read there is a waiting listing's
            wait_for(lambda: _blocked_reads(urls[0]) >= 1, 20, "the waits to block on shard 0")
            time.sleep(1)  # every waiter is waiting by now (they started together)
            assert _blocked_reads(urls[0]) == 1
            late = next(f"late-{n}" for n in range(200) if store.shard_of(f"acme~late-{n}") == 1)
            pw.start(flows.one_choice, {}, run_id=late, tenant="acme")  # parks on shard 1, served there
            for w in waiters:
                w.join(25)
            assert len(got) == 12 and all([i.run_id for i in page.items] == [f"acme~{late}"] for page in got)
    finally:
        worker.stop()


@pytest.mark.slow
def test_serve_over_shards_waits_for_pauses_without_holding_its_threads(two: tuple[RedisServer, RedisServer]) -> None:
    """`parkway serve` over shards: 45 waitMs listings (three keys) hold none of the server's worker
    threads while they wait, as on one Redis (each held one for its whole wait: with the 40 of the
    pool taken, a plain read of a run waited behind them), and a pause on either shard ends those
    that wait for it."""
    import httpx

    from parkway.http.app import hash_key
    from tests.test_api import KEY, Server

    more = ["machine-key-2-" + "m" * 24, "machine-key-3-" + "n" * 24]
    urls = (two[0].url, two[1].url)
    srv = Server(urls[0], "".join(f",{hash_key(k)}=machine" for k in more), PARKWAY_SHARDS=",".join(urls))
    workers = [Worker(urls[k], SECRET, "--shard", str(k), env={"PARKWAY_SHARDS": ",".join(urls)}) for k in (0, 1)]
    try:
        with Parkway(Settings(shards=urls, secret=SECRET)) as pw:
            store = pw.store
            assert isinstance(store, ShardedStore)
            run_id = pw.start(flows.one_choice, {}, tenant="acme")
            for shard, keys_ in ((0, [KEY, *more]), (1, [KEY])):  # a round on each shard
                tenant = f"other{shard}"
                got: list[httpx.Response] = []

                def wait(key: str, tenant: str = tenant, got: list[httpx.Response] = got) -> None:
                    got.append(httpx.get(f"{srv.url}/v1/interrupts", params={"waitMs": 20_000, "tenant": tenant},
                                         headers={"Authorization": f"Bearer {key}"}, timeout=40))

                waiters = [threading.Thread(target=wait, args=(key,)) for key in keys_ for _ in range(15)]
                for w in waiters:
                    w.start()
                time.sleep(2)  # they are all waiting by now
                read = httpx.get(f"{srv.url}/v1/runs/{run_id}", headers={"Authorization": f"Bearer {KEY}"}, timeout=8)
                assert read.status_code == 200 and not got
                # a pause of the tenant they list, on this shard, ends them all
                late = next(f"o-{n}" for n in range(200) if store.shard_of(f"{tenant}~o-{n}") == shard)
                pw.start(flows.one_choice, {}, run_id=late, tenant=tenant)
                for w in waiters:
                    w.join(30)
                assert len(got) == len(waiters) and all(
                    [i["runId"] for i in r.json()["items"]] == [f"{tenant}~{late}"] for r in got), got[0].text
    finally:
        out = srv.stop()
        for w in workers:
            w.stop()
    assert "Traceback" not in out, out[-3000:]


def test_a_position_past_the_pause_feeds_end_wakes_no_other_waiting_listing(
    two: tuple[RedisServer, RedisServer],
) -> None:
    """The pause feed's ``after`` is a caller's: a stream asking from past the feeds' end
    (9999999999999-0) waits for itself alone. Before, it made every other waiting listing of the
    process return at once, to list again, in a loop; and a pause still ends a waiting listing."""
    urls = (two[0].url, two[1].url)
    with Parkway(Settings(shards=urls, secret=SECRET)) as pw:
        store = pw.store
        assert isinstance(store, ShardedStore)
        far = threading.Thread(target=lambda: store.read_pauses("9999999999999-0", 6000, 100))
        far.start()
        time.sleep(0.3)
        started = time.monotonic()
        assert pw.list_interrupts(wait_ms=2000).items == ()
        assert time.monotonic() - started >= 1.9  # it waited its 2 s: nothing woke it
        late = next(f"late-{n}" for n in range(200) if store.shard_of(f"late-{n}") == 1)
        got: list[Any] = []
        waiter = threading.Thread(target=lambda: got.append(store.read_pauses("0-0,0-0", 20_000, 100)))
        waiter.start()
        time.sleep(0.3)
        with redis.Redis.from_url(urls[1]) as r:  # a pause, as the script writes it
            r.xadd(keys.pauses(), {"w": "one_choice", "r": late, "c": "0"})
        waiter.join(25)
        entries, position, ended = got[0]
        assert [f["r"] for _, f in entries] == [late] and ended and position.split(",")[0] == "0-0"
        far.join(10)


@pytest.mark.slow
def test_a_session_filtered_listing_over_shards_asks_only_the_sessions_shard(
    two: tuple[RedisServer, RedisServer],
) -> None:
    """A session and its branch runs share its id's shard, so a listing by session reads that shard
    alone: it answers with the other shard down (it asked every shard, and raised StoreUnavailable);
    over HTTP, a waitMs listing by session waits on that shard's pause feed and ends at the pause."""
    import httpx

    from tests.test_api import KEY, Server

    urls = (two[0].url, two[1].url)
    srv = Server(urls[0], PARKWAY_SHARDS=",".join(urls))
    try:
        with Parkway(Settings(shards=urls, secret=SECRET)) as pw:
            store = pw.store
            assert isinstance(store, ShardedStore)
            sid = next(s for _ in range(64) if store.shard_of(s := pw.sessions.open(sf.asking, owner="ada",
                                                                                        tenant="acme")) == 0)
            sent = pw.sessions.send(sid, "hello", caller=ADA)
            got: list[httpx.Response] = []
            waiter = threading.Thread(target=lambda: got.append(httpx.get(
                f"{srv.url}/v1/interrupts", params={"waitMs": 20_000, "session": sid},
                headers={"Authorization": f"Bearer {KEY}"}, timeout=40)))
            waiter.start()
            time.sleep(1)  # waiting by now (no worker yet: the branch run is queued)
            worker = Worker(urls[0], SECRET, "--shard", "0", env={"PARKWAY_SHARDS": ",".join(urls)})
            try:
                wait_for(lambda: pw.get_run(sent.run_id).status.value == "waiting", 30, "the branch run's question")
            finally:
                worker.stop()
            waiter.join(30)
            assert got and got[0].status_code == 200, got and got[0].text
            assert [i["runId"] for i in got[0].json()["items"]] == [sent.run_id]
            two[1].stop()
            listed = pw.list_interrupts(session=sid)
            assert [(i.run_id, i.asked().question) for i in listed.items] == [(sent.run_id, "Which account?")]
    finally:
        out = srv.stop()
    assert "Traceback" not in out, out[-3000:]


@pytest.mark.slow
def test_pause_streams_over_shards_hold_no_server_thread_while_they_wait(two: tuple[RedisServer, RedisServer]) -> None:
    """`parkway serve` over shards: 60 open pause streams (`/v1/interrupts/events`) hold none of the
    server's 40 worker threads while they wait (each held one in a blocking read of every shard,
    so a plain read of a run queued behind them), and a pause on either shard reaches them all."""
    import httpx

    from tests.test_api import KEY, Server

    urls = (two[0].url, two[1].url)
    srv = Server(urls[0], PARKWAY_SHARDS=",".join(urls))
    workers = [Worker(urls[k], SECRET, "--shard", str(k), env={"PARKWAY_SHARDS": ",".join(urls)}) for k in (0, 1)]
    streams: list[Any] = []
    try:
        with Parkway(Settings(shards=urls, secret=SECRET)) as pw, httpx.Client(timeout=30) as http:
            store = pw.store
            assert isinstance(store, ShardedStore)
            run_id = pw.start(flows.one_choice, {})
            wait_for(lambda: pw.get_run(run_id).status.value == "waiting", 30, "the run's pause")
            for _ in range(60):
                stream = http.stream("GET", f"{srv.url}/v1/interrupts/events",
                                     headers={"Authorization": f"Bearer {KEY}"})
                response = stream.__enter__()
                streams.append(stream)
                lines = response.iter_lines()
                assert next(lines) == ": open"
                streams.append(lines)
            time.sleep(1.5)  # every stream has read its feeds and waits
            slowest = 0.0
            for _ in range(5):
                began = time.monotonic()
                read = http.get(f"{srv.url}/v1/runs/{run_id}", headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
                slowest = max(slowest, time.monotonic() - began)
                assert read.status_code == 200
            assert slowest < 0.5, f"a plain read waited {slowest:.2f} s behind the streams"
            for shard in (0, 1):  # a pause on either shard reaches every stream
                late = next(f"s-{shard}-{n}" for n in range(200) if store.shard_of(f"s-{shard}-{n}") == shard)
                pw.start(flows.one_choice, {}, run_id=late)
                for lines in streams[1::2]:
                    got = next(json.loads(data)["runId"] for event, data in _frames_of(lines)
                               if event == "interrupt.paused")
                    assert got == late
    finally:
        for stream in streams[::2]:
            stream.__exit__(None, None, None)
        out = srv.stop()
        for w in workers:
            w.stop()
    assert "Traceback" not in out, out[-3000:]


def _frames_of(lines: Iterator[str]) -> Iterator[tuple[str, str]]:
    event = ""
    for line in lines:
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            yield event, line[6:]


def test_a_server_listed_twice_in_the_shards_is_refused() -> None:
    """One server (the same host, port and database, however written) named twice would hold two
    shards' tables at once: refused when the settings are made, naming it."""
    for pair in (("redis://h:1/0", "redis://h:1/0"), ("redis://h:1", "redis://H:1/0"),
                 ("redis+sentinel://a:1,b:2/m/0", "redis+sentinel://b:2,a:1/m")):
        with pytest.raises(ConfigError, match="twice"):
            Settings(shards=pair, secret=SECRET)
    assert Settings(shards=("redis://h:1/0", "redis://h:1/1"), secret=SECRET).shards  # two databases: two shards
    for bad in (-1, True, "0"):
        with pytest.raises(ConfigError, match="shard must be an integer"):
            Settings(redis_url="redis://h:1/0", shard=bad)  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_redis_is_never_used_both_as_one_of_the_shards_and_alone(two: tuple[RedisServer, RedisServer]) -> None:
    """A process with one Redis URL refuses a Redis that is one of several shards (the runs it
    started there would be looked for on the shard their bucket names), except a worker serving that
    shard; and the shards refuse a Redis that already holds runs started without them (those whose
    bucket names another shard would be looked for there)."""
    urls = (two[0].url, two[1].url)
    with Parkway(Settings(redis_url=urls[1], secret=SECRET)) as alone:
        alone.start(flows.one_choice, {})
    with pytest.raises(ConfigError, match="holds runs but no shard table"):
        Parkway(Settings(shards=urls, secret=SECRET))
    with redis.Redis.from_url(urls[1]) as r:
        r.flushdb()
    with Parkway(Settings(shards=urls, secret=SECRET)):
        pass
    for url in urls:
        with pytest.raises(ConfigError, match=r"shard \d of 2"):
            Parkway(Settings(redis_url=url, secret=SECRET))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARKWAY_")}
    alone_cli = subprocess.run([sys.executable, "-m", "parkway.cli", "interrupts", "--redis-url", urls[0]], cwd=ROOT,
                               env={**env, "PARKWAY_SECRET": SECRET, "PYTHONPATH": str(ROOT)},
                               capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert alone_cli.returncode == 1 and "PARKWAY_SHARDS" in alone_cli.stderr, alone_cli.stderr
    served = subprocess.run([sys.executable, "-m", "parkway.cli", "worker", "--burst", "--shard", "0",
                             "--workers", "2"], cwd=ROOT, env=_shard_env(urls),
                            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert served.returncode == 0, served.stderr
