"""The worker process: RQ on parkway's queue, with parkway's serializer and housekeeping."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from typing import Any

from rq import Queue, SimpleWorker
from rq.utils import now
from rq.worker_pool import WorkerPool

from ..adapters.redis.store import connect
from ..config import Settings
from .jobs import runtime
from .reconciler import Maintenance
from .serializer import MsgpackSerializer

HEARTBEAT_EVERY = timedelta(seconds=5)
SUSPENSION_CHECK_EVERY_S = 1.0


class ParkwayWorker(SimpleWorker):
    """An RQ SimpleWorker that also renews the lease of the job it runs and takes its turn
    at reconciling (see :mod:`parkway.workers.reconciler`).

    Jobs run in the worker's own process (no fork per job): parkway's jobs are
    short and replay-safe, and a killed worker's attempt is replayed elsewhere.

    It also trims RQ's per-job bookkeeping through RQ's public worker methods
    (rq is pinned to 3.0.x for that): the worker-key heartbeat RQ sends up to
    three times per job, three round trips each, is sent at most every 5 s and
    pipelined (the key lives ``worker_ttl`` + 60 s); ``rq suspend`` is checked at
    most once a second. Job heartbeats, the started registry and crash detection
    are RQ's own, unchanged.
    """

    _suspension_checked = 0.0

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        if pipeline is not None or timeout is not None:
            super().heartbeat(timeout, pipeline)
            return
        if self.last_heartbeat is not None and now() - self.last_heartbeat < HEARTBEAT_EVERY:
            return
        with self.connection.pipeline() as batch:
            super().heartbeat(None, batch)
            batch.execute()

    def check_for_suspension(self, burst: bool) -> None:
        clock = time.monotonic()
        if clock - self._suspension_checked >= SUSPENSION_CHECK_EVERY_S:
            self._suspension_checked = clock
            super().check_for_suspension(burst)

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
