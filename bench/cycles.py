"""Figures 1 and 6: pause/resume cycles per second, parkway and the RQ floor.

``python -m bench.cycles '{"system": "parkway"|"floor", "url": ..., "n": 1000, "workers": 1, "window": 16}'``

Mode measured ("windowed polling"): the client keeps ``window`` runs started and not yet
resumed. It asks for paused runs (parkway: ``list_interrupts(workflow=..., limit=100,
include_tokens=True, wait_ms=1000)``, a listing that, finding none, waits on the pause feed
for the next pause instead of being repeated; floor: ``LPOP bench:floor:parked 100``),
sleeps 0.5 ms when a poll finds nothing (parkway: only after a second without a pause),
resumes every paused run it found one at a time (parkway: ``resume(token,
selected=...)``; floor: enqueue job 2) and starts a new run for each one resumed. The
clock runs from the first start to the last completion.

CPU per cycle: worker processes from /proc/<pid>/stat (utime+stime), Redis from
INFO cpu (used_cpu_user+used_cpu_sys), the client from os.times(); each a delta over
the timed window divided by the number of cycles.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import redis

from .env import SECRET, Workers, emit_result, flush, parkway_worker_argv, parkway_worker_env, redis_cpu, self_cpu
from .flows import ANSWER

POLL_SLEEP = 0.0005
LIST_WAIT_MS = 1000
"""how long parkway's listing waits for a pause when it finds none (``list_interrupts(wait_ms=)``)"""
COMPLETION_TIMEOUT = 120.0
STALL_S = 60.0


