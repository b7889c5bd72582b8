"""The worker process: RQ on parkway's queue, with parkway's serializer and housekeeping;
no job stops it or runs anything but parkway's entrypoint."""

from __future__ import annotations

import functools
import gc
import os
import signal
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import redis
import structlog
from rq import Queue
from rq.exceptions import DeserializationError
from rq.job import Job
from rq.worker_pool import WorkerPool

from ..adapters.redis.connection.connection import connect, require_functions
from ..adapters.redis.connection.errors import translated
from ..adapters.redis.connection.replicas import ReplicaAcks
from ..adapters.redis.formats import gates_of
from ..config import Settings
from ..runtime.features import worker_services
from ..runtime.store import Attempt
from .jobs import EXECUTE_JOB, WorkerRuntime, execute_with, install, parse_job_id, serving, worker_runtime
from .reconciler import Maintenance
from .rq_internals import Claim, ParkwayJob, TrimmedWorker, names_callbacks
from .serializer import MsgpackSerializer

log = structlog.get_logger("parkway")

POOL_CHECK_EVERY_S = 0.5


class ParkwayWorker(TrimmedWorker):
    """An RQ SimpleWorker (trimmed: :class:`~parkway.workers.rq_internals.TrimmedWorker`) that
    also renews the lease of the job it runs and takes its turn at reconciling (see
    :mod:`parkway.workers.reconciler`).

    Jobs run in the worker's own process (no fork per job): parkway's jobs are
    short and replay-safe, and a killed worker's attempt is replayed elsewhere.

    A parkway job costs it one round trip of its own besides the job's commits
    (stock RQ: about 18): one that takes the job off RQ's intermediate list,
    deletes its hash and begins it (``claim``); the dequeue rides with the job
    before's last commit (``next_dequeue``: the job's store ``followed_by`` it;
    alone in burst mode, once a stop is asked, and after a job not parkway's). Its hash is
    never read: the id names the run and the fence, and the begin's fence check and
    lease are its guards. A job a resume began (stored format 3: its queue element carries the
    begun attempt, ``_begun_claim``) costs it the dequeue alone: the node runs from its reply, and
    the take's writes ride the job's first store call. No execution record, started-registry entry or success
    transaction is written for it: a worker killed mid-job leaves the run's lease to
    lapse, and the reconciler replays the node elsewhere. It overrides worker methods
    of rq 3.0.x (pinned for that; the overrides are in
    :mod:`parkway.workers.rq_internals`, ``tests/test_worker.py`` holds the
    guarantees and ``tests/test_rq_internals.py`` what they lean on). A job with any
    other id is read from its hash: one naming parkway's entrypoint that keeps no
    result (as parkway writes them) runs the same way, on its lease; any other job it
    runs (a benchmark's stand-in) takes RQ's path, trimmed from about 18 round trips
    to 4 (dequeue, fetch, one transaction to start the job, one to finish it):

    - the worker-key heartbeat RQ sends up to three times per job, three round
      trips each, is sent at most every 5 s, pipelined (the key lives
      ``worker_ttl`` + 60 s); ``rq suspend`` is checked at most once a second;
      an unchanged worker state is not rewritten;
    - starting a job (its execution record, started registry entry, status,
      removal from the intermediate list) is one MULTI instead of two (a parkway
      job that keeps its result, which parkway never enqueues, takes this path
      too, and begins itself when it runs);
    - a job that succeeds with ``result_ttl=0`` (all of parkway's) is deleted
      in the same MULTI that records the success, instead of RQ's read-then-delete
      of its registries; the dependents check is skipped, so **no job on the
      queues this worker serves may be a** ``depends_on`` **target** (parkway
      enqueues each next job itself).

    For such jobs, failures, retries, job heartbeats while a job runs, the started
    registry and crash detection are RQ's own, unchanged: a job killed mid-run stays
    in the started registry and is recovered as in stock RQ.

    No job stops it or runs anything but parkway's entrypoint (``tests/test_worker_safety.py``;
    the RQ internals named here are checked by ``tests/test_rq_internals.py``):

    - a job whose id is parkway's runs parkway's entrypoint for the run and fence the id names,
      whatever its hash says (it is never read); a job with any other id runs only if it names a
      function in ``entrypoints`` (parkway's own) with the arguments parkway gives it, and no
      instance, callbacks or webhooks; any other is failed into RQ's failed registry from its
      stored fields, before anything is imported;
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

    ``parkway worker`` gives it the runtime it installed (``runtime=``); a pool's child builds
    its own from the pool's settings (``pool_settings``). The same class runs embedded mode's
    jobs, on a thread of the application's process (see :mod:`parkway.workers.embedded`), with
    the embedded backend's runtime. Off the main
    thread (signals reach only that one) it leans on RQ's internals again, each checked by
    ``tests/test_embedded.py`` and named by ``tests/test_rq_internals.py``:
    ``_install_signal_handlers`` does nothing, nor does ``procline`` (the process title is the
    application's);
    ``death_penalty_class`` is RQ's ``TimerDeathPenalty`` instead of SIGALRM;
    ``stop()`` sets RQ's ``_stop_requested`` and makes ``heartbeat``, which RQ
    calls each time its wait for a job times out, raise RQ's ``StopRequested``.
    """

    entrypoints: frozenset[str] = frozenset({EXECUTE_JOB})
    """the only functions this worker runs (a benchmark's subclass may name its own)"""
    pool_pid: int | None = None
    """the WorkerPool process this worker is a child of (see ``run_worker``); None when standalone"""
    pool_settings: Settings | None = None
    """a pool's child: the settings its runtime is built from, once forked (see ``_pool_worker``)"""

    def __init__(self, *args: Any, runtime: WorkerRuntime | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._parkway: WorkerRuntime | None = runtime

    def parkway_runtime(self) -> WorkerRuntime:
        """The runtime this worker's jobs run with: the one it was given (built, in a pool's child,
        from the pool's settings), else this process's (``worker_runtime``)."""
        if self._parkway is None and self.pool_settings is not None:
            self._parkway = install(self.pool_settings)  # in the forked child: connections of its own
        return self._parkway if self._parkway is not None else worker_runtime()

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
        if names_callbacks(job):
            return "it names callbacks or webhooks"
        if func_name == EXECUTE_JOB and not _step_arguments(args, kwargs):
            return f"its arguments {args!r:.200} {kwargs!r:.200} are not (run_id, step, fence)"
        return None

    def claim_read(self, job: Job) -> Claim | None:
        """A parkway job read from its hash (one whose id is not parkway's) runs as ``claim``'s do,
        for the run, step and fence its arguments name (its stored timeout kept). None for any other
        job, and as ``_begin`` says (the job then takes RQ's path)."""
        try:
            if job.func_name != EXECUTE_JOB:
                return None
            run_id, step, fence = str(job.args[0]), int(job.args[1]), int(job.args[2])
        except Exception:  # noqa: BLE001 - any such job is RQ's to fail, not the worker's to die of
            return None
        begun = _begin(self.parkway_runtime, run_id, step, fence)
        if begun is None:
            return None
        rt, command, read = begun
        run = functools.partial(execute_with, rt, run_id, step, fence, last=rt.store.followed_by(self.next_dequeue))
        return Claim(command, read, run, None, rt.store.client)

    def claim(self, job_id: str, carried: str | None = None) -> Claim | None:
        """A parkway job is run by its id alone, which names its run and fence: its hash is
        never read, and nothing it could say (another function, callbacks) is ever looked at;
        the begin checks the fence as for any job. None for any other id, and when this worker
        has no runtime (the job is then read, and RQ fails it as usual). ``carried``: the attempt
        its resume began (format 3, ``_begun_claim``)."""
        named = parse_job_id(job_id)
        if named is None:
            return None
        run_id, fence = named
        if carried is not None:
            return self._begun_claim(run_id, fence, carried)
        begun = _begin(self.parkway_runtime, run_id, None, fence)
        if begun is None:
            return None
        rt, command, read = begun
        run = functools.partial(execute_with, rt, run_id, None, fence, last=rt.store.followed_by(self.next_dequeue))
        return Claim(command, read, run, rt.settings.job_timeout, rt.store.client)

    def _begun_claim(self, run_id: str, fence: int, carried: str) -> Claim | None:
        """A job whose resume began its attempt (format 3: ``<lease end ms> <the begin's reply>``
        after its id; ``begin_at_resume`` in _resume.lua) runs from what its element carries, with
        no round trip before the node, when this worker pops it within ``begun_window_ms`` of the
        resume (the lease's end less ``lease_ms``, stamped by the resume's caller's clock, against
        this worker's: see ``begun_window_ms`` for what the clocks must agree on). Otherwise, and when
        this worker waits for replicas to acknowledge a begin, it begins the old way, taking over
        that lease (begin.lua's ``taking``): a lease lapsed and recovered since (the fence moved
        on) refuses it there, and the node never runs on it."""
        lease, _, reply = carried.partition(" ")
        try:
            rt = self.parkway_runtime()
            lease_until = int(lease)
            clock = rt.options.clock()
            window = begun_window_ms(rt.options.lease_ms)
            if lease_until - clock > rt.options.lease_ms - window and self.begin_acks() is None:
                payload = reply.encode("latin-1")  # the element's text, each character one byte again
                read = functools.partial(_begun_read, rt, run_id, payload)
                last = rt.store.followed_by(self.next_dequeue)
                run = functools.partial(execute_with, rt, run_id, None, fence, last=last)
                confirmed = tuple(rt.store.begun_confirmed(run_id))
                return Claim(None, read, run, rt.settings.job_timeout, rt.store.client, confirmed)
            command, read_reply = rt.store.begin_command(
                run_id, None, fence, clock, clock + rt.options.lease_ms, taking=True
            )
        except Exception:  # noqa: BLE001 - no runtime, an element that does not parse: not begun here
            log.exception("begun_job_unreadable", run_id=run_id, fence=fence)
            return None
        run = functools.partial(execute_with, rt, run_id, None, fence, last=rt.store.followed_by(self.next_dequeue))
        return Claim(command, read_reply, run, rt.settings.job_timeout, rt.store.client)

    def begin_acks(self) -> ReplicaAcks | None:
        """What the runtime's store waits for after each commit (``Settings.acks``): a job's begin
        waits for it too, so that a node never runs on a begin that a failover may discard (on a
        primary frozen past its replacement, which a worker's open connection still reaches)."""
        try:
            acks = getattr(self.parkway_runtime().store, "acks", None)
        except Exception:  # noqa: BLE001 - no runtime: the job is read and RQ fails it, as claim says
            return None
        return acks if isinstance(acks, ReplicaAcks) else None

    def job_context(self) -> AbstractContextManager[Any]:
        return serving(self._parkway) if self._parkway is not None else nullcontext()

    def work(self, *args: Any, with_maintenance: bool = True, **kwargs: Any) -> bool:
        """RQ's work loop; with ``with_maintenance`` (the default) also parkway's lease renewal and
        reconciling thread, on the worker's runtime (``parkway_runtime``). A pool's child
        also watches its pool's process (see ``_leave_with_pool``)."""
        self._stop_early()
        if self.pool_pid is None:
            return self._work(*args, with_maintenance=with_maintenance, **kwargs)
        done = threading.Event()
        threading.Thread(target=self._leave_with_pool, args=(self.pool_pid, done), daemon=True).start()
        try:
            return self._work(*args, with_maintenance=with_maintenance, **kwargs)
        finally:
            done.set()

    def _stop_early(self) -> None:
        """Until RQ installs its signal handlers (rq's ``work`` does so only after it has registered the
        worker), a SIGTERM or SIGINT would end the process at once, leaving its registration and its
        stored-format announcement behind: from the start, one asks the loop to stop at its first turn
        instead (RQ's handlers replace this one; a stop asked before stays asked)."""
        if threading.current_thread() is not threading.main_thread():
            return

        def asked(signum: int, frame: Any) -> None:
            self._stop_requested = True

        signal.signal(signal.SIGTERM, asked)
        signal.signal(signal.SIGINT, asked)

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
        if not with_maintenance:
            return super().work(*args, **kwargs)
        rt = self.parkway_runtime()
        gates = gates_of(rt.store)
        for gate in gates:  # the formats it reads, under its RQ name (adapters/redis/formats.py)
            gate.announce(self.name, "worker")
        maintenance = Maintenance(
            rt.store,
            rt.dispatcher,
            owner=self.name,
            current=lambda: rt.current,
            lease_ms=rt.settings.lease_ms,
            max_lost=rt.settings.max_lost_attempts,
            grace_ms=rt.settings.limits.expiry_grace_ms,
            busy=self._still_busy,
            busy_every_s=self.job_monitoring_interval,
        )
        maintenance.start()
        services = worker_services(rt.settings, self.name)
        for service in services:
            service.start()
        try:
            return super().work(*args, **kwargs)
        finally:
            for service in reversed(services):
                service.stop()
            maintenance.stop()
            for gate in gates:
                gate.stop()


    def _still_busy(self) -> None:
        """Keep this worker's RQ key alive while one job runs on (the maintenance thread, every
        ``job_monitoring_interval``): a job raises its expiry when it starts (with its first store
        call, for one its resume began), and a long node would otherwise let it lapse mid-job
        (``rq info`` and the stored formats' gate then miss a live worker). To the expiry the job's
        start gave it (``busy_ttl``: the job's timeout and a margin)."""
        ttl = self.busy_ttl
        if ttl is None:
            return
        try:
            self.connection.expire(self.key, ttl)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            log.warning("worker_key_not_renewed", worker=self.name, error=str(exc))


def begun_window_ms(lease_ms: int) -> int:
    """How soon after its resume (the element's lease end less ``lease_ms``: the resume's caller's
    clock, read against the worker's) a worker must pop an attempt the resume began to run it at once
    (else it begins the old way, with the fence check): a tenth of the lease (500 ms by default).

    Its lease: the worker renews it within ``Maintenance``'s tick (a fifth of the lease) and the
    reconciler lapses it by its own clock; the caller's clock cancels out (it both stamps the lease
    and marks the window's start), so a node run at once holds its lease while the workers' and the
    reconcilers' clocks agree within the lease less the window and the tick (3.5 s by default; a plain
    begin's: 4 s). A worker whose clock runs ahead of the caller's by more than the window never
    runs an element at once (it begins them the old way: safe, the round trip kept); one behind it
    by ``s`` may run one popped up to the window plus ``s`` after the resume. Kept short because the
    run reads running from the resume on: a cancel in that time ends the run, and the node's body
    then runs up to its first write, which is refused (as when a cancel meets a running node)."""
    return lease_ms // 10


def _begun_read(rt: WorkerRuntime, run_id: str, payload: bytes, _reply: Any) -> Attempt:
    """The attempt a resume began, from the begin's reply its queue element carried."""
    return rt.store.begun_attempt(run_id, payload)


def _step_arguments(args: Any, kwargs: Any) -> bool:
    """Whether these are ``execute_job``'s arguments as parkway enqueues them: (run_id, step, fence)."""
    return (
        kwargs == {}
        and isinstance(args, list | tuple)
        and len(args) == 3
        and isinstance(args[0], str)
        and all(type(a) is int for a in args[1:])
    )


def _begin(
    runtime: Callable[[], WorkerRuntime], run_id: str, step: int | None, fence: int
) -> tuple[WorkerRuntime, tuple[Any, ...], Callable[[Any], Attempt]] | None:
    """The runtime a job runs on, and its activation's ``begin`` as a command with the function that
    reads its reply (``RedisStore.begin_command``; ``step`` None for a job known by its id alone).
    None when the runtime cannot be set up or the store rejects the run id: the job is then read
    and RQ runs (and fails) it as usual; the worker does not die of it."""
    try:
        rt = runtime()
        clock = rt.options.clock()
        return (rt, *rt.store.begin_command(run_id, step, fence, clock, clock + rt.options.lease_ms))
    except Exception:  # noqa: BLE001 - see above
        return None


def run_worker(settings: Settings, *, burst: bool = False, workers: int = 1) -> int:
    """Work parkway's queue until stopped (or, with ``burst``, until it is empty).

    Returns the exit status for ``parkway worker``: 1 when the worker quit on an error RQ's loop
    only logs (a supervisor should restart it), else 0. A pool replaces such children itself.
    """
    assert settings.redis_url is not None
    if workers < 1:
        raise ValueError("--workers must be at least 1")
    # set up (and check: the token key's fingerprint) on parkway's own bounded client first: RQ
    # raises its connection's socket timeout to minutes for its blocking dequeue
    rt = install(settings)
    connection = connect(settings.redis_url)
    with translated():
        require_functions(connection)  # a server without them: refused now, not job by job
    # what the process holds now (imports, the runtime) lives as long as it does: out of the cyclic
    # collector's way, a full collection (tens of ms over the imported modules' objects, about one
    # in a thousand jobs) no longer lands on a job; collected first, so no garbage is kept for good
    gc.collect()
    gc.freeze()
    if workers > 1:
        pool = WorkerPool(
            [settings.queue],
            connection=connection,
            num_workers=workers,
            worker_class=_pool_worker(os.getpid(), settings),
            job_class=ParkwayJob,  # the pool passes its own, RQ's Job by default, to its children
            serializer=MsgpackSerializer,
        )
        pool.start(burst=burst, logging_level="WARNING")
        return 0
    queue = Queue(settings.queue, connection=connection, serializer=MsgpackSerializer)
    worker = ParkwayWorker([queue], connection=connection, serializer=MsgpackSerializer, runtime=rt)
    worker.work(burst=burst, logging_level="WARNING")
    return 0 if worker.ended_as_asked else 1


def _pool_worker(pool_pid: int, settings: Settings) -> type[ParkwayWorker]:
    """The worker class for the children of the pool in process ``pool_pid``: RQ's WorkerPool
    forks them with the class, the queue names and the connection only, so they know their pool
    and their settings from the class; they leave when the pool is gone."""

    class PooledParkwayWorker(ParkwayWorker):
        """ParkwayWorker in a child of a WorkerPool."""

    PooledParkwayWorker.pool_pid = pool_pid
    PooledParkwayWorker.pool_settings = settings
    return PooledParkwayWorker
