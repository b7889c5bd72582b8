"""The worker process: RQ on parkway's queue, with parkway's serializer and housekeeping;
no job stops it or runs anything but parkway's entrypoint."""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from datetime import timedelta
from types import FrameType
from typing import Any

import redis
import structlog
from rq import Queue, SimpleWorker
from rq.defaults import DEFAULT_FAILURE_TTL
from rq.exceptions import DeserializationError, NoSuchJobError, StopRequested
from rq.executions import Execution
from rq.job import Job, JobStatus, validate_job_id
from rq.results import Result
from rq.timeouts import TimerDeathPenalty
from rq.utils import current_timestamp, now
from rq.worker import WorkerStatus
from rq.worker_pool import WorkerPool

from ..adapters.redis.store import connect
from ..config import Settings
from ..runtime.store import Attempt
from .jobs import EXECUTE_JOB, WorkerRuntime, install, serving, worker_runtime
from .reconciler import Maintenance
from .serializer import MsgpackSerializer

log = structlog.get_logger("parkway")

HEARTBEAT_EVERY = timedelta(seconds=5)
SUSPENSION_CHECK_EVERY_S = 1.0
POOL_CHECK_EVERY_S = 0.5

JOB_CALLBACK_FIELDS = ("_success_callback_name", "_failure_callback_name", "_stopped_callback_name")
"""where ``rq.job.Job`` keeps the callbacks a job hash names; RQ imports and calls them around the job"""