class ParkwayCycles:
    name = "parkway"

    def __init__(self, url: str, workflow: str = "bench.flows:cycle", wf_name: str = "bench_cycle") -> None:
        from parkway import Parkway, Settings

        self.pw = Parkway(Settings(redis_url=url, secret=SECRET))
        self.workflow, self.wf_name = workflow, wf_name
        self.started: list[str] = []
        self.empty_polls = 0

    def worker_argv(self, url: str) -> list[str]:
        return parkway_worker_argv(url)

    def worker_env(self, url: str) -> dict[str, str]:
        return {**parkway_worker_env(), "PARKWAY_REDIS_URL": url}

    def start(self, i: int) -> None:
        self.started.append(self.pw.start(self.workflow, {"i": i}))

    def poll(self) -> list[Any]:
        return [
            (i.run_id, i.resume_token)
            for i in self.pw.list_interrupts(
                workflow=self.wf_name, limit=100, include_tokens=True, wait_ms=LIST_WAIT_MS
            ).items
        ]

    def block(self, index: int) -> list[Any]:
        run_id = self.started[index]
        for event in self.pw.stream(run_id, until="settled", timeout=60):
            if event.type == "interrupt":
                return [(run_id, event.data["resumeToken"])]
        raise RuntimeError(f"run {run_id} ended without pausing")

    def resume(self, item: Any) -> None:
        result = self.pw.resume(item[1], selected=ANSWER)
        if not result.accepted:
            raise RuntimeError(f"resume of {item[0]} was {result.outcome.value}")

    def wait_done(self, index: int, timeout: float) -> None:
        from parkway import RunStatus

        run_id = self.started[index]
        deadline = time.monotonic() + timeout
        while True:
            run = self.pw.get_run(run_id)
            if run.status is RunStatus.COMPLETED:
                return
            if run.status.finished:
                raise RuntimeError(f"run {run_id} ended {run.status.value}: {run.error}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"run {run_id} is still {run.status.value}")
            self.pw.wait(run_id, timeout=max(0.1, deadline - time.monotonic()))
            time.sleep(0.0005)


class FloorCycles:
    name = "floor"

    def __init__(self, url: str, worker: str = "simple") -> None:
        from rq import Queue

        from parkway.workers.serializer import MsgpackSerializer

        from . import floor

        os.environ["BENCH_REDIS_URL"] = url
        self.floor = floor
        self.r = redis.Redis.from_url(url)
        self.queue = Queue(floor.QUEUE, connection=self.r, serializer=MsgpackSerializer)
        self.started: list[int] = []
        self.empty_polls = 0
        self.worker = worker
        if worker == "parkway":
            self.name = "floor-pw"

    def worker_argv(self, url: str) -> list[str]:
        return [sys.executable, "-m", "bench.floor", url, self.worker]

    def worker_env(self, url: str) -> dict[str, str]:
        return {"BENCH_REDIS_URL": url, **parkway_worker_env(), "PARKWAY_REDIS_URL": url}

    def start(self, i: int) -> None:
        self.floor.enqueue(self.queue, self.floor.job1, i, f"f1-{i}")
        self.started.append(i)

    def poll(self) -> list[Any]:
        return [int(x) for x in (self.r.lpop(self.floor.PARKED, 100) or [])]

    def block(self, index: int) -> list[Any]:
        popped = self.r.blpop([self.floor.PARKED], timeout=60)
        if popped is None:
            raise RuntimeError("no job 1 finished within 60 s")
        return [int(popped[1])]

    def resume(self, item: Any) -> None:
        self.floor.enqueue(self.queue, self.floor.job2, item, f"f2-{item}")

    def wait_done(self, index: int, timeout: float) -> None:
        # result_ttl=0: RQ deletes a job's hash when it succeeds
        key = f"rq:job:f2-{self.started[index]}"
        deadline = time.monotonic() + timeout
        while self.r.exists(key):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{key} is still there")
            time.sleep(0.0005)


def drive(system: Any, n: int, window: int, first: int = 0, mode: str = "poll") -> None:
    """Start, wait for the pause, resume: ``n`` cycles with ``window`` runs started and not resumed."""
    started = resumed = 0
    progress = time.monotonic()
    while resumed < n:
        while started < n and started - resumed < window:
            system.start(first + started)
            started += 1
        items = system.poll() if mode == "poll" else system.block(first + resumed)
        if not items:
            system.empty_polls += 1
            if time.monotonic() - progress > STALL_S:
                raise RuntimeError(f"no run paused for {STALL_S:.0f} s: is the worker alive?")
            time.sleep(POLL_SLEEP)
            continue
        progress = time.monotonic()
        for item in items:
            system.resume(item)
            resumed += 1
            if started < n and started - resumed < window:
                system.start(first + started)
                started += 1


def finish(system: Any, first: int, n: int, tail: int) -> None:
    """Wait for the last ``tail`` cycles (the rest finished before them)."""
    for index in range(first + n - 1, max(first, first + n - tail) - 1, -1):
        system.wait_done(index, COMPLETION_TIMEOUT)


def verify(system: Any, first: int, n: int) -> int:
    """Every cycle completed? Returns how many had to be waited for after the clock stopped."""
    late = 0
    for index in range(first, first + n):
        try:
            system.wait_done(index, 0)
        except RuntimeError:
            late += 1
            system.wait_done(index, COMPLETION_TIMEOUT)
    return late


def make(system: str, url: str) -> Any:
    """parkway, floor (stock rq.SimpleWorker) or floor-pw (the floor run by parkway's worker class)."""
    if system == "parkway":
        return ParkwayCycles(url)
    return FloorCycles(url, "parkway" if system == "floor-pw" else "simple")


def measure(params: dict[str, Any]) -> dict[str, Any]:
    url, n, workers = params["url"], int(params["n"]), int(params.get("workers", 1))
    window = int(params.get("window", 16))
    warmup = int(params.get("warmup", 30))
    mode = params.get("mode", "poll")
    r = redis.Redis.from_url(url)
    flush(r)
    system = make(params["system"], url)
    pool = Workers(system.worker_argv(url), workers, system.worker_env(url)).start(r)
    try:
        drive(system, warmup, window, mode=mode)
        finish(system, 0, warmup, warmup)
        system.empty_polls = 0
        w0, r0, c0, t0 = pool.cpu(), redis_cpu(r), self_cpu(), time.perf_counter()
        drive(system, n, window, first=warmup, mode=mode)
        finish(system, warmup, n, tail=max(4 * window, 8 * workers))
        t1 = time.perf_counter()
        w1, r1, c1 = pool.cpu(), redis_cpu(r), self_cpu()
        late = verify(system, warmup, n)
        if late:  # the clock stopped too early: charge the time it took to finish them
            t1, w1, r1, c1 = time.perf_counter(), pool.cpu(), redis_cpu(r), self_cpu()
    finally:
        pool.stop()
    elapsed = t1 - t0
    return {
        "system": system.name,
        "workers": workers,
        "window": window,
        "mode": mode,
        "cycles": n,
        "seconds": elapsed,
        "cycles_per_s": n / elapsed,
        "worker_cpu_ms": (w1 - w0) / n * 1000,
        "redis_cpu_ms": (r1 - r0) / n * 1000,
        "client_cpu_ms": (c1 - c0) / n * 1000,
        "empty_polls": system.empty_polls,
        "late": late,
    }


if __name__ == "__main__":
    emit_result(measure(json.loads(sys.argv[1])))
