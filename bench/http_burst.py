"""What a burst of HTTP clients and event streams leaves behind in ``parkway serve``.

``python -m bench.http_burst [--bursts 3] [--clients 50] [--streams 50] [--seconds 10]`` starts
its own redis-server, a parkway worker and the API (uvicorn, one process), then runs ``bursts``
bursts, each of ``clients`` API clients (each listing interrupts and reading a run in a loop) and
``streams`` SSE loops (each opening a run's event stream, reading its first byte, holding it a
moment, and opening it again) for ``seconds``, followed by 5 s without traffic. It prints the
server's file descriptors, Redis connections and RSS at the start and 5 s after each burst, and
the time from sending an event-stream request to its first byte (p50/p99/max, and how many took
over a second). It is a figure, not a test: tests/test_api_load.py holds the bounds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from typing import Any

import httpx
import redis

from bench.env import RedisServer, Workers, parkway_worker_argv, parkway_worker_env, percentile
from bench.sse_load import KEY, STREAM_KEYS, _api_server, _park


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def _redis_connections(pid: int, redis_port: int) -> int:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[9] in inodes and int(fields[2].rsplit(":", 1)[1], 16) == redis_port and fields[3] == "01":
                    count += 1
    return count


async def _api_loop(base: str, key: str, run_id: str, until: float) -> int:
    done = 0
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30) as api:
        while time.monotonic() < until:
            await api.get("/v1/interrupts")
            await api.get(f"/v1/runs/{run_id}")
            done += 2
    return done


async def _sse_loop(base: str, key: str, run_id: str, until: float, firsts: list[float]) -> None:
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30) as api:
        while time.monotonic() < until:
            began = time.perf_counter()
            async with api.stream("GET", f"/v1/runs/{run_id}/events") as response:
                async for _ in response.aiter_bytes():
                    firsts.append(time.perf_counter() - began)
                    break
                await asyncio.sleep(0.2)


async def _burst(base: str, run_id: str, clients: int, streams: int, seconds: float) -> tuple[int, list[float]]:
    until = time.monotonic() + seconds
    firsts: list[float] = []
    counts = await asyncio.gather(
        *(_api_loop(base, KEY, run_id, until) for _ in range(clients)),
        *(_sse_loop(base, STREAM_KEYS[i % len(STREAM_KEYS)], run_id, until, firsts) for i in range(streams)),
    )
    return sum(c for c in counts if c), firsts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.http_burst", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bursts", type=int, default=3)
    parser.add_argument("--clients", type=int, default=50, help="API clients per burst (default 50)")
    parser.add_argument("--streams", type=int, default=50, help="SSE loops per burst (default 50)")
    parser.add_argument("--seconds", type=float, default=10, help="how long each burst lasts (default 10)")
    args = parser.parse_args(argv)
    server = RedisServer().start()
    workers = api = None
    rows: list[dict[str, Any]] = []
    firsts: list[float] = []
    try:
        client = redis.Redis.from_url(server.url)
        workers = Workers(parkway_worker_argv(server.url), 1, parkway_worker_env()).start(client)
        api, base = _api_server(server.url)
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])

        async def park() -> str:
            async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {KEY}"}, timeout=30) as c:
                return (await _park(c, 1))[0]

        run_id = asyncio.run(park())
        time.sleep(2)
        rows.append({"when": "start", "fds": _fds(api.pid), "redis": _redis_connections(api.pid, port),
                     "rss_kb": _rss_kb(api.pid), "requests": 0})
        for i in range(args.bursts):
            requests, opened = asyncio.run(_burst(base, run_id, args.clients, args.streams, args.seconds))
            firsts += opened
            time.sleep(5)
            rows.append({"when": f"5 s after burst {i + 1}", "fds": _fds(api.pid),
                         "redis": _redis_connections(api.pid, port), "rss_kb": _rss_kb(api.pid),
                         "requests": requests + len(opened)})
    finally:
        if api is not None:
            api.terminate()
            api.wait(10)
        if workers is not None:
            workers.stop()
        server.stop()
    print(f"parkway serve, bursts of {args.clients} API clients + {args.streams} SSE loops for {args.seconds:g} s")
    print(f"  {'when':<20} {'fds':>5} {'redis conns':>12} {'RSS (MB)':>9} {'requests':>9}")
    for row in rows:
        rss = row["rss_kb"] / 1024
        print(f"  {row['when']:<20} {row['fds']:>5} {row['redis']:>12} {rss:>9.1f} {row['requests']:>9}")
    ms = [f * 1000 for f in firsts]
    print(f"  first byte of {len(ms)} stream opens (ms): p50 {percentile(ms, 50):.1f}  p99 {percentile(ms, 99):.1f}  "
          f"max {max(ms):.1f}; over 1 s: {sum(1 for m in ms if m > 1000)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
