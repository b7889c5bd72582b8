"""Children in parallel: ``n`` child workflows started by one node with ``use_workflows`` against
the same children run one after another with ``use_workflow``, on ``workers`` worker processes.

Measures the wall time from ``start`` to the parent's end, and Redis memory: what the finished
children still hold (``MEMORY USAGE`` of every key left under their names, per child) and the
growth of Redis's ``used_memory`` over the run. Uses the Redis at ``--redis-url`` (its database is
flushed: give it one of its own)::

    python -m bench.fanout --redis-url redis://127.0.0.1:6394/9 [--n 200] [--workers 2] [--work-ms 20]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis

from parkway import Parkway, RunStatus, Settings
from parkway.adapters.redis import keys
from parkway.runtime.hooks import child_run_id

ROOT = Path(__file__).resolve().parent.parent
SECRET = "bench-fanout-" + "s" * 32


def _workers(url: str, count: int) -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, "PARKWAY_SECRET": SECRET, "PYTHONPATH": str(ROOT), "PARKWAY_WORKFLOWS": "bench.fanout_flows"}
    env.pop("PARKWAY_REDIS_URL", None)
    return [subprocess.Popen([sys.executable, "-m", "parkway.cli", "worker", "--redis-url", url],
                             cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(count)]


def _child_bytes(client: redis.Redis, root: str, children: list[str]) -> list[int]:
    """Per child, the bytes of every key still named after it (its tag's keys with its id)."""
    sizes = {child: 0 for child in children}
    for key in client.scan_iter(match=f"{keys.PREFIX}:{{{root}}}:{root}--*", count=1000):
        child = key.decode().split(":")[2]
        if child in sizes:
            sizes[child] += int(client.memory_usage(key) or 0)
    return list(sizes.values())


def measure(pw: Parkway, client: redis.Redis, flow: Any, n: int, work_ms: int, limit: int) -> dict[str, Any]:
    before = int(client.info("memory")["used_memory"])
    started = time.perf_counter()
    root = pw.start(flow, {"n": n, "work_ms": work_ms, "limit": limit})
    while not (run := pw.get_run(root)).status.finished:
        time.sleep(0.02)
    seconds = time.perf_counter() - started
    assert run.status is RunStatus.COMPLETED and run.output["done"] == n, run
    names = [f"c.{i}" for i in range(n)] if flow.name == "bench_fan" else [f"c{i}" for i in range(n)]
    children = [child_run_id(root, 0, name) for name in names]
    per_child = _child_bytes(client, root, children)
    return {
        "seconds": seconds,
        "child_bytes_mean": sum(per_child) / n,
        "child_bytes_max": max(per_child),
        "used_memory_growth": int(client.info("memory")["used_memory"]) - before,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--redis-url", required=True)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--work-ms", type=int, default=20)
    ap.add_argument("--limit", type=int, default=50, help="use_workflows' bound on children running at once")
    args = ap.parse_args()
    client = redis.Redis.from_url(args.redis_url)
    client.flushdb()
    from bench import fanout_flows

    procs = _workers(args.redis_url, args.workers)
    try:
        with Parkway(Settings(redis_url=args.redis_url, secret=SECRET)) as pw:
            measure(pw, client, fanout_flows.fan, 10, 1, 10)  # warm: the workers started and imported
            rows = {
                "use_workflows": measure(pw, client, fanout_flows.fan, args.n, args.work_ms, args.limit),
                "use_workflow, one by one": measure(pw, client, fanout_flows.chain, args.n, args.work_ms, args.limit),
            }
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(10)
    ideal = args.n * args.work_ms / 1000 / args.workers
    print(f"{args.n} children, {args.work_ms} ms of work each, {args.workers} worker processes, "
          f"use_workflows limit {args.limit}; ideal (n x work / workers): {ideal:.2f} s")
    print("| children started by | wall s | bytes left per finished child (mean / max) | Redis used_memory growth |")
    print("| --- | --- | --- | --- |")
    for name, r in rows.items():
        print(f"| {name} | {r['seconds']:.2f} | {r['child_bytes_mean']:.0f} / {r['child_bytes_max']} "
              f"| {r['used_memory_growth'] / 1024:.0f} KiB |")


if __name__ == "__main__":
    main()
