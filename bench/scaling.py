"""Scaling: pause/resume cycles per second and Redis CPU per cycle, on one Redis and on shards.

``python -m bench.scaling [--n 600] [--window 16] [--configs 1x1,1x2,1x4,2x1,1x1+wait0,1x1+wait1]``

Each configuration ``<shards>x<workers per shard>`` runs on fresh loopback ``redis-server``
processes of its own (no persistence), with ``parkway worker`` processes (``--shard K`` with
``PARKWAY_SHARDS`` when there are shards) and one driving client in this process, measured as
``bench.cycles`` measures (windowed polling: ``window`` runs started and not yet resumed; a
warm-up first): cycles/s over the timed window, CPU per cycle of the workers (/proc), of
each Redis (INFO cpu) and of the client, and the median wall time of the client's ``resume()``
calls. ``1xN`` uses a plain client on one Redis; ``2x1`` the sharded client (``PARKWAY_SHARDS``,
two-phase listings over both shards).

``1x1+waitK``: one Redis with one replica attached (``tests.procs.SentinelGroup`` with no
sentinels, as the replica tests start it), client and worker with ``PARKWAY_REPLICA_ACKS=K``
(``PARKWAY_REPLICA_ACK_MS`` 100, or ``--ack-ms``): ``wait0`` against ``wait1`` is the cost of WAIT alone, the
replication stream being the same in both. The replica's CPU is reported beside the primary's,
not in the Redis column.

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

from tests.procs import RedisServer, SentinelGroup

from .cycles import ParkwayCycles, drive, finish, verify
from .env import SECRET, Workers, parkway_worker_argv, parkway_worker_env, percentile, redis_cpu, self_cpu


class ShardedCycles(ParkwayCycles):
    """``bench.cycles``' parkway system on a sharded client."""

    def __init__(self, urls: list[str]) -> None:
        from parkway import Parkway, Settings

        self.pw = Parkway(Settings(shards=tuple(urls), secret=SECRET))
        self.workflow, self.wf_name = "bench.flows:cycle", "bench_cycle"
        self.started: list[str] = []
        self.empty_polls = 0


class ReplicatedCycles(ParkwayCycles):
    """``bench.cycles``' parkway system with each commit waiting for ``acks`` replicas (0: no WAIT)."""

    def __init__(self, url: str, acks: int, ack_ms: int) -> None:
        from parkway import Parkway, Settings

        self.pw = Parkway(Settings(redis_url=url, secret=SECRET, replica_acks=acks, replica_ack_ms=ack_ms))
        self.workflow, self.wf_name = "bench.flows:cycle", "bench_cycle"
        self.started: list[str] = []
        self.empty_polls = 0


ACK_MS = 100
"""``PARKWAY_REPLICA_ACK_MS`` in the ``+wait`` configurations unless ``--ack-ms`` says otherwise (the default)"""


def timed_resumes(system: Any, into: list[float]) -> None:
    """Keep the wall time of each of ``system``'s ``resume()`` calls (list, answer, commit) in ``into``."""
    plain = system.resume

    def resume(item: Any) -> None:
        t = time.perf_counter()
        plain(item)
        into.append(time.perf_counter() - t)

    system.resume = resume


def parse_config(config: str) -> tuple[int, int, int | None]:
    """``<shards>x<workers>[+wait<acks>]`` -> (shards, workers per shard, replica acks or None: no replica)."""
    shape, _, wait = config.partition("+")
    shards, workers = (int(x) for x in shape.split("x"))
    if wait and (not wait.startswith("wait") or shards != 1):
        raise SystemExit(f"bench.scaling: {config!r}: a replica only as 1xN+wait<acks>")
    return shards, workers, int(wait.removeprefix("wait")) if wait else None


