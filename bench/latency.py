"""Figure 2: resume latency, and the bare LPUSH -> BLPOP hand-off it is compared with.

``python -m bench.latency '{"kind": "parkway"|"handoff", "url": ..., "n": 1000}'``

parkway: one worker process, idle. For each of ``2 n`` runs of ``bench.flows:timed`` the
client starts the run, lists its interrupt with its token (``list_interrupts(run_id=...,
wait_ms=...)``: the listing waits for the pause), sleeps ``idle_s`` so the worker is back in
its blocking dequeue, then calls ``resume()``: on even runs the client that listed it (it holds
the request: the commit is the one round trip), on odd runs a second client that never read it
(given only the token, it looks the interrupt up first). The node's first line appends
``time.time()`` to ``bench:lat:<i>`` on each attempt; after the run completes the client reads
the replay's timestamp. Latency = that timestamp - the time taken just before ``resume()`` is
called (``from_call``, the listing client's: what the target compares with the hand-off;
``from_call_token``, the other's); also reported: - the time it returned (``from_return``).

handoff: a second process blocks in ``BLPOP``; the client sleeps ``idle_s``, takes
``time.time()`` and ``LPUSH``es it; the other process subtracts it from ``time.time()``
when BLPOP returns. The same redis-py (with hiredis) on both sides.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import redis

from .env import ROOT, Workers, emit_result, flush, parkway_worker_argv, parkway_worker_env, percentile
from .flows import ANSWER

HANDOFF_KEY = "bench:handoff"
READY_KEY = "bench:handoff:ready"


def stats(values: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values]
    return {
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "max_ms": max(ms),
        "min_ms": min(ms),
        "n": len(ms),
    }


def parkway_latency(url: str, n: int, idle: float, warmup: int) -> dict[str, Any]:
    from .populate import client

    r = redis.Redis.from_url(url)
    flush(r)
    pw, cold = client(url), client(url)
    env = {**parkway_worker_env(), "PARKWAY_REDIS_URL": url}
    pool = Workers(parkway_worker_argv(url), 1, env).start(r)
    from_return: list[float] = []
    from_call: list[float] = []
    from_call_token: list[float] = []
    try:
        for i in range(2 * (warmup + n)):
            run_id = pw.start("bench.flows:timed", {"i": i})
            listed = pw.list_interrupts(run_id=run_id, include_tokens=True, wait_ms=30_000).items
            if not listed or listed[0].resume_token is None:
                raise RuntimeError(f"run {run_id} did not pause")
            token = listed[0].resume_token
            # even runs: answered by the client that listed them; odd ones: by one that never read them
            answering = pw if i % 2 == 0 else cold
            time.sleep(idle)
            t_call = time.time()
            result = answering.resume(token, selected=ANSWER)
            t_return = time.time()
            if not result.accepted:
                raise RuntimeError(f"resume of {run_id}: {result.outcome}")
            run = pw.wait(run_id, timeout=30)
            if run.status.value != "completed":
                run = pw.wait(run_id, timeout=30)
            marks = [float(x) for x in r.lrange(f"bench:lat:{i}", 0, -1)]
            if len(marks) != 2:
                raise RuntimeError(f"run {run_id}: expected 2 timestamps, got {marks}")
            if i < 2 * warmup:
                continue
            if answering is pw:
                from_return.append(marks[1] - t_return)
                from_call.append(marks[1] - t_call)
            else:
                from_call_token.append(marks[1] - t_call)
    finally:
        pool.stop()
        pw.close()
        cold.close()
    negative = sum(1 for v in from_return if v < 0)
    return {
        "kind": "parkway",
        "idle_s": idle,
        "from_return": stats(from_return),
        "from_call": stats(from_call),
        "from_call_token": stats(from_call_token),
        "node_before_return": negative,
    }


def handoff_latency(url: str, n: int, idle: float, warmup: int) -> dict[str, Any]:
    r = redis.Redis.from_url(url)
    r.delete(HANDOFF_KEY, READY_KEY)
    echo = subprocess.Popen(
        [sys.executable, "-m", "bench.latency", json.dumps({"kind": "echo", "url": url})],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        if r.blpop([READY_KEY], timeout=60) is None:
            raise RuntimeError("the BLPOP side did not start")
        for _ in range(warmup + n):
            time.sleep(idle)
            r.lpush(HANDOFF_KEY, repr(time.time()))
        r.lpush(HANDOFF_KEY, "stop")
        out, _ = echo.communicate(timeout=60)
    finally:
        if echo.poll() is None:
            echo.kill()
            echo.wait()
    values = json.loads(out.strip().splitlines()[-1])[warmup:]
    return {"kind": "handoff", "idle_s": idle, "from_call": stats(values)}


def echo(url: str) -> None:
    r = redis.Redis.from_url(url)
    r.ping()
    r.rpush(READY_KEY, 1)  # from here on this process waits in BLPOP
    got: list[float] = []
    while True:
        popped = r.blpop([HANDOFF_KEY], timeout=60)
        now = time.time()
        if popped is None or popped[1] == b"stop":
            break
        got.append(now - float(popped[1]))
    print(json.dumps(got), flush=True)


def main(params: dict[str, Any]) -> dict[str, Any] | None:
    kind = params["kind"]
    if kind == "echo":
        echo(params["url"])
        return None
    n, idle, warmup = int(params["n"]), float(params.get("idle_s", 0.005)), int(params.get("warmup", 20))
    if kind == "parkway":
        return parkway_latency(params["url"], n, idle, warmup)
    return handoff_latency(params["url"], n, idle, warmup)


if __name__ == "__main__":
    result = main(json.loads(sys.argv[1]))
    if result is not None:
        emit_result(result)
