"""A burst of due interrupts: every expiry is recorded and its policy applied, however many fall due.

``python -m bench.expiry_burst [--runs 20000] [--window-s 33] [--lead-s 40] [--workers 2]
[--policy cancel] [--grace-ms 60000] [--timeout 900]``

Not a test (pytest never collects it). It starts its own redis-server and ``--workers`` ``parkway
worker`` processes, then starts ``--runs`` runs of ``bench.expiry_flows:until`` whose interrupts
fall due spread over ``--window-s`` seconds from ``--lead-s`` after the first start (one parked
after its deadline gets the 1 s minimum TTL: due a second after its pause). Nobody answers: the
workers' reconcilers expire them all, under ``--policy`` (``cancel``: each node replays with the
cancellation and completes; ``expire``; ``fail``).

While it runs, it samples the backlog (``Store.overdue``: interrupts past their expiry not yet
recorded, and the oldest one's lateness) every 0.5 s, and times a listing of the first 50 pending
interrupts every 50 ms. At the end it checks every run: its end is the one its policy gives, and
its interrupt's lifecycle record says expired. It prints one JSON report: backlog max (count and
oldest lateness), time to drain (from the last deadline to an empty backlog), ends applied/total,
listing p50/p99 before the first deadline and while the backlog was not empty, runs:* counters,
and when every interrupt was parked (``all_parked_s``: past ``--lead-s``, parking itself
spread the burst).
Exit code 0 if every run ended as its policy says, else 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

import redis

from parkway import Parkway, RunStatus, Settings
from parkway.adapters.redis import keys
from parkway.runtime.clock import now_ms

from .env import SECRET, RedisServer, Workers, parkway_worker_argv, percentile

FLOW_REF = "bench.expiry_flows:until"
ENDS = {"cancel": RunStatus.COMPLETED, "expire": RunStatus.EXPIRED, "fail": RunStatus.FAILED}


class Sampler:
    """The backlog every 0.5 s and a listing's latency every 50 ms, on threads of their own."""

    def __init__(self, pw: Parkway) -> None:
        self.pw = pw
        self.backlog: list[tuple[int, int, int, int]] = []
        """(when, overdue count, oldest lateness ms, pending and not yet due)"""
        self.listings: list[tuple[int, float]] = []
        """(when, seconds)"""
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._watch, daemon=True),
                         threading.Thread(target=self._list, daemon=True)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(5)

    def _watch(self) -> None:
        while not self._stop.wait(0.5):
            now = now_ms()
            tallies = self.pw.store.tallies(now)
            self.backlog.append((now, tallies.overdue, tallies.overdue_ms, sum(tallies.pending.values())))

    def _list(self) -> None:
        while not self._stop.wait(0.05):
            began = time.perf_counter()
            self.pw.list_interrupts(limit=50)
            self.listings.append((now_ms(), time.perf_counter() - began))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=20_000)
    p.add_argument("--window-s", type=float, default=33.0)
    p.add_argument("--lead-s", type=float, default=40.0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--policy", choices=sorted(ENDS), default="cancel")
    p.add_argument("--grace-ms", type=int, default=60_000)
    p.add_argument("--timeout", type=float, default=900.0)
    args = p.parse_args(argv)

    server = RedisServer().start()
    client = redis.Redis.from_url(server.url)
    env = {"PARKWAY_SECRET": SECRET, "PARKWAY_EXPIRY_GRACE_MS": str(args.grace_ms)}
    workers = Workers(parkway_worker_argv(server.url), args.workers, env).start(client)
    try:
        return _burst(args, server.url, client)
    finally:
        workers.stop()
        server.stop()


def _burst(args: argparse.Namespace, url: str, client: redis.Redis) -> int:
    from .expiry_flows import until

    settings = Settings(redis_url=url, secret=SECRET)
    with Parkway(settings) as pw:
        began = now_ms()
        first = began + int(args.lead_s * 1000)
        last = first + int(args.window_s * 1000)
        sampler = Sampler(pw)
        sampler.start()
        runs = [
            pw.start(until, {"policy": args.policy, "deadline": first + (last - first) * i // max(1, args.runs - 1)})
            for i in range(args.runs)
        ]
        started = now_ms()
        end = ENDS[args.policy]
        deadline = time.monotonic() + args.timeout
        left = set(runs)
        while left and time.monotonic() < deadline:
            time.sleep(1.0)
            pipe = client.pipeline(transaction=False)
            ordered = sorted(left)
            for run_id in ordered:
                pipe.hget(keys.summary(run_id), "status")
            for run_id, status in zip(ordered, pipe.execute(), strict=True):
                if status == end.value.encode():
                    left.discard(run_id)
        settled = now_ms()
        time.sleep(1.0)
        sampler.stop()
        applied = sum(_applied(pw, client, r, args.policy) for r in runs)
        report = _report(args, sampler, began, started, first, last, settled, applied, len(runs), client)
    print(json.dumps(report, indent=2))
    return 0 if applied == len(runs) else 1


def _applied(pw: Parkway, client: redis.Redis, run_id: str, policy: str) -> bool:
    """Whether the run ended as its policy says, with its interrupt's lifecycle record saying expired."""
    run = pw.get_run(run_id)
    if run.status is not ENDS[policy]:
        return False
    if policy == "cancel" and (run.output or {}).get("cancelled") != "expired":
        return False
    ends = [f.decode() for f in client.hkeys(keys.summary(run_id)) if f.startswith(b"e:")]
    return len(ends) == 1 and b"expired" in (client.hget(keys.summary(run_id), ends[0]) or b"")


def _report(
    args: argparse.Namespace, sampler: Sampler, began: int, started: int, first: int, last: int, settled: int,
    applied: int, total: int, client: redis.Redis,
) -> dict[str, Any]:
    busy = [when for when, count, _, _ in sampler.backlog if count > 0]
    parked = [when for when, count, _, pending in sampler.backlog if count + pending >= total]
    drained = max(busy) if busy else last
    before = [s * 1000 for when, s in sampler.listings if when < first]
    during = [s * 1000 for when, s in sampler.listings if busy and min(busy) <= when <= drained]
    counters = {k.decode(): int(v) for k, v in client.hgetall(keys.metrics()).items() if k.startswith(b"runs:")}
    return {
        "command": "python -m bench.expiry_burst " + " ".join(sys.argv[1:]),
        "runs": total,
        "policy": args.policy,
        "workers": args.workers,
        "grace_ms": args.grace_ms,
        "starts_s": round((started - began) / 1000, 1),
        "due_from_s": round((first - began) / 1000, 1),
        "due_until_s": round((last - began) / 1000, 1),
        "all_parked_s": round((min(parked) - began) / 1000, 1) if parked else None,
        "backlog_max": max((c for _, c, _, _ in sampler.backlog), default=0),
        "oldest_overdue_max_s": round(max((a for _, _, a, _ in sampler.backlog), default=0) / 1000, 1),
        "drained_after_last_deadline_s": round(max(0, drained - last) / 1000, 1),
        "all_settled_after_last_deadline_s": round(max(0, settled - last) / 1000, 1),
        "ends_applied": applied,
        "ends_total": total,
        "listing_ms_before_due": {"p50": round(percentile(before, 50), 1), "p99": round(percentile(before, 99), 1),
                                  "n": len(before)},
        "listing_ms_while_backlog": {"p50": round(percentile(during, 50), 1),
                                     "p99": round(percentile(during, 99), 1), "n": len(during)},
        "counters": counters,
    }


if __name__ == "__main__":
    raise SystemExit(main())
