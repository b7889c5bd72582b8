"""Scaling: pause/resume cycles per second and Redis CPU per cycle, on one Redis and on shards.

``python -m bench.scaling [--n 600] [--window 16] [--configs 1x1,1x2,2x1]``

Each configuration ``<shards>x<workers per shard>`` runs on fresh loopback ``redis-server``
processes of its own (no persistence), with ``parkway worker`` processes (``--shard K`` with
``PARKWAY_SHARDS`` when there are shards) and one driving client in this process, measured as
``bench.cycles`` measures (windowed polling: ``window`` runs started and not yet resumed; a
warm-up first): cycles/s over the timed window, and CPU per cycle of the workers (/proc), of
each Redis (INFO cpu) and of the client. ``1x1`` and ``1x2`` use a plain client on one Redis;
``2x1`` the sharded client (``PARKWAY_SHARDS``, two-phase listings over both shards).

What it can show on a small machine: Redis CPU per cycle (the cost that decides how many cycles
one Redis core carries) and how it splits over shards. cycles/s is bounded by the machine's
cores: the client, every worker and every Redis share them, so on 2 busy cores adding a Redis
or a worker adds contention, not capacity; the report prints the load average beside each row.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from tests.procs import RedisServer

from .cycles import ParkwayCycles, drive, finish, verify
from .env import SECRET, Workers, parkway_worker_argv, parkway_worker_env, redis_cpu, self_cpu


class ShardedCycles(ParkwayCycles):
    """``bench.cycles``' parkway system on a sharded client."""

    def __init__(self, urls: list[str]) -> None:
        from parkway import Parkway, Settings

        self.pw = Parkway(Settings(shards=tuple(urls), secret=SECRET))
        self.workflow, self.wf_name = "bench.flows:cycle", "bench_cycle"
        self.started: list[str] = []
        self.empty_polls = 0


def measure(tmp: Path, shards: int, workers: int, n: int, window: int, warmup: int = 30) -> dict[str, Any]:
    servers = []
    for i in range(shards):
        where = Path(tempfile.mkdtemp(prefix=f"s{shards}x{workers}-{i}-", dir=tmp))
        srv = RedisServer(where, appendonly=False)
        srv.start()
        servers.append(srv)
    urls = [s.url for s in servers]
    clients = [redis.Redis.from_url(u) for u in urls]
    pools: list[Workers] = []
    system: Any = None
    try:
        system = ParkwayCycles(urls[0]) if shards == 1 else ShardedCycles(urls)
        for k, url in enumerate(urls):
            argv = parkway_worker_argv(url) + (["--shard", str(k)] if shards > 1 else [])
            env = {**parkway_worker_env(), **({"PARKWAY_SHARDS": ",".join(urls)} if shards > 1 else {})}
            pools.append(Workers(argv, workers, env).start(clients[k]))
        drive(system, warmup, window)
        finish(system, 0, warmup, warmup)
        load0 = os.getloadavg()[0]
        w0, r0, c0, t0 = _cpu(pools), [redis_cpu(c) for c in clients], self_cpu(), time.perf_counter()
        drive(system, n, window, first=warmup)
        finish(system, warmup, n, tail=max(4 * window, 8 * workers))
        t1 = time.perf_counter()
        w1, r1, c1 = _cpu(pools), [redis_cpu(c) for c in clients], self_cpu()
        late = verify(system, warmup, n)
        if late:
            t1, w1, r1, c1 = time.perf_counter(), _cpu(pools), [redis_cpu(c) for c in clients], self_cpu()
        load1 = os.getloadavg()[0]
    finally:
        for pool in pools:
            pool.stop()
        if system is not None:
            system.pw.close()
        for c in clients:
            c.close()
        for srv in servers:
            srv.stop()
    elapsed = t1 - t0
    per_redis = [(b - a) / n * 1000 for a, b in zip(r0, r1, strict=True)]
    return {
        "config": f"{shards}x{workers}", "shards": shards, "workers_per_shard": workers, "cycles": n,
        "seconds": round(elapsed, 2), "cycles_per_s": round(n / elapsed, 1),
        "redis_cpu_ms_per_cycle": round(sum(per_redis), 3),
        "redis_cpu_ms_per_cycle_by_shard": [round(x, 3) for x in per_redis],
        "worker_cpu_ms_per_cycle": round((w1 - w0) / n * 1000, 3),
        "client_cpu_ms_per_cycle": round((c1 - c0) / n * 1000, 3),
        "load_average_1m": [round(load0, 2), round(load1, 2)], "cpus": os.cpu_count(), "late": late,
    }


def _cpu(pools: list[Workers]) -> float:
    return sum(p.cpu() for p in pools)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=600)
    parser.add_argument("--window", type=int, default=16)
    parser.add_argument("--configs", default="1x1,1x2,2x1", help="<shards>x<workers per shard>, comma-separated")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="parkway-scaling-") as tmp:
        for config in args.configs.split(","):
            shards, workers = (int(x) for x in config.split("x"))
            row = measure(Path(tmp), shards, workers, args.n, args.window)
            print(json.dumps(row), flush=True)
            rows.append(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
