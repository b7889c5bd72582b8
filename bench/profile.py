"""Where a parkway worker's time goes during the cycle benchmark (py-spy, if installed).

``python -m bench.profile '{"url": ..., "seconds": 10, "system": "parkway"|"floor"}'``

One worker, the figure-1 client (windowed polling) keeping it busy, and
``py-spy record --idle --format raw`` sampling the worker at 200 Hz. Only the main
thread's samples count (the job thread; RQ's pub/sub listener and parkway's maintenance
thread are left out). Each sample is put in one row and one column:

rows (whose work): ``parkway job`` = inside parkway's job body ``execute_with`` (which the
worker calls for a job it runs by its id, and RQ's entrypoint ``execute_job`` calls for one it
read: the executor, its Lua scripts, the node); ``RQ`` = everything else (dequeue, the round
trip that takes the job and carries parkway's ``begin``, heartbeats, and for any job read from
its hash RQ's job load, registries and success bookkeeping).

columns (what the thread was doing), by the innermost frame: ``dequeue wait`` = blocked
in RQ's BLMOVE for the next job (idle, or the dequeue's round trip); ``redis wait`` = blocked
reading any other reply (hiredis's parse happens here too, it is small) or in the socket write;
``redis-py`` = redis-py's own Python (packing commands, building pipelines, parsing
responses into Python values, connection pool); ``python`` = the rest (RQ's or parkway's
own code, msgpack, pydantic, structlog, the node).

For the parkway job row, ``scripts`` is the part spent inside ``RedisStore._call``
(sending parkway's script calls, FCALLs, and waiting for them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from typing import Any

import redis

from .cycles import drive, finish, make
from .env import Workers, emit_result, flush

WAIT_LEAVES = (
    "read_from_socket",
    "_socket_can_read",
    "can_read (redis",
    "send_packed_command",
    "recv_into",
    "sendall",
    "_HiredisParser.read_response",
)


def classify(path: str) -> dict[str, Any]:
    cells: Counter[str] = Counter()
    total = 0
    for line in open(path):
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack:
            continue
        frames = stack.split(";")
        if any("threading.py" in f for f in frames[:3]):
            continue  # not the main thread
        n = int(count)
        total += n
        row = "parkway job" if any("execute_with (parkway/workers/jobs.py" in f for f in frames) else "RQ"
        leaf = frames[-1]
        if any(w in leaf for w in WAIT_LEAVES):
            col = "dequeue wait" if any("dequeue_job_and_maintain_ttl" in f for f in frames) else "redis wait"
        elif "redis/" in leaf or "hiredis" in leaf:
            col = "redis-py"
        else:
            col = "python"
        cells[f"{row}|{col}"] += n
        if row == "parkway job" and any("RedisStore._call" in f for f in frames):
            cells["parkway job|scripts"] += n
        if (
            any(
                "perform_job" in f or "execute_job (rq" in f or "execute_job (parkway/workers/worker" in f
                for f in frames
            )
            or row == "parkway job"
        ):
            cells["in job handling"] += n
    return {"samples": total, "fractions": {k: v / total for k, v in sorted(cells.items())} if total else {}}


def measure(params: dict[str, Any]) -> dict[str, Any]:
    spy = shutil.which("py-spy")
    if spy is None:
        return {"skipped": "py-spy is not installed (pip install py-spy)"}
    url, seconds = params["url"], float(params.get("seconds", 10))
    r = redis.Redis.from_url(url)
    flush(r)
    system = make(params.get("system", "parkway"), url)
    pool = Workers(system.worker_argv(url), 1, system.worker_env(url)).start(r)
    out = os.path.join(tempfile.mkdtemp(prefix="pwbench-prof-"), "worker.txt")
    done = 0
    try:
        drive(system, 30, 16)
        finish(system, 0, 30, 30)
        proc = subprocess.Popen(
            [
                spy,
                "record",
                "--idle",
                "--format",
                "raw",
                "-r",
                "200",
                "-d",
                str(int(seconds)),
                "-p",
                str(pool.procs[0].pid),
                "-o",
                out,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(0.5)
        first = 30
        while proc.poll() is None:
            drive(system, 100, 16, first=first)
            first += 100
            done += 100
        finish(system, 30, done, 64)
        err = proc.stderr.read() if proc.stderr else ""
    finally:
        pool.stop()
    try:
        if not os.path.exists(out):
            return {"skipped": f"py-spy wrote nothing: {err.strip()[-300:]}"}
        return {"system": system.name, "seconds": seconds, "cycles": done, **classify(out)}
    finally:
        shutil.rmtree(os.path.dirname(out), ignore_errors=True)


if __name__ == "__main__":
    emit_result(measure(json.loads(sys.argv[1])))
