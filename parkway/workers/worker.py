"""The worker process: RQ on parkway's queue, with parkway's serializer and housekeeping."""

from __future__ import annotations

import os
from typing import Any

from rq import Queue, SimpleWorker
from rq.worker_pool import WorkerPool

from ..adapters.redis.store import connect
from ..config import Settings
from .jobs import runtime
from .reconciler import Maintenance
from .serializer import MsgpackSerializer


class ParkwayWorker(SimpleWorker):
    """An RQ SimpleWorker that also renews the lease of the job it runs and takes its turn
    at reconciling (see :mod:`parkway.workers.reconciler`).

    Jobs run in the worker's own process (no fork per job): parkway's jobs are
    short and replay-safe, and a killed worker's attempt is replayed elsewhere.
    """

    def work(self, *args: Any, **kwargs: Any) -> bool:
        rt = runtime()
        maintenance = Maintenance(
            rt.store,
            rt.dispatcher,
            owner=self.name,
            current=lambda: rt.current,
            lease_ms=rt.settings.lease_ms,
            max_lost=rt.settings.max_lost_attempts,
        )
        maintenance.start()
        try:
            return bool(super().work(*args, **kwargs))
        finally:
            maintenance.stop()


def run_worker(settings: Settings, *, burst: bool = False, workers: int = 1) -> None:
    """Work parkway's queue until stopped (or, with ``burst``, until it is empty)."""
    assert settings.redis_url is not None
    if workers < 1:
        raise ValueError("--workers must be at least 1")
    # pool processes and lazily-installed job runtimes read their settings from the environment
    os.environ["PARKWAY_REDIS_URL"] = settings.redis_url
    os.environ["PARKWAY_QUEUE"] = settings.queue
    connection = connect(settings.redis_url)
    if workers > 1:
        pool = WorkerPool(
            [settings.queue],
            connection=connection,
            num_workers=workers,
            worker_class=ParkwayWorker,
            serializer=MsgpackSerializer,
        )
        pool.start(burst=burst, logging_level="WARNING")
        return
    queue = Queue(settings.queue, connection=connection, serializer=MsgpackSerializer)
    worker = ParkwayWorker([queue], connection=connection, serializer=MsgpackSerializer)
    worker.work(burst=burst, logging_level="WARNING")
