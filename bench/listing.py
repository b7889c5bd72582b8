"""Figure 5: ``Parkway.list_interrupts`` at 1,000 / 100,000 / 1,000,000 pending interrupts.

``python -m bench.listing '{"url": ..., "sizes": [1000, 100000, 1000000], "queries": 300, "runs": 3}'``

The benchmark's own redis-server is emptied, then filled up to each size in turn with
``bench.populate.bulk_park`` (two processes at once; see that module for how the keys are
the ones park.lua writes), and at each size, ``runs`` times:

* first page: ``list_interrupts()`` (newest first, the default page of 50, no tokens),
  ``queries`` times;
* deep page: ``list_interrupts(cursor=C)`` where C is the cursor a page ending at the
  member of rank N/2 of the ``newest`` index would return (built from ``ZREVRANGE`` with
  parkway's own ``make_cursor``, sealed as the client seals its cursors; checked: the page
  starts at rank N/2 + 1), ``queries`` times.

p50 / p99 of the client-side wall time of each call (one at a time, no other load). Before
timing, the client does ``gc.collect(); gc.freeze()``: a full collection over the ~10^5
objects that importing parkway, pydantic, redis-py and rq leaves takes 20-35 ms and would
otherwise land in about 1 call in 200 whatever the size; collections of what the calls
themselves allocate still count.
``used_memory`` per pending interrupt is recorded at each size too.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import redis

from .env import emit_result, flush, percentile, run_task
from .populate import client

HOURS6 = 6 * 3600 * 1000


def bulk(url: str, count: int, procs: int = 2, check: bool = False) -> float:
    shares = [count // procs + (1 if k < count % procs else 0) for k in range(procs)]
    shares = [s for s in shares if s > 0]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(shares)) as ex:
        outs = list(
            ex.map(
                lambda share: run_task(
                    "populate", {"url": url, "count": share, "ttl_ms": HOURS6, "bulk": True, "check": check}, 3600
                ),
                shares,
            )
        )
    for out in outs:
        if "error" in out:
            raise RuntimeError(f"bulk populate failed: {out}")
        if check and not out.get("same_shape"):
            raise RuntimeError("a bulk-replayed run's keys differ from the really parked template's")
    return time.perf_counter() - t0


NEWEST = "pw:ix:newest:bench_cycle"
"""the newest index of the one workflow the fill parks (parkway keeps one index per workflow)"""


def middle_cursor(pw: Any, r: redis.Redis, n: int) -> tuple[str, str]:
    """The cursor of a page ending at rank n/2 of the newest index, sealed as ``pw`` seals the
    cursors it hands out, and the run id after it."""
    from parkway.adapters import codec
    from parkway.runtime import cursors

    rank = n // 2
    members = newest_at(r, rank - 1, 2)
    after = codec.parse_member(members[1], "newest", "bench_cycle").run_id
    return cursors.seal(pw.backend.options.secret, codec.make_cursor(members[0], "newest")), after


def pending(r: redis.Redis) -> int:
    """The members of the newest index: its single zset's and its buckets' (format 4: keys.bucket_count)."""
    return int(r.zcard(NEWEST)) + int(r.hget(NEWEST + "/n", "n") or 0)


def newest_at(r: redis.Redis, rank: int, count: int) -> list[bytes]:
    """``count`` members of the newest index from ``rank`` (0: the newest) on: from its single zset
    when it holds them (a fill written before format 4), else from its buckets, the directory walked
    from the top (one ZCARD per bucket, pipelined)."""
    if r.zcard(NEWEST):
        return list(r.zrevrange(NEWEST, rank, rank + count - 1))
    directory = NEWEST + "/d"
    buckets = [NEWEST + "/d:" + entry.rsplit(b"\0", 1)[1].decode() for entry in r.zrevrange(directory, 0, -1)]
    pipe = r.pipeline(transaction=False)
    for bucket in buckets:
        pipe.zcard(bucket)
    out: list[bytes] = []
    for bucket, size in zip(buckets, pipe.execute(), strict=True):
        if rank < size:
            out += r.zrevrange(bucket, rank, rank + count - len(out) - 1)
            rank = 0
            if len(out) >= count:
                break
        else:
            rank -= size
    return out


def timed(fn: Any, q: int) -> dict[str, float]:
    values = []
    for _ in range(q):
        t0 = time.perf_counter()
        fn()
        values.append((time.perf_counter() - t0) * 1000)
    return {"p50_ms": percentile(values, 50), "p99_ms": percentile(values, 99)}


def measure(params: dict[str, Any]) -> dict[str, Any]:
    url, sizes = params["url"], sorted(int(s) for s in params["sizes"])
    q, runs = int(params.get("queries", 300)), int(params.get("runs", 3))
    r = redis.Redis.from_url(url)
    flush(r)
    pw = client(url)
    m0 = int(r.info("memory")["used_memory"])
    out: dict[str, Any] = {"sizes": {}}
    have = 0
    for size in sizes:
        fill = size - have
        # each populate process adds its own template run; the first step also compares key shapes
        seconds = bulk(url, fill - 2, check=have == 0) if fill > 2 else 0.0
        if fill <= 2:
            from .populate import park_runs

            park_runs(pw, fill)
        n = pending(r)
        have = n
        cursor, after = middle_cursor(pw, r, n)
        deep = pw.list_interrupts(cursor=cursor)
        first_member = deep.items[0].run_id
        if after != first_member or len(deep.items) != 50:
            raise RuntimeError(f"the middle cursor is off: page starts at {first_member}, expected {after}")
        first = pw.list_interrupts()
        if len(first.items) != 50 or first.next_cursor is None:
            raise RuntimeError("the first page is not a full page")
        point: dict[str, Any] = {
            "pending": n,
            "fill_seconds": seconds,
            "bytes_per_pending": (int(r.info("memory")["used_memory"]) - m0) / n,
            "used_memory_mb": int(r.info("memory")["used_memory"]) / 2**20,
            "first": [],
            "deep": [],
        }
        gc.collect()
        gc.freeze()  # import-time objects out of the collector's way (see the docstring)
        for _ in range(runs):
            point["first"].append(timed(lambda: pw.list_interrupts(), q))
            point["deep"].append(timed(lambda c=cursor: pw.list_interrupts(cursor=c), q))
        out["sizes"][str(size)] = point
    flush(r)  # leave the next figure an empty, responsive server
    return out


if __name__ == "__main__":
    emit_result(measure(json.loads(sys.argv[1])))
