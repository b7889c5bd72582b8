"""A worker's and Redis's CPU per job over a backlog of jobs that each park once.

``python -m bench.backlog '{"url": ..., "n": 3000}'``

Not a figure of ``python -m bench``: an A/B tool for the worker's own cost, with no client at work
while it is measured. One ``parkway worker`` is started and warmed (200 runs of ``bench.flows:cycle``
parked), then stopped (SIGSTOP); ``n`` runs are started, so each job waits on the queue; the
worker is let go (SIGCONT), and the figures are taken from then until the last run parks (a
single worker takes them in order): its CPU (``/proc``), Redis's (INFO cpu), both per job, and
jobs per second. Each job is one take-and-begin and one park (issue 36's move 2: the park carries
the next dequeue). The only other commands meanwhile are this process's polls of the last run's
status, every 50 ms.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import redis

from parkway import Parkway, RunStatus, Settings

from . import flows
from .env import SECRET, emit_result, flush, parkway_worker_argv, proc_cpu, redis_cpu

WARM = 200


def measure(params: dict[str, Any]) -> dict[str, Any]:
    url, n = params["url"], int(params.get("n", 3000))
    r = redis.Redis.from_url(url)
    flush(r)
    pw = Parkway(Settings(redis_url=url, secret=SECRET))
    worker = subprocess.Popen(
        parkway_worker_argv(url), env={**os.environ, "PARKWAY_SECRET": SECRET},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        _parked(pw, [pw.start(flows.cycle, {}) for _ in range(WARM)][-1])
        time.sleep(0.3)
        os.kill(worker.pid, signal.SIGSTOP)
        run_ids = [pw.start(flows.cycle, {}) for _ in range(n)]
        cpu0, redis0, t0 = proc_cpu(worker.pid), redis_cpu(r), time.monotonic()
        os.kill(worker.pid, signal.SIGCONT)
        _parked(pw, run_ids[-1])
        cpu1, redis1, t1 = proc_cpu(worker.pid), redis_cpu(r), time.monotonic()
    finally:
        os.kill(worker.pid, signal.SIGCONT)
        worker.terminate()
        worker.wait(10)
        pw.close()
        r.close()
    return {
        "jobs": n,
        "jobs_per_s": round(n / (t1 - t0)),
        "worker_us_per_job": round((cpu1 - cpu0) / n * 1e6, 1),
        "redis_us_per_job": round((redis1 - redis0) / n * 1e6, 1),
    }


def _parked(pw: Parkway, run_id: str, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while pw.get_run(run_id).status is not RunStatus.WAITING:
        if time.monotonic() > deadline:
            raise TimeoutError(f"run {run_id} did not park within {timeout}s")
        time.sleep(0.05)


if __name__ == "__main__":
    emit_result(measure(json.loads(sys.argv[1])))
