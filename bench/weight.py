"""Figure 4: Redis memory per parked run (a pending interrupt with a ~200-byte request).

``python -m bench.weight '{"url": ..., "via": "workers"|"executor"|"pipelined", "count": N}'``

On the benchmark's own redis-server, emptied first: ``used_memory`` (INFO memory) before
and after parking, divided by the number of pending interrupts (ZCARD of the newest
index of the one workflow). Runs are ``bench.flows:cycle`` with parkway-chosen run ids, parked by

* ``workers``: ``Parkway.start`` and a real ``parkway worker`` process (memory read while
  the worker is still registered, so RQ's per-worker keys are in both readings);
* ``executor``: ``Parkway.start`` + the worker's job body in-process (bench.populate);
* ``pipelined``: the same with script calls pipelined (bench.populate), two processes.

Also reported: ``MEMORY USAGE`` of each key of one parked run, and the two listing
indexes' bytes per member, so the total can be read by key.

``"what_if": true`` then changes the parked runs by hand, after every figure above is read, to
measure what the moves of issue 36 not made would save per run (``used_memory`` before and after
each, ÷ the runs; cumulative, in this order): each index's members moved into sorted sets of at most
128 (Redis's listpack limit: the buckets of move 2), every summary key deleted (move 1: none while a
run waits), and fields the run hash could go without deleted until its listpack fits 640 bytes
(move 3: which fields is that move's question; these stand for their bytes). The pause feed's
bytes per run are reported beside them: it is capped (``keys.PAUSE_FEED_MAXLEN``), so its share falls
with more runs.

The second reading is taken once the parked runs' streams are gone: park copies a parked run's few
events into its hash and leaves its stream ``layout.FOLD_WAKE_MS`` (1 s) more, for the readers blocked
on it (``_common.lua``'s fold); Redis drops an expired key when it is read, and the reconciler reads
each parked run's stream once its time is up (``Store.reclaim_folded``, from the pause feed). With a
real worker the reading waits for its reconciler to do that; in-process (no reconciler runs) a SCAN
over the streams reads them as it would. So it reads runs as they wait, not the last second of a
burst of parks; the bytes at once are reported beside it.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import redis

from .env import Workers, emit_result, flush, parkway_worker_argv, parkway_worker_env, run_task
from .flows import request_bytes
from .populate import client

HOURS6 = 6 * 3600 * 1000


def pending(r: redis.Redis) -> int:
    """The pending interrupts: one index per workflow (the runs are all bench_cycle), its members in the
    single zset (before format 4) and in its buckets (their count: keys.bucket_count)."""
    index = "pw:ix:newest:bench_cycle"
    return int(r.zcard(index)) + int(r.hget(index + "/n", "n") or 0)


def used(r: redis.Redis) -> int:
    return int(r.info("memory")["used_memory"])


def by_key(r: redis.Redis, run_id: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for raw in r.scan_iter(match=f"*{{{run_id}}}*", count=1000):
        name = raw.decode().split("}", 1)[1]
        out["pending key" if name.startswith(":p:") else name.lstrip(":")] = int(r.memory_usage(raw, samples=0) or 0)
    n = pending(r)
    per_index: dict[str, int] = {}
    for raw in sorted(r.scan_iter(match="pw:ix:*", count=1000)):  # a bucketed index's keys summed as one
        name = raw.decode().split("/", 1)[0]
        per_index[name] = per_index.get(name, 0) + int(r.memory_usage(raw, samples=0) or 0)
    for name, size in per_index.items():
        out[name + " (per member)"] = size // max(1, n)
    return out


def settled(r: redis.Redis, *, reconciler: bool) -> int:
    """``used_memory`` once the streams of the runs just parked are past their ``FOLD_WAKE_MS``
    and reclaimed: by a worker's reconciler (which runs every second and reads them past a margin),
    else by a SCAN (which reads every key it meets, as the reconciler reads the parked runs')."""
    from parkway.adapters.redis.layout import FOLD_WAKE_MS
    from parkway.adapters.redis.store.housekeeping import RECLAIM_MARGIN_MS

    if reconciler:
        time.sleep((FOLD_WAKE_MS + RECLAIM_MARGIN_MS) / 1000 + 1.5)
    else:
        time.sleep(FOLD_WAKE_MS / 1000 + 0.2)
        for _ in r.scan_iter(match="*}:ev", count=1000):
            pass
    return used(r)


def park_with_workers(url: str, r: redis.Redis, count: int) -> tuple[int, int, str]:
    pw = client(url, HOURS6)
    pool = Workers(parkway_worker_argv(url), 1, {**parkway_worker_env(), "PARKWAY_REDIS_URL": url}).start(r)
    try:
        time.sleep(0.5)
        m0 = used(r)
        last = ""
        for i in range(count):
            last = pw.start("bench.flows:cycle", {"i": i})
        deadline = time.monotonic() + 300
        while pending(r) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {pending(r)} of {count} runs parked")
            time.sleep(0.1)
        time.sleep(0.5)
        at_once = used(r) - m0
        return settled(r, reconciler=True) - m0, at_once, last
    finally:
        pool.stop()


def populate(url: str, count: int, *, pipelined: bool, ttl_ms: int = HOURS6) -> list[dict[str, Any]]:
    """Park ``count`` runs with bench.populate: one process, or two at once when pipelined."""
    from concurrent.futures import ThreadPoolExecutor

    procs = 2 if pipelined else 1
    shares = [count // procs + (1 if k < count % procs else 0) for k in range(procs)]
    with ThreadPoolExecutor(procs) as ex:
        outs = list(
            ex.map(
                lambda share: run_task(
                    "populate", {"url": url, "count": share, "ttl_ms": ttl_ms, "pipelined": pipelined}, 3600
                ),
                shares,
            )
        )
    for out in outs:
        if "error" in out:
            raise RuntimeError(f"populate failed: {out}")
    return outs


WHAT_IF_FIELDS = ("paused", "fresh", "~2", "~1", "ref")
"""fields whose bytes (~130 in a run of ``bench.flows:cycle``) stand for what move 3 would save"""


def what_if(r: redis.Redis, workflow: str = "bench_cycle") -> dict[str, float]:
    """What each remaining move would save, measured by making its end state by hand (cumulative)."""
    n = pending(r)
    out: dict[str, float] = {}
    for key in (f"pw:ix:newest:{workflow}", f"pw:ix:expiring:{workflow}", "pw:runs"):
        members = r.zrange(key, 0, -1, withscores=True)
        m0 = used(r)
        r.delete(key)
        m1 = used(r)
        for i in range(0, len(members), 128):
            r.zadd(f"bench:bucket:{key}:{i // 128}", dict(members[i:i + 128]))
        out[f"{key}: bytes per member, one sorted set"] = (m0 - m1) / max(1, len(members))
        out[f"{key}: bytes per member, buckets of 128"] = (used(r) - m1) / max(1, len(members))
    m0 = used(r)
    summaries = list(r.scan_iter(match="pw:{*}:sum", count=1000))
    for i in range(0, len(summaries), 1000):
        r.delete(*summaries[i:i + 1000])
    out["saved per run: no summary key"] = (m0 - used(r)) / n
    m0 = used(r)
    pipe = r.pipeline(transaction=False)
    for run in r.scan_iter(match="pw:{*}:run", count=1000):
        pipe.hdel(run, *WHAT_IF_FIELDS)
    pipe.execute()
    out["saved per run: the run hash in the 640 B class"] = (m0 - used(r)) / n
    out["the pause feed's bytes per run at this count"] = int(r.memory_usage("pw:pauses", samples=0) or 0) / n
    return out


def measure(params: dict[str, Any]) -> dict[str, Any]:
    url, via, count = params["url"], params["via"], int(params["count"])
    r = redis.Redis.from_url(url)
    flush(r)
    t0 = time.perf_counter()
    if via == "workers":
        delta, at_once, last = park_with_workers(url, r, count)
    else:
        m0 = used(r)
        outs = populate(url, count, pipelined=via == "pipelined")
        last = outs[0]["last_run_id"]
        at_once = used(r) - m0
        delta = settled(r, reconciler=False) - m0
    n = pending(r)
    r.xadd("bench:probe", {"t": "x"})
    probe = int(r.memory_usage("bench:probe", samples=0) or 0)
    r.delete("bench:probe")
    node_max = r.config_get("stream-node-max-bytes").get("stream-node-max-bytes")
    shown = by_key(r, last)
    return {
        "what_if": what_if(r) if params.get("what_if") else None,
        "one_entry_stream_bytes": probe,
        "stream_node_max_bytes": node_max,
        "via": via,
        "parked": n,
        "bytes_per_run": delta / n,
        "bytes_per_run_at_once": at_once / n,
        "request_bytes": request_bytes(),
        "by_key": shown,
        "seconds": time.perf_counter() - t0,
    }


if __name__ == "__main__":
    emit_result(measure(json.loads(sys.argv[1])))