class ParkwayJob(Job):
    """RQ's Job, except that the callbacks its hash names are never imported or called (parkway
    sets none, and RQ would run those of a hash written by hand after the job, or when its
    cleanup fails the job as abandoned), and that a job its worker began in its start
    transaction hands the entrypoint what began (``began``)."""

    began: Callable[[], Attempt] | None = None
    """set by the worker that sent the activation's ``begin`` with its start transaction: reads
    the reply (see ``RedisStore.begin_command``); passed to ``execute_job`` as its ``began``"""

    def _execute(self) -> Any:
        if self.began is None:
            return super()._execute()
        return self.func(*self.args, began=self.began)

    @property
    def success_callback(self) -> None:
        return None

    @property
    def failure_callback(self) -> None:
        return None

    @property
    def stopped_callback(self) -> None:
        return None


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

    No job stops it or runs anything but parkway's entrypoint (``tests/test_worker_armour.py``,
    which also checks the RQ internals named here):

    - a job runs only if it names a function in ``entrypoints`` (parkway's own) with the arguments
      parkway gives it, and no instance, callbacks or webhooks; any other is failed into RQ's
      failed registry from its stored fields, before anything is imported;
    - every queue it serves reads job hashes with msgpack and as ``ParkwayJob`` (RQ keeps the
      callbacks' names in ``JOB_CALLBACK_FIELDS``; they are never resolved), RQ's cleanups included;
    - a job RQ cannot load is set aside: off the intermediate list and, if RQ accepts its id, into
      the failed registry. RQ's ``Queue._fetch_dequeued_job`` names it on the error (``job_id``,
      ``queue``); an id that is not UTF-8 fails earlier, in a ``UnicodeDecodeError`` that holds
      it. A starting worker clears such leftovers from the intermediate list before RQ's cleanup,
      which would die on them; a failed maintenance pass is logged, not fatal;
    - a pool's child stops (warm) once its pool's process is gone (``pool_pid``);
    - ``ended_as_asked`` tells a stop that was asked for from RQ's loop quitting on an error it
      only logs.

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

    job_class = ParkwayJob
    entrypoints: frozenset[str] = frozenset({EXECUTE_JOB})
    """the only functions this worker runs (a benchmark's subclass may name its own)"""
    pool_pid: int | None = None
    """the WorkerPool process this worker is a child of (see ``run_worker``); None when standalone"""
    ended_as_asked = False
    """whether ``work`` ended on a stop signal, on a suspension in burst mode or on an empty queue,
    rather than on an error that RQ's loop logs and quits on"""

    _suspension_checked = 0.0
    _stopped = False
    """set by ``stop()`` (RQ's own warm shutdown, by signal, sets ``_stop_requested`` only)"""

    def __init__(self, *args: Any, runtime: WorkerRuntime | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("serializer", MsgpackSerializer)
        super().__init__(*args, **kwargs)
        # RQ's cleanups read job hashes with their queue's serializer and job class, and RQ's
        # WorkerPool gives its children queues with RQ's defaults (pickle; a Job that imports the
        # callbacks a hash names): the worker's own go to every queue it serves
        for queue in self.queues:
            queue.serializer, queue.job_class = self.serializer, self.job_class
        self._parkway: WorkerRuntime | None = runtime

    def parkway_runtime(self) -> WorkerRuntime:
        """The runtime this worker's jobs run with: its own, or this process's from the environment."""
        return self._parkway if self._parkway is not None else worker_runtime()

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
            try:
                super().check_for_suspension(burst)
            except StopRequested:  # suspended in burst mode
                self.ended_as_asked = True
                raise

    def set_state(self, state: str, pipeline: Any = None) -> None:
        if pipeline is None and state == getattr(self, "_state", None):
            return
        super().set_state(state, pipeline)

    def execute_job(self, job: Job, queue: Queue) -> None:
        """RQ's prepare_execution and prepare_job_execution, in one transaction; for a parkway
        job, the store's ``begin`` (fence check, lease) runs in the same transaction. A job this
        worker does not run is failed instead (see ``_refusal``)."""
        reason = self._refusal(job)
        if reason is not None:
            self._refuse(job, queue, reason)
            return
        ttl = self.get_heartbeat_ttl(job)
        begin = _begin_command(job, self.parkway_runtime)
        with self.connection.pipeline() as pipe:
            execution = Execution.create(job, ttl, pipeline=pipe, worker_name=self.name)
            self.executions[execution.id] = execution
            self.set_state(WorkerStatus.BUSY, pipeline=pipe)
            self.heartbeat(ttl, pipeline=pipe)
            job.prepare_for_execution(self.name, pipeline=pipe)  # sets last_heartbeat too: no job.heartbeat
            pipe.persist(job.key)
            if len(self.queues) == 1:
                pipe.lrem(queue.intermediate_queue_key, 1, job.id)
            if begin is None:
                pipe.execute()
            else:
                command, read = begin
                pipe.execute_command(*command)  # type: ignore[no-untyped-call]
                replies = pipe.execute(raise_on_error=False)
                # an error in the begin reply is the job's, raised when it begins
                job.began = functools.partial(read, replies[-1])  # type: ignore[attr-defined]
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

    def request_stop(self, signum: int, frame: FrameType | None) -> None:
        self.ended_as_asked = True
        super().request_stop(signum, frame)  # type: ignore[no-untyped-call]

    def dequeue_job_and_maintain_ttl(
        self, timeout: int | None, max_idle_time: int | None = None
    ) -> tuple[Job, Queue] | None:
        """RQ's, except that a job RQ cannot even load is set aside and the next one taken."""
        while True:
            try:
                result = super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
            except UnicodeDecodeError as exc:  # the popped id is not UTF-8: RQ fails to decode it
                self._set_aside(exc.object, self.queues, exc)
                continue
            except Exception as exc:
                job_id, queue = getattr(exc, "job_id", None), getattr(exc, "queue", None)
                if not isinstance(job_id, str) or not isinstance(queue, Queue):  # not one job's fault
                    raise
                self._set_aside(job_id, [queue], exc)
                continue
            if result is None:  # burst mode and the queue is empty, or idle for max_idle_time
                self.ended_as_asked = True
            return result

    def run_maintenance_tasks(self) -> None:
        """RQ's, after clearing from the intermediate lists what RQ's cleanup would die on; a failed
        pass is logged and tried again at the next interval, and the worker goes on."""
        try:
            for queue in self.queues:
                self._clear_intermediate(queue)
            super().run_maintenance_tasks()  # type: ignore[no-untyped-call]
        except StopRequested:
            raise
        except Exception:
            log.exception("rq_maintenance_failed", worker=self.name)
            self.last_cleaned_at = now()  # type: ignore[assignment]

    def _clear_intermediate(self, queue: Queue) -> None:
        """Set aside or refuse what a worker that died on it left in ``queue``'s intermediate list.
        Jobs that would run are left to RQ's cleanup (another worker may be starting them)."""
        for raw_id in self.connection.lrange(queue.intermediate_queue_key, 0, -1):
            job_id = _rq_id(raw_id)
            if job_id is None:
                self._set_aside(raw_id, [queue], ValueError("not an id RQ accepts"))
                continue
            try:
                job = self.job_class.fetch(job_id, connection=self.connection, serializer=self.serializer)
            except NoSuchJobError:
                continue  # RQ's cleanup drops it
            except (redis.ConnectionError, redis.TimeoutError):
                raise  # Redis's trouble, not the job's: the pass is logged and tried again later
            except Exception as exc:
                self._set_aside(raw_id, [queue], exc)
                continue
            reason = self._refusal(job)
            if reason is not None:
                self._refuse(job, queue, reason)

    def _set_aside(self, raw_id: str | bytes, queues: Sequence[Queue], error: BaseException) -> None:
        """Take a job RQ cannot load off the intermediate lists; into RQ's failed registry if RQ
        accepts its id (the hash, unreadable, expires as a failed job's would)."""
        job_id = _rq_id(raw_id)
        shown = raw_id if isinstance(raw_id, str) else raw_id.decode(errors="backslashreplace")
        log.error("job_unreadable", job_id=shown, error=f"{error!r:.300}", failed=job_id is not None)
        try:
            with self.connection.pipeline() as pipe:
                for queue in queues:
                    pipe.lrem(queue.intermediate_queue_key, 1, raw_id)  # type: ignore[arg-type]
                    if job_id is not None:
                        pipe.zadd(queue.failed_job_registry.key, {job_id: current_timestamp() + DEFAULT_FAILURE_TTL})
                if job_id is not None:
                    pipe.expire(Job.key_for(job_id), DEFAULT_FAILURE_TTL)
                pipe.execute()
        except redis.RedisError:  # the id stays where it is; the next pass sets it aside
            log.exception("job_unreadable_not_set_aside", job_id=shown)

    def _refusal(self, job: Job) -> str | None:
        """Why this worker will not run ``job``, or None. Reads the job's stored fields only:
        ``job.func``, which imports, is never touched."""
        try:
            func_name, instance, args, kwargs = job.func_name, job.instance, job.args, job.kwargs
        except DeserializationError:
            return "its data does not decode"
        if not isinstance(func_name, str) or func_name not in self.entrypoints:
            return f"it names {func_name!r:.200}; this worker runs only {', '.join(sorted(self.entrypoints))}"
        if instance is not None:
            return "it names an instance to call its function on"
        if any(getattr(job, name) for name in JOB_CALLBACK_FIELDS) or job.webhooks:
            return "it names callbacks or webhooks"
        if func_name == EXECUTE_JOB and not _step_arguments(args, kwargs):
            return f"its arguments {args!r:.200} {kwargs!r:.200} are not (run_id, step, fence)"
        return None

    def _refuse(self, job: Job, queue: Queue, reason: str) -> None:
        """Fail ``job`` without running it: RQ's failure records, without its callbacks, webhooks,
        retries or dependents."""
        log.error("job_refused", job_id=job.id, queue=queue.name, reason=reason)
        exc_string = f"parkway's worker refused this job: {reason}"
        try:
            with self.connection.pipeline() as pipe:
                job.set_status(JobStatus.FAILED, pipeline=pipe)
                queue.failed_job_registry.add(job, ttl=job.failure_ttl, exc_string=exc_string, pipeline=pipe)
                Result.create_failure(job, job.failure_ttl, exc_string, worker_name=self.name, pipeline=pipe)
                pipe.lrem(queue.intermediate_queue_key, 1, job.id)
                self.increment_failed_job_count(pipeline=pipe)
                pipe.execute()
        except StopRequested:
            raise
        except Exception as exc:  # the stored fields do not even write back
            self._set_aside(job.id, [queue], exc)

    def work(self, *args: Any, with_maintenance: bool = True, **kwargs: Any) -> bool:
        """RQ's work loop; with ``with_maintenance`` (the default) also parkway's lease renewal and
        reconciling thread, which needs the parkway settings in the environment. A pool's child
        also watches its pool's process (see ``_leave_with_pool``)."""
        if self.pool_pid is None:
            return self._work(*args, with_maintenance=with_maintenance, **kwargs)
        done = threading.Event()
        threading.Thread(target=self._leave_with_pool, args=(self.pool_pid, done), daemon=True).start()
        try:
            return self._work(*args, with_maintenance=with_maintenance, **kwargs)
        finally:
            done.set()

    def _leave_with_pool(self, pool_pid: int, done: threading.Event) -> None:
        """Once the pool's process is gone, stop as a stop signal would (a running job finishes):
        an orphaned child would work on beside the pool a supervisor restarts. The signal waits
        until RQ's handler is installed, since the one a child inherits may be the pool's."""
        while os.getppid() == pool_pid or signal.getsignal(signal.SIGTERM) != self.request_stop:
            if done.wait(POOL_CHECK_EVERY_S):
                return
        log.warning("pool_gone", worker=self.name, pool_pid=pool_pid)
        main = threading.main_thread().ident
        assert main is not None
        signal.pthread_kill(main, signal.SIGTERM)  # to the main thread: it interrupts a blocking dequeue

    def _work(self, *args: Any, with_maintenance: bool, **kwargs: Any) -> bool:
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


def _rq_id(raw_id: str | bytes) -> str | None:
    """The id as RQ's registries can hold it, or None if RQ rejects it."""
    try:
        job_id = raw_id.decode() if isinstance(raw_id, bytes) else raw_id
        validate_job_id(job_id)
    except ValueError:  # UnicodeDecodeError included
        return None
    return job_id


def _step_arguments(args: Any, kwargs: Any) -> bool:
    """Whether these are ``execute_job``'s arguments as parkway enqueues them: (run_id, step, fence)."""
    return (
        kwargs == {}
        and isinstance(args, list | tuple)
        and len(args) == 3
        and isinstance(args[0], str)
        and all(type(a) is int for a in args[1:])
    )


def _begin_command(
    job: Job, runtime: Callable[[], WorkerRuntime]
) -> tuple[tuple[Any, ...], Callable[[Any], Attempt]] | None:
    """For a parkway job, its ``begin`` as a command to send inside RQ's start transaction, and the
    function that reads the reply (see ``RedisStore.begin_command``).

    None for any other job, and for one whose runtime cannot be set up or whose run id the store
    rejects: RQ then runs (and fails) it as usual, in ``perform_job``; the worker does not die of it.
    """
    try:
        if job.func_name != EXECUTE_JOB:
            return None
        run_id, step, fence = job.args
        rt = runtime()
        clock = rt.options.clock()
        return rt.store.begin_command(str(run_id), int(step), int(fence), clock, clock + rt.options.lease_ms)
    except Exception:  # noqa: BLE001 - any such job is RQ's to fail, not the worker's to die of
        return None


def _deleted_on_success(job: Job, worker: SimpleWorker) -> bool:
    """Whether RQ would delete the job right after it succeeds, with nothing else to do."""
    return (
        job.get_result_ttl(worker.default_result_ttl) == 0
        and not job.repeats_left
        and not job.group_id
        and not job.has_rate_limit
    )


def run_worker(settings: Settings, *, burst: bool = False, workers: int = 1) -> int:
    """Work parkway's queue until stopped (or, with ``burst``, until it is empty).

    Returns the exit status for ``parkway worker``: 1 when the worker quit on an error RQ's loop
    only logs (a supervisor should restart it), else 0. A pool replaces such children itself.
    """
    assert settings.redis_url is not None
    if workers < 1:
        raise ValueError("--workers must be at least 1")
    # the process boundary: pool children and lazily-installed job runtimes read their settings
    # from the environment (the token key already comes from there)
    os.environ["PARKWAY_REDIS_URL"] = settings.redis_url
    os.environ["PARKWAY_QUEUE"] = settings.queue
    if settings.workflows is not None:
        os.environ["PARKWAY_WORKFLOWS"] = ",".join(settings.workflows)
    # set up (and check: the token key's fingerprint) on parkway's own bounded client first: RQ
    # raises its connection's socket timeout to minutes for its blocking dequeue
    install(settings)
    connection = connect(settings.redis_url)
    if workers > 1:
        pool = WorkerPool(
            [settings.queue],
            connection=connection,
            num_workers=workers,
            worker_class=_pool_worker(os.getpid()),
            job_class=ParkwayJob,  # the pool passes its own, RQ's Job by default, to its children
            serializer=MsgpackSerializer,
        )
        pool.start(burst=burst, logging_level="WARNING")
        return 0
    queue = Queue(settings.queue, connection=connection, serializer=MsgpackSerializer)
    worker = ParkwayWorker([queue], connection=connection, serializer=MsgpackSerializer)
    worker.work(burst=burst, logging_level="WARNING")
    return 0 if worker.ended_as_asked else 1


def _pool_worker(pool_pid: int) -> type[ParkwayWorker]:
    """The worker class for the children of the pool in process ``pool_pid``: forked, they know
    their pool from the class, and leave when it is gone."""

    class PooledParkwayWorker(ParkwayWorker):
        """ParkwayWorker in a child of a WorkerPool."""

    PooledParkwayWorker.pool_pid = pool_pid
    return PooledParkwayWorker
