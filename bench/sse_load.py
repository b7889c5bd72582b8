"""Resume latency through the HTTP API, idle and with many open event streams.

``python -m bench.sse_load [--clients 200] [--resumes 200]`` starts its own
redis-server, a parkway worker and the API (uvicorn, one process), parks
``resumes`` runs, then times ``POST /v1/resume`` (request sent -> response
read, on a keep-alive connection) for each, first with no stream open, then
with ``clients`` server-sent-event streams open on other waiting runs (each
receives its events as they come; none of them ends during the measurement).
It prints p50/p99/max of both and their ratio, and checks that every resume
was accepted and every stream still open at the end. It is a figure, not a
test: nothing here gates on a time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from typing import Any

import httpx
import redis

from bench.env import (
    ROOT,
    SECRET,
    RedisServer,
    Workers,
    free_port,
    parkway_worker_argv,
    parkway_worker_env,
    percentile,
)
from parkway.http.app import hash_key

KEY = "bench-key-" + "b" * 30
STREAM_KEYS = [f"bench-stream-key-{i}-" + "s" * 24 for i in range(20)]
"""the streams' keys: one API key holds at most MAX_STREAMS_PER_KEY (100) streams, so they are spread"""


def _api_server(url: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "PARKWAY_REDIS_URL": url, "PARKWAY_SECRET": SECRET, "PYTHONPATH": str(ROOT),
           "PARKWAY_API_KEYS": ",".join(f"{hash_key(k)}=machine" for k in (KEY, *STREAM_KEYS)),
           "PARKWAY_WORKFLOWS": "tests.flows"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "parkway.http.app:app_from_env", "--port", str(port),
         "--log-level", "warning", "--no-access-log"],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit("bench: the API server did not start")
        time.sleep(0.1)


async def _park(api: httpx.AsyncClient, count: int) -> list[str]:
    run_ids = []
    for _ in range(count):
        response = await api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}})
        run_ids.append(response.json()["runId"])
    for run_id in run_ids:
        while (await api.get(f"/v1/runs/{run_id}")).json()["status"] != "waiting":
            await asyncio.sleep(0.02)
    return run_ids


async def _tokens(api: httpx.AsyncClient, run_ids: list[str]) -> list[str]:
    out = []
    for run_id in run_ids:
        page = (await api.get("/v1/interrupts", params={"runId": run_id, "tokens": "true"})).json()
        out.append(page["items"][0]["resumeToken"])
    return out


async def _resume_all(api: httpx.AsyncClient, tokens: list[str]) -> list[float]:
    times = []
    for token in tokens:
        started = time.perf_counter()
        response = await api.post("/v1/resume", json={"token": token, "selected": "red"})
        times.append((time.perf_counter() - started) * 1000)
        if response.status_code != 200:
            raise SystemExit(f"bench: a resume answered {response.status_code}: {response.text}")
    return times


async def _hold_stream(base: str, run_id: str, opened: asyncio.Event, frames: list[int], key: str = KEY) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(timeout=None) as client:
        async with client.stream("GET", f"{base}/v1/runs/{run_id}/events", headers=headers) as response:
            opened.set()
            async for _line in response.aiter_lines():
                frames[0] += 1


async def measure(base: str, clients: int, resumes: int) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {KEY}"}
    limits = httpx.Limits(max_keepalive_connections=1, max_connections=1)
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30, limits=limits) as api:
        idle = await _resume_all(api, await _tokens(api, await _park(api, resumes)))
        held = await _park(api, clients)
        measured = await _tokens(api, await _park(api, resumes))
        frames = [0]
        openings = [asyncio.Event() for _ in held]
        streams = [asyncio.create_task(_hold_stream(base, r, e, frames, STREAM_KEYS[i % len(STREAM_KEYS)]))
                   for i, (r, e) in enumerate(zip(held, openings, strict=True))]
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in openings)), 60)
        await asyncio.sleep(1.0)  # every stream has read its backlog and waits
        loaded = await _resume_all(api, measured)
        still_open = sum(1 for s in streams if not s.done())
        for s in streams:
            s.cancel()
        await asyncio.gather(*streams, return_exceptions=True)
    return {"idle": _stats(idle), "loaded": _stats(loaded), "streams_open": still_open, "frames": frames[0]}


def _stats(values: list[float]) -> dict[str, float]:
    return {"p50": percentile(values, 50), "p99": percentile(values, 99), "max": max(values)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sse_load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=200, help="event streams held open (default 200)")
    parser.add_argument("--resumes", type=int, default=200, help="resumes timed in each phase (default 200)")
    args = parser.parse_args(argv)
    server = RedisServer().start()
    workers = api = None
    try:
        client = redis.Redis.from_url(server.url)
        workers = Workers(parkway_worker_argv(server.url), 1, parkway_worker_env()).start(client)
        api, base = _api_server(server.url)
        result = asyncio.run(measure(base, args.clients, args.resumes))
    finally:
        if api is not None:
            api.terminate()
            api.wait(10)
        if workers is not None:
            workers.stop()
        server.stop()
    idle, loaded = result["idle"], result["loaded"]
    print(f"resume through POST /v1/resume, {args.resumes} each, request sent -> response read (ms)")
    print(f"  idle                      p50 {idle['p50']:.2f}  p99 {idle['p99']:.2f}  max {idle['max']:.2f}")
    print(f"  {args.clients} SSE streams open     p50 {loaded['p50']:.2f}  p99 {loaded['p99']:.2f}  "
          f"max {loaded['max']:.2f}")
    print(f"  p99 ratio (loaded / idle) {loaded['p99'] / idle['p99']:.2f}; streams still open at the end: "
          f"{result['streams_open']}/{args.clients}")
    return 0 if result["streams_open"] == args.clients else 1


if __name__ == "__main__":
    sys.exit(main())
