"""The RQ floor: the least RQ work a parkway cycle needs, with nothing of parkway in it.

A parkway cycle is two RQ jobs: job 1 runs node 1 until it pauses; the resume (an
outside trigger) enqueues job 2, which replays node 1 and runs node 2. So the floor is
"a trivial job, then, after an outside trigger, a second trivial job":

* ``job1(i)`` RPUSHes ``i`` onto ``bench:floor:parked`` (the signal that it ran, i.e.
  the cheapest possible "park"), ``job2(i)`` does nothing;
* the client pops the signals and enqueues ``job2`` for each (the "resume");
* jobs are enqueued with RQ's own unique enqueue (``enqueue_call`` with an explicit job
  id, ``unique=True``, ``result_ttl=0``, parkway's msgpack serializer): the same job hash
  parkway writes, though parkway writes it inside the Lua call that commits a start or a
  resume rather than in RQ's two round trips; they are run by the same worker class
  (``rq.SimpleWorker``, or parkway's own), so the gap between parkway and the floor is
  parkway's own work.

``python -m bench.floor URL`` runs one such worker on the ``floor`` queue;
``python -m bench.floor URL parkway`` runs parkway's own worker class (``ParkwayWorker``,
a SimpleWorker subclass with parkway's maintenance thread) on it instead: the floor for
parkway's worker as it is, not for stock RQ. The floor's jobs are not parkway's, so that
worker reads them and runs them on RQ's path (trimmed to 4 round trips per job); parkway's
own jobs skip it (run by their id alone), so parkway can cost less than this floor.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import redis
from rq import Queue, SimpleWorker
from rq.exceptions import DuplicateJobError

from parkway.workers.serializer import MsgpackSerializer

QUEUE = "floor"
PARKED = "bench:floor:parked"

_conn: redis.Redis | None = None


def _redis() -> redis.Redis:
    global _conn
    if _conn is None:
        _conn = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])
    return _conn


def job1(i: int) -> None:
    _redis().rpush(PARKED, i)


def job2(i: int) -> None:
    return None


def enqueue(queue: Queue, fn: Callable[..., Any], i: int, job_id: str) -> None:
    """RQ's unique enqueue, with the options parkway's jobs have."""
    try:
        queue.enqueue_call(
            fn, args=(i,), job_id=job_id, unique=True, result_ttl=0, timeout=3600, description=f"floor {i}"
        )
    except DuplicateJobError:
        pass


def worker_class(kind: str) -> type[SimpleWorker]:
    if kind == "parkway":
        from parkway.workers.worker import ParkwayWorker

        class FloorWorker(ParkwayWorker):
            """parkway's worker class, allowed the floor's two jobs (it runs only parkway's entrypoint otherwise)."""

            entrypoints = frozenset({"bench.floor.job1", "bench.floor.job2"})

        return FloorWorker
    return SimpleWorker


def main(url: str, kind: str = "simple") -> None:
    os.environ["BENCH_REDIS_URL"] = url
    connection = redis.Redis.from_url(url)
    queue = Queue(QUEUE, connection=connection, serializer=MsgpackSerializer)
    worker = worker_class(kind)([queue], connection=connection, serializer=MsgpackSerializer)
    worker.work(logging_level="WARNING")


if __name__ == "__main__":
    main(*sys.argv[1:3])
