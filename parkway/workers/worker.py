"""The worker process: RQ on parkway's queue, with parkway's serializer."""

from __future__ import annotations

import redis
from rq import Queue, SimpleWorker
from rq.worker_pool import WorkerPool

from ..config import Settings
from .jobs import install
from .serializer import MsgpackSerializer


def run_worker(settings: Settings, *, burst: bool = False, workers: int = 1) -> None:
    """Work parkway's queue until stopped (or, with ``burst``, until it is empty).

    A SimpleWorker runs jobs in its own process (no fork per job): parkway's
    jobs are short and replay-safe, and a crash is recovered by replay.
    """
    assert settings.redis_url is not None
    if workers < 1:
        raise ValueError("--workers must be at least 1")
    connection = redis.Redis.from_url(settings.redis_url)
    if workers > 1:
        pool = WorkerPool(
            [settings.queue], connection=connection, num_workers=workers, worker_class=SimpleWorker,
            serializer=MsgpackSerializer,
        )
        pool.start(burst=burst, logging_level="WARNING")
        return
    install(settings)
    queue = Queue(settings.queue, connection=connection, serializer=MsgpackSerializer)
    worker = SimpleWorker([queue], connection=connection, serializer=MsgpackSerializer)
    worker.work(burst=burst, logging_level="WARNING")
