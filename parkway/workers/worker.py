"""The worker process: RQ on parkway's queue, with parkway's serializer and housekeeping."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from datetime import timedelta
from typing import Any

from rq import Queue, SimpleWorker
from rq.exceptions import StopRequested
from rq.executions import Execution
from rq.job import Job, JobStatus
from rq.results import Result
from rq.timeouts import TimerDeathPenalty
from rq.utils import now
from rq.worker import WorkerStatus
from rq.worker_pool import WorkerPool

from ..adapters.redis.store import RedisStore, connect
from ..config import Settings
from .jobs import EXECUTE_JOB, WorkerRuntime, runtime, serving
from .reconciler import Maintenance
from .serializer import MsgpackSerializer

HEARTBEAT_EVERY = timedelta(seconds=5)
SUSPENSION_CHECK_EVERY_S = 1.0


class ParkwayWorker(SimpleWorker):
    """An RQ SimpleWorker that also renews the lease of the job it runs and takes its turn
    at reconciling (see :mod:`parkway.workers.reconciler`).

    Jobs run in the worker's own process (no fork per job): parkway's jobs are
    short and replay-safe, and a killed worker's attempt is replayed elsewhere.

    It trims RQ's per-job bookkeeping from about 18 round trips to 4 (dequeue,
    fetch, one transaction to start the job, one to finish it), overriding
    worker methods of rq 3.0.x (pinned for that; ``tests/test_worker.py`` holds
    the guarantees):

    - the worker-key heartbeat RQ sends up to three times per job, three round
      trips each, is sent at most every 5 s, pipelined (the key lives
      ``worker_ttl`` + 60 s); ``rq suspend`` is checked at most once a second;
      an unchanged worker state is not rewritten;
    - starting a job (its execution record, started registry entry, status,
      removal from the intermediate list) is one MULTI instead of two, and a
      parkway job's ``begin`` (fence check, lease) runs inside it;
    - a job that succeeds with ``result_ttl=0`` (all of parkway's) is deleted
      in the same MULTI that records the success, instead of RQ's read-then-delete
      of its registries; the dependents check is skipped, so **no job on the
      queues this worker serves may be a** ``depends_on`` **target** (parkway
      enqueues each next job itself).

    Failures, retries, job heartbeats while a job runs, the started registry and
    crash detection are RQ's own, unchanged: a job killed mid-run stays in the
    started registry and is recovered as in stock RQ.

    The same class runs embedded mode's jobs, on a thread of the application's
    process (see :mod:`parkway.workers.embedded`), with the runtime it is given
    (``runtime=``) instead of one installed from the environment. Off the main
    thread (signals reach only that one) it leans on RQ's internals again, each
    checked by ``tests/test_embedded.py``: ``_install_signal_handlers`` does
    nothing, nor does ``procline`` (the process title is the application's);
    ``death_penalty_class`` is RQ's ``TimerDeathPenalty`` instead of SIGALRM;
    ``stop()`` sets RQ's ``_stop_requested`` and makes ``heartbeat``, which RQ
    calls each time its wait for a job times out, raise RQ's ``StopRequested``.
    """

    _suspension_checked = 0.0
    _stopped = False
    """set by ``stop()`` (RQ's own warm shutdown, by signal, sets ``_stop_requested`` only)"""

    def __init__(self, *args: Any, runtime: WorkerRuntime | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._parkway: WorkerRuntime | None = runtime

    def parkway_runtime(self) -> WorkerRuntime:
        """The runtime this worker's jobs run with: its own, or this process's from the environment."""
        return self._parkway if self._parkway is not None else runtime()

    def stop(self) -> None:
        """Ask the work loop, from another thread, to end after the job it runs (if any); it does
        within a dequeue timeout."""
        self._stopped = True
        self._stop_requested = True  # RQ's loop checks it between jobs

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is threading.main_thread():
            super()._install_signal_handlers()  # type: ignore[no-untyped-call]

    def procline(self, message: str) -> None:
        if threading.current_thread() is threading.main_thread():
            super().procline(message)  # type: ignore[no-untyped-call]

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        if pipeline is not None or timeout is not None:
            super().heartbeat(timeout, pipeline)
            return
        if self._stopped:  # RQ calls this each time its wait for a job times out: end the loop there
            raise StopRequested()
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

    def set_state(self, state: str, pipeline: Any = None) -> None:
        if pipeline is None and state == getattr(self, "_state", None):
            return
        super().set_state(state, pipeline)

    def execute_job(self, job: Job, queue: Queue) -> None:
        """RQ's prepare_execution and prepare_job_execution, in one transaction; for a parkway
        job, the store's ``begin`` (fence check, lease) runs in the same transaction."""
        ttl = self.get_heartbeat_ttl(job)
        store, begin = _begin_command(job, self.parkway_runtime)
        with self.connection.pipeline() as pipe:
            execution = Execution.create(job, ttl, pipeline=pipe, worker_name=self.name)
            self.executions[execution.id] = execution
            self.set_state(WorkerStatus.BUSY, pipeline=pipe)
            self.heartbeat(ttl, pipeline=pipe)
            job.prepare_for_execution(self.name, pipeline=pipe)  # sets last_heartbeat too: no job.heartbeat
            pipe.persist(job.key)
            if len(self.queues) == 1:
                pipe.lrem(queue.intermediate_queue_key, 1, job.id)
            if store is None:
                pipe.execute()
            else:
                pipe.execute_command(*begin)  # type: ignore[no-untyped-call]
                replies = pipe.execute(raise_on_error=False)
                store.began(replies[-1])  # an error here is the job's, raised when it begins
                for reply in replies[:-1]:
                    if isinstance(reply, Exception):
                        raise reply
        with serving(self._parkway) if self._parkway is not None else nullcontext():
            self.perform_job(job, queue, execution)
        self.set_state(WorkerStatus.IDLE)

    def prepare_job_execution(self, job: Job, remove_from_intermediate_queue: bool = False) -> None:
        """Nothing left to do: ``execute_job``, the only caller of ``perform_job`` in a
        SimpleWorker, wrote all of it in its start transaction."""

    def handle_execution_ended(self, job: Job, queue: Queue, heartbeat_ttl: int) -> None:
        if job.get_status(refresh=False) == JobStatus.FAILED or not _deleted_on_success(job, self):
            super().handle_execution_ended(job, queue, heartbeat_ttl)
        else:
            job.ended_at = now()  # the job is deleted in the next transaction: no heartbeat to write

    def handle_job_success(self, job: Job, queue: Queue, started_job_registry: Any, execution: Execution) -> None:
        if not _deleted_on_success(job, self):
            super().handle_job_success(job, queue, started_job_registry, execution)
            return
        assert job.started_at is not None and job.ended_at is not None
        with self.connection.pipeline() as pipe:
            self.increment_successful_job_count(pipeline=pipe)
            self.increment_total_working_time(job.ended_at - job.started_at, pipe)
            self.cleanup_execution(job, pipeline=pipe, execution=execution)
            pipe.delete(
                job.key,
                job.dependents_key,
                job.dependencies_key,
                Result.get_key(job.id),  # type: ignore[no-untyped-call]
                job.execution_registry.key,
            )
            pipe.hset(self.key, "state", WorkerStatus.IDLE)
            pipe.execute()
        # only now: a stop signal while the state says busy waits for the job to end (RQ's warm shutdown)
        self._state = WorkerStatus.IDLE
        job._status = JobStatus.FINISHED

    def work(self, *args: Any, with_maintenance: bool = True, **kwargs: Any) -> bool:
        """RQ's work loop; with ``with_maintenance`` (the default) also parkway's lease renewal and
        reconciling thread, on the worker's runtime (its own, or one from the environment)."""
        if threading.current_thread() is not threading.main_thread():
            self.death_penalty_class = TimerDeathPenalty  # SIGALRM reaches only the main thread
        if not with_maintenance:
            return bool(super().work(*args, **kwargs))
        rt = self.parkway_runtime()
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


def _begin_command(job: Job, runtime: Callable[[], WorkerRuntime]) -> tuple[RedisStore | None, tuple[Any, ...]]:
    """For a parkway job, the store and its ``begin`` command to send inside RQ's start transaction.

    (None, ()) for any other job, and for one whose data does not decode, has the wrong shape,
    or whose runtime cannot be set up: RQ then runs (and fails) it as usual, in ``perform_job``;
    the worker does not die of it.
    """
    try:
        if job.func_name != EXECUTE_JOB:
            return None, ()
        run_id, step, fence = job.args
        rt = runtime()
        clock = rt.options.clock()
        return rt.store, rt.store.begin_command(str(run_id), int(step), int(fence), clock, clock + rt.options.lease_ms)
    except Exception:  # noqa: BLE001 - any such job is RQ's to fail, not the worker's to die of
        return None, ()


def _deleted_on_success(job: Job, worker: SimpleWorker) -> bool:
    """Whether RQ would delete the job right after it succeeds, with nothing else to do."""
    return (
        job.get_result_ttl(worker.default_result_ttl) == 0
        and not job.repeats_left
        and not job.group_id
        and not job.has_rate_limit
    )


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