def measure(tmp: Path, shards: int, workers: int, n: int, window: int, warmup: int = 30,
            acks: int | None = None, ack_ms: int = ACK_MS) -> dict[str, Any]:
    name = f"{shards}x{workers}" + (f"+wait{acks}" if acks is not None else "")
    servers: list[RedisServer] = []
    group: SentinelGroup | None = None
    if acks is not None:
        group = SentinelGroup(Path(tempfile.mkdtemp(prefix=f"{name}-", dir=tmp)), replicas=1, sentinels=0)
        group.start()
        servers.append(group.primary)
    else:
        for i in range(shards):
            where = Path(tempfile.mkdtemp(prefix=f"s{shards}x{workers}-{i}-", dir=tmp))
            srv = RedisServer(where, appendonly=False)
            srv.start()
            servers.append(srv)
    urls = [s.url for s in servers]
    clients = [redis.Redis.from_url(u) for u in urls]
    replicas = [redis.Redis.from_url(s.url) for s in (group.replicas if group else [])]
    pools: list[Workers] = []
    system: Any = None
    resumes: list[float] = []
    try:
        if acks is not None:
            system = ReplicatedCycles(urls[0], acks, ack_ms)
        else:
            system = ParkwayCycles(urls[0]) if shards == 1 else ShardedCycles(urls)
        for k, url in enumerate(urls):
            argv = parkway_worker_argv(url) + (["--shard", str(k)] if shards > 1 else [])
            env = {**parkway_worker_env(), **({"PARKWAY_SHARDS": ",".join(urls)} if shards > 1 else {})}
            if acks is not None:
                env |= {"PARKWAY_REPLICA_ACKS": str(acks), "PARKWAY_REPLICA_ACK_MS": str(ack_ms)}
            pools.append(Workers(argv, workers, env).start(clients[k]))
        drive(system, warmup, window)
        finish(system, 0, warmup, warmup)
        timed_resumes(system, resumes)
        load0 = os.getloadavg()[0]
        w0, r0, c0, t0 = _cpu(pools), [redis_cpu(c) for c in clients], self_cpu(), time.perf_counter()
        p0, waits0 = [redis_cpu(c) for c in replicas], _waits(clients[0])
        drive(system, n, window, first=warmup)
        finish(system, warmup, n, tail=max(4 * window, 8 * workers))
        t1 = time.perf_counter()
        w1, r1, c1, p1 = _cpu(pools), [redis_cpu(c) for c in clients], self_cpu(), [redis_cpu(c) for c in replicas]
        late = verify(system, warmup, n)
        if late:
            t1, w1, r1, c1 = time.perf_counter(), _cpu(pools), [redis_cpu(c) for c in clients], self_cpu()
            p1 = [redis_cpu(c) for c in replicas]
        waits = _waits(clients[0]) - waits0
        load1 = os.getloadavg()[0]
    finally:
        for pool in pools:
            pool.stop()
        if system is not None:
            system.pw.close()
        for c in (*clients, *replicas):
            c.close()
        if group is not None:
            group.stop()
        else:
            for srv in servers:
                srv.stop()
    elapsed = t1 - t0
    per_redis = [(b - a) / n * 1000 for a, b in zip(r0, r1, strict=True)]
    row: dict[str, Any] = {
        "config": name, "shards": shards, "workers_per_shard": workers, "cycles": n,
        "seconds": round(elapsed, 2), "cycles_per_s": round(n / elapsed, 1),
        "redis_cpu_ms_per_cycle": round(sum(per_redis), 3),
        "redis_cpu_ms_per_cycle_by_shard": [round(x, 3) for x in per_redis],
        "worker_cpu_ms_per_cycle": round((w1 - w0) / n * 1000, 3),
        "client_cpu_ms_per_cycle": round((c1 - c0) / n * 1000, 3),
        "resume_ms_p50": round(percentile(resumes, 50) * 1000, 3),
        "resume_ms_p99": round(percentile(resumes, 99) * 1000, 3),
        "load_average_1m": [round(load0, 2), round(load1, 2)], "cpus": os.cpu_count(), "late": late,
    }
    if acks is not None:
        row |= {"replica_acks": acks, "replica_ack_ms": ack_ms, "waits_per_cycle": round(waits / n, 2),
                "replica_cpu_ms_per_cycle": round(sum(b - a for a, b in zip(p0, p1, strict=True)) / n * 1000, 3)}
    return row


def _waits(client: redis.Redis) -> int:
    """WAIT commands the server has run (INFO commandstats): checks that ``+wait1`` waits and ``+wait0`` does not."""
    return int(client.info("commandstats").get("cmdstat_wait", {}).get("calls", 0))


def _cpu(pools: list[Workers]) -> float:
    return sum(p.cpu() for p in pools)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=600)
    parser.add_argument("--window", type=int, default=16)
    parser.add_argument("--configs", default="1x1,1x2,1x4,2x1,1x1+wait0,1x1+wait1",
                        help="<shards>x<workers per shard>[+wait<replica acks>: one Redis with a replica], "
                        "comma-separated")
    parser.add_argument("--ack-ms", type=int, default=ACK_MS,
                        help=f"PARKWAY_REPLICA_ACK_MS in the +wait configurations (default {ACK_MS})")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="parkway-scaling-") as tmp:
        for config in args.configs.split(","):
            shards, workers, acks = parse_config(config)
            row = measure(Path(tmp), shards, workers, args.n, args.window, acks=acks, ack_ms=args.ack_ms)
            print(json.dumps(row), flush=True)
            rows.append(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
