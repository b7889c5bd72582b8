"""RQ's SimpleWorker, trimmed and armoured for parkway (``TrimmedWorker``): each override of RQ's
worker is listed, with why, in the package docstring."""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # (no stubs: signal's own C half)
import functools
import inspect
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import timedelta
from types import FrameType
from typing import Any

import redis
import structlog
from rq import Queue, SimpleWorker
from rq.defaults import DEFAULT_FAILURE_TTL
from rq.exceptions import NoSuchJobError, StopRequested
from rq.executions import Execution
from rq.job import Job, JobStatus, validate_job_id
from rq.results import Result
from rq.timeouts import BaseDeathPenalty, JobTimeoutException, TimerDeathPenalty, UnixSignalDeathPenalty
from rq.utils import as_text, current_timestamp, get_version, now, utcformat
from rq.worker import WorkerStatus

from ...adapters.redis.connection.connection import holding, ride, run_commands
from ...adapters.redis.connection.replicas import ReplicaAcks, ReplicaShortfall
from ...runtime.errors import StoreError, StoreUnavailable
from ..serializer import MSGPACK, MsgpackSerializer
from .job_format import DeferredFetchQueue, ParkwayJob, begun_element, intermediate_key

log = structlog.get_logger("parkway")

HEARTBEAT_EVERY = timedelta(seconds=5)
SUSPENSION_CHECK_EVERY_S = 1.0
STORE_AWAY_MAX_WAIT_S = 2.0
"""longest pause of the work loop between two tries while Redis is away (see ``store_away``)"""
AWAY_REPLIES = ("NOREPLICAS", "READONLY", "UNBLOCKED", "MASTERDOWN", "LOADING")
"""Redis's error replies that say the primary cannot take the command for now (replicas behind,
a demoted or loading server; ``UNBLOCKED`` ends a blocking dequeue at a demotion): retried like a
lost connection, never a reason to quit"""
LISTENER_WAKE = '{"command": "wake"}'
"""what wakes RQ's listener thread to end it: a command RQ's ``handle_command`` does not know, so ignores"""


def store_away(exc: BaseException) -> bool:
    """Whether ``exc`` says Redis is away for now rather than that something is wrong: a lost or
    timed-out connection, or one of ``AWAY_REPLIES`` (raw, or as parkway's ``StoreError``)."""
    if isinstance(exc, redis.exceptions.ConnectionError | redis.exceptions.TimeoutError | StoreUnavailable
                  | ReplicaShortfall):
        return True
    if isinstance(exc, redis.exceptions.ResponseError | StoreError):
        text = str(exc)
        return any(reply in text for reply in AWAY_REPLIES)
    return False

class AlarmDeathPenalty(UnixSignalDeathPenalty):
    """RQ's SIGALRM death penalty (``UnixSignalDeathPenalty``: its handler and ``alarm`` for the job's
    time, then the alarm off and the default handler back), with the handler set through
    ``_signal.signal``, which ``signal.signal`` calls after turning its arguments and its answer to and
    from enums: for a handler that is a method, each way raised and caught an exception, about 6 us of
    a job's 7 for the two."""

    def setup_death_penalty(self) -> None:
        _signal.signal(_signal.SIGALRM, self.handle_death_penalty)
        signal.alarm(self._timeout)

    def cancel_death_penalty(self) -> None:
        signal.alarm(0)
        _signal.signal(_signal.SIGALRM, _signal.SIG_DFL)


@dataclass(frozen=True)
class Claim:
    """How a worker runs a job on parkway's lease (``_run_claimed``): one known by its id alone
    (``claim``: the id names the run and the fence), or one read from its hash that calls parkway's
    entrypoint and keeps no result (``claim_read``). Its begin goes in the round trip that takes
    the job, and what the begin began is handed to ``run`` as its argument. That round trip and the
    job's own go over one connection of ``client``'s pool, held for the job."""

    command: tuple[Any, ...] | None
    """the job's begin, sent in the round trip that takes the job; None: its resume began it (format
    3), and the take's writes ride the job's first round trip (``_take_and_run``)"""
    read: Callable[[Any], Any]
    """turns the begin's reply into what the job begins with (raising what begin would)"""
    run: Callable[[Callable[[], Any]], Any]
    """runs the job, given the function that returns what it began with"""
    timeout: int | None
    """seconds the job may run; None: as its hash says"""
    client: Any
    """the client of the job's store (on the worker's Redis), whose connection the job holds"""
    rides: tuple[tuple[Any, ...], ...] = ()
    """for a job its resume began: the store's writes that ride its first round trip with the take's"""


_WORK = inspect.signature(SimpleWorker.work)


@dataclass
class _Ride:
    """A dequeue sent after a job's last commit (``NextDequeue``), on a connection of RQ's pool,
    whose reply the work loop reads next (``_ridden``) or the worker gives back (``_give_back``).
    Its replies: ``CLIENT ID``'s, then the dequeue's."""

    pool: Any
    conn: Any
    queue: Queue | None
    """the one queue a ``BLMOVE`` pops from; None: a ``BLPOP`` of several, whose reply names it"""
    sent: bool = False


class NextDequeue:
    """The worker's next dequeue, sent after a job's last commit in the same round trip (the
    store's ``Follow``: ``RedisStore.followed_by``), when the work loop will dequeue next."""

    def __init__(self, worker: TrimmedWorker) -> None:
        self.worker = worker

    def take(self) -> tuple[Any, tuple[tuple[Any, ...], ...]] | None:
        return self.worker._ride_out()

    def sent(self) -> None:
        if self.worker._ride is not None:
            self.worker._ride.sent = True


class TrimmedWorker(SimpleWorker):
    """RQ's SimpleWorker with every override parkway makes of RQ's worker internals (listed in the
    package docstring); :class:`~parkway.workers.worker.ParkwayWorker` adds parkway's policy through
    the hooks ``_refusal``, ``claim``, ``claim_read``, ``begin_acks`` and ``job_context``."""

    job_class = ParkwayJob
    queue_class = DeferredFetchQueue
    death_penalty_class: type[BaseDeathPenalty] = AlarmDeathPenalty
    """(off the main thread, ``work`` sets RQ's ``TimerDeathPenalty``)"""
    ended_as_asked = False
    """whether ``work`` ended on a stop signal, on a suspension in burst mode or on an empty queue,
    rather than on an error that RQ's loop logs and quits on"""

    jobs_begun = 0
    """the jobs this worker has begun; with ``busy``, lets another thread tell that no job began or
    ran between two of its looks (embedded ``drain``)"""
    _suspension_checked = 0.0
    _store_failures = 0
    """calls in a row that found Redis away (``_store_away``)"""
    _stopped = False
    """set by ``stop()`` (RQ's own warm shutdown, by signal, sets ``_stop_requested`` only)"""
    busy_ttl: int | None = None
    """the worker key's expiry (s) the job running now gave it when it started (a parkway job's;
    None between jobs): what a long job's keep-alive renews it to (``ParkwayWorker``'s maintenance)"""
    _ride: _Ride | None = None
    """the dequeue sent after the last job's last commit, not read yet (see ``next_dequeue``)"""
    _rides_now = False
    """whether the work loop dequeues after each job (set by ``work``: not in burst mode, nor with
    ``max_jobs`` or ``max_idle_time``, which end it between jobs)"""
    _loop_thread: int | None = None

    def __init__(self, *args: Any, rides: bool = True, **kwargs: Any) -> None:
        kwargs.setdefault("serializer", MsgpackSerializer)
        super().__init__(*args, **kwargs)
        self.rides = rides
        """whether a job's last commit may carry the next dequeue (``next_dequeue``); the embedded
        worker's in-process Redis answers a pipelined script only once the dequeue after it
        returns, so it does not"""
        self.next_dequeue = NextDequeue(self)
        """what a job's last commit carries (a store's ``followed_by``): RQ's next dequeue"""
        if self.serializer is MsgpackSerializer:  # RQ's worker records the class's name; use the instance
            self.serializer = MSGPACK
        # RQ's cleanups read job hashes with their queue's serializer and job class, and RQ's
        # WorkerPool gives its children queues with RQ's defaults (pickle; a Job that imports the
        # callbacks a hash names): the worker's own go to every queue it serves
        for queue in self.queues:
            queue.serializer, queue.job_class = self.serializer, self.job_class

    # --- hooks ------------------------------------------------------------------------------

    def _refusal(self, job: Job) -> str | None:
        """Why this worker will not run ``job`` (it is failed unrun), or None."""
        return None

    def claim(self, job_id: str, carried: str | None = None) -> Claim | None:
        """How to run the job ``job_id`` names without reading its hash, or None (it is read);
        ``carried``: what its queue element carries after the id (``ParkwayJob.carried``)."""
        return None

    def claim_read(self, job: Job) -> Claim | None:
        """How to run ``job``, read from its hash and kept by nothing once it succeeds, on parkway's
        lease instead of RQ's records (``_run_claimed``), or None (RQ's path runs it)."""
        return None

    def job_context(self) -> AbstractContextManager[Any]:
        """The context the job's function runs in."""
        return nullcontext()

    def begin_acks(self) -> ReplicaAcks | None:
        """The replicas that must acknowledge a job's begin before it runs (``_run_claimed``), or None."""
        return None

    @property
    def busy(self) -> bool:
        """Whether a job runs now (RQ's state, as this worker keeps it in memory)."""
        return bool(getattr(self, "_state", None) == WorkerStatus.BUSY)

    # --- RQ's worker, trimmed -----------------------------------------------------------------

    def work(self, *args: Any, **kwargs: Any) -> bool:
        if threading.current_thread() is not threading.main_thread():
            self.death_penalty_class = TimerDeathPenalty  # SIGALRM reaches only the main thread
        asked = _WORK.bind(self, *args, **kwargs).arguments
        self._rides_now = self.rides and not asked.get("burst") and all(
            asked.get(name) is None for name in ("max_jobs", "max_idle_time")
        )
        self._loop_thread = threading.get_ident()
        try:
            return bool(super().work(*args, **kwargs))
        finally:
            self._rides_now = False
            self._give_back()

    # --- the dequeue a job's last commit carries ------------------------------------------------

    def _ride_out(self) -> tuple[Any, tuple[tuple[Any, ...], ...]] | None:
        """RQ's next dequeue, as ``dequeue_job_and_maintain_ttl`` would send it (``Queue.lmove``'s
        ``BLMOVE`` for one queue, ``Queue.lpop``'s ``BLPOP`` for several, for ``dequeue_timeout``),
        with the connection of RQ's pool to send it on after a job's last commit; None when the
        loop will not dequeue next (burst mode, a stop asked, one already sent) or off its thread."""
        if (
            not self._rides_now
            or self._ride is not None
            or self._stop_requested
            or threading.get_ident() != self._loop_thread
        ):
            return None
        queues = self._ordered_queues
        timeout = self.dequeue_timeout
        one = queues[0] if len(queues) == 1 and get_version(self.connection) >= (6, 2, 0) else None
        if one is not None:
            dequeue: tuple[Any, ...] = ("BLMOVE", one.key, intermediate_key(one), "LEFT", "RIGHT", timeout)
        else:
            dequeue = ("BLPOP", *[q.key for q in queues], timeout)
        pool = self.connection.connection_pool
        try:
            conn = pool.get_connection()
        except redis.RedisError:  # Redis away: the commit goes alone, on the store's path (which retries)
            return None
        self._ride = _Ride(pool, conn, one)
        # its id first: a dequeue the loop will not read is ended by it (CLIENT UNBLOCK, _give_back)
        return self._ride.conn, (("CLIENT", "ID"), dequeue)

    def _ridden(self) -> tuple[Job, Queue] | None:
        """What the dequeue sent after the last job's commit popped, as RQ's dequeue hands it over;
        None when it popped nothing (its timeout, or it was lost with its connection): the loop
        then dequeues as RQ does."""
        ride, self._ride = self._ride, None
        assert ride is not None
        conn, read = ride.conn, False
        try:
            if not ride.sent or not conn.is_connected:  # (dropped, in case it was written but not said)
                return None
            self.procline("Listening on " + ",".join(self.queue_names()))
            conn.read_response()  # CLIENT ID's
            reply = conn.read_response()  # the dequeue's, when a job comes (RQ's socket timeout)
            read = True
        finally:
            if not read:  # a reply may be left half read on it
                conn.disconnect()
            ride.pool.release(conn)
        if reply is None:  # RQ's DequeueTimeout: dequeue again
            return None
        queue_key, job_id = (ride.queue.key, reply) if ride.queue is not None else reply
        queue_key, job_id = as_text(queue_key), as_text(job_id)
        result = self.queue_class._fetch_dequeued_job(
            self.connection, queue_key, job_id, job_class=self.job_class, serializer=self.serializer,
            death_penalty_class=self.death_penalty_class,
        )
        if result is None:
            return None
        job, queue = result
        self.reorder_queues(reference_queue=queue)
        job.redis_server_version = self.get_redis_server_version()  # type: ignore[no-untyped-call]
        self.log.info("Worker %s: %s: %s", self.name, queue.name, job.id)
        self.heartbeat()
        return result

    def _give_back(self) -> None:
        """End a dequeue sent after a job's last commit that the loop will not read (it stops, or
        the worker is suspended): ``CLIENT UNBLOCK`` makes it return at once, with what it popped
        or nothing; a job it popped goes back to the head of its queue, off the intermediate list,
        in one MULTI. If that fails (Redis away) the job is where a worker stopped while
        dequeuing leaves it (RQ's intermediate list), to the same recovery."""
        ride, self._ride = self._ride, None
        if ride is None:
            return
        conn, read = ride.conn, False
        try:
            if ride.sent and conn.is_connected:
                client_id = conn.read_response()
                self.connection.client_unblock(client_id)
                reply = conn.read_response()
                read = True
                if reply is not None:
                    queue_key, job_id = (ride.queue.key, reply) if ride.queue is not None else reply
                    with self.connection.pipeline() as pipe:
                        if ride.queue is not None:
                            pipe.lrem(intermediate_key(ride.queue), 1, job_id)
                        pipe.lpush(queue_key, job_id)
                        pipe.execute()
        except Exception as exc:  # noqa: BLE001 - a stopping worker logs it and goes on stopping
            log.warning("dequeue_not_given_back", worker=self.name, error=f"{exc!r:.300}")
        finally:
            if not read:
                conn.disconnect()
            ride.pool.release(conn)

    def stop(self) -> None:
        """Ask the work loop, from another thread, to end after the job it runs (if any); it does
        within a dequeue timeout."""
        self._stopped = True
        self._stop_requested = True  # RQ's loop checks it between jobs

    def validate_queues(self) -> None:
        """RQ's check that every queue is a ``queue_class``: any RQ Queue will do (the worker's
        ``DeferredFetchQueue`` changes only the class method its dequeue calls)."""
        for queue in self.queues:
            if not isinstance(queue, Queue):
                raise TypeError(f"{queue!r} is not an RQ Queue")

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is threading.main_thread():
            super()._install_signal_handlers()  # type: ignore[no-untyped-call]

    def procline(self, message: str) -> None:
        if threading.current_thread() is threading.main_thread():
            super().procline(message)  # type: ignore[no-untyped-call]

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        if pipeline is None and timeout is None and not self._stopped:
            try:
                self._heartbeat()
            except Exception as exc:
                if not store_away(exc):
                    raise
                self._store_away("heartbeat", exc)
            return
        self._heartbeat(timeout, pipeline)

    def _heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
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
            except Exception as exc:
                if not store_away(exc):
                    raise
                self._store_away("suspension_check", exc)

    def register_birth(self) -> None:
        """RQ's, tried again while Redis is away (a worker started during a failover waits it out)."""
        while True:
            try:
                super().register_birth()  # type: ignore[no-untyped-call]
                return
            except Exception as exc:
                if not store_away(exc) or self._stop_requested:
                    raise
                self._store_away("register_birth", exc)

    def _store_away(self, step: str, exc: BaseException) -> None:
        """Redis is away for now (a failover, a restart, replicas behind): log it, wait a little
        (longer each time in a row, at most ``STORE_AWAY_MAX_WAIT_S``, less if a stop is asked), and
        let the work loop go on instead of quitting as RQ's would."""
        self._store_failures += 1
        pause = min(STORE_AWAY_MAX_WAIT_S, 0.1 * 2 ** min(self._store_failures, 8))
        log.warning("worker_store_unavailable", worker=self.name, step=step, error=f"{exc}"[:300],
                    failures=self._store_failures, retry_in_s=round(pause, 2))
        deadline = time.monotonic() + pause
        while not self._stop_requested and time.monotonic() < deadline:
            time.sleep(0.05)

    def set_state(self, state: str, pipeline: Any = None) -> None:
        if state == WorkerStatus.SUSPENDED:  # RQ's check_for_suspension, which then waits: no job
            self._give_back()  # may wait in this worker meanwhile
        if pipeline is None and state == getattr(self, "_state", None):
            return
        super().set_state(state, pipeline)

    def execute_job(self, job: Job, queue: Queue) -> None:
        """A job the worker can run by its id alone (``claim``) runs without its hash being read;
        any other is read, then refused (``_refusal``), or run on parkway's lease if
        ``claim_read`` says how and its result is not kept (``_run_claimed``), or else run by
        RQ's path: RQ's prepare_execution and prepare_job_execution in one transaction."""
        try:
            self._execute_job(job, queue)
        except Exception as exc:
            if not store_away(exc):
                raise
            # left as a worker killed here would leave it: the run's lease lapses and the
            # reconciler replays it (RQ's started registry, for any other job)
            self._state = WorkerStatus.IDLE
            self._store_away("execute_job", exc)

    def _execute_job(self, job: Job, queue: Queue) -> None:
        if not getattr(job, "fetched", True):
            carried = getattr(job, "carried", None)
            claim = self.claim(job.id, carried)
            if claim is not None:
                self._run_claimed(job, queue, claim)
                return
            if carried is not None:  # a begun attempt this worker cannot run (no runtime): no hash to
                # read either; its run's lease lapses and the reconciler sends it on
                log.error("job_not_begun", job_id=job.id, queue=queue.name)
                self.connection.lrem(intermediate_key(queue), 1, job.element)  # type: ignore[attr-defined]
                return
            if not self._fetch(job, queue):
                return
        reason = self._refusal(job)
        if reason is not None:
            self._refuse(job, queue, reason)
            return
        claim = self.claim_read(job) if _deleted_on_success(job, self) else None
        if claim is not None:
            self._run_claimed(job, queue, claim)
            return
        ttl = self.get_heartbeat_ttl(job)
        self.jobs_begun += 1
        with self.connection.pipeline() as pipe:
            execution = Execution.create(job, ttl, pipeline=pipe, worker_name=self.name)
            self.executions[execution.id] = execution
            self._busy(ttl, pipe)
            job.prepare_for_execution(self.name, pipeline=pipe)  # sets last_heartbeat too: no job.heartbeat
            pipe.persist(job.key)  # a job requeued from the failed registry keeps its failure TTL
            if len(self.queues) == 1:
                pipe.lrem(intermediate_key(queue), 1, job.id)
            pipe.execute()
        with self.job_context():
            self.perform_job(job, queue, execution)
        self.set_state(WorkerStatus.IDLE)

    def _fetch(self, job: Job, queue: Queue) -> bool:
        """Read the hash of a job handed over unread, as RQ's dequeue would have; False when there
        is nothing to run (the hash is gone, as RQ passes over, or is set aside unreadable)."""
        try:
            job.refresh()  # type: ignore[no-untyped-call]
        except NoSuchJobError:
            return False
        except (redis.ConnectionError, redis.TimeoutError):
            raise  # Redis's trouble, not the job's
        except Exception as exc:
            self._set_aside(job.id, [queue], exc)
            return False
        job.fetched = True  # type: ignore[attr-defined]
        return True

    def _run_claimed(self, job: Job, queue: Queue, claim: Claim) -> None:
        """Run a job whose begin (``claim.command``) takes over its crash recovery (parkway's: the
        fence check and the lease, which the reconciler watches) and whose result is not kept,
        without RQ's per-job records: one round trip takes it off the intermediate list, deletes its
        hash and begins it; ``claim.run`` then runs it, given what ``claim.read`` makes of the
        begin's reply; nothing is written when it ends. The take and the job's store calls go over
        one connection of the store's pool (``holding``). No execution record, started-registry entry,
        busy state in the worker key or success count is written: a worker killed mid-job leaves
        its run's lease to lapse (the reconciler replays the node), and an error the entrypoint
        raises is logged (the run's lease lapses the same way). The worker key's expiry is raised
        for the job's duration, as RQ's busy state does; the state RQ's stop signal handler reads
        is kept in memory, so a stop signal mid-job still waits for the job to end."""
        if claim.timeout is not None:
            job.timeout = claim.timeout
        ttl = self.busy_ttl = self.get_heartbeat_ttl(job)
        self._state = WorkerStatus.BUSY  # before the hash goes: a drain always sees one or the other
        self.jobs_begun += 1
        try:
            with holding(claim.client):
                self._take_and_run(job, queue, claim, ttl)
        finally:
            self.busy_ttl = None
            self._state = WorkerStatus.IDLE
            job.ended_at = now()

    def _take_and_run(self, job: Job, queue: Queue, claim: Claim, ttl: int) -> None:
        """``_run_claimed``'s round trip that takes and begins the job, then the job. A job its resume
        began (format 3: ``claim.command`` None) has no hash, and runs at once: its element's LREM
        and the worker key's EXPIRE ride the job's first round trip (``ride``)."""
        element = getattr(job, "element", job.id)
        if claim.command is None:
            taken: list[tuple[Any, ...]] = [("EXPIRE", self.key, ttl)]
            if len(self.queues) == 1:
                taken.insert(0, ("LREM", intermediate_key(queue), 1, element))
            ride([*taken, *claim.rides])
            self._run_taken(job, queue, claim, functools.partial(claim.read, None))
            return
        acks = self.begin_acks()
        sent = time.monotonic()
        commands: list[tuple[Any, ...]] = []
        if len(self.queues) == 1:
            commands.append(("LREM", intermediate_key(queue), 1, element))
        commands += [("DEL", job.key), ("EXPIRE", self.key, ttl), claim.command]
        if acks is not None:  # the begin confirmed before the node runs (see begin_acks)
            commands.append(("WAIT", acks.replicas, acks.timeout_ms))
        replies = run_commands(claim.client, commands)
        if acks is not None:
            acknowledged = replies.pop()
            if isinstance(acknowledged, Exception):
                raise acknowledged
            shortfall = acks.shortfall(int(acknowledged), (time.monotonic() - sent) * 1000)
            if shortfall is not None:  # a primary replaced meanwhile may be the one that took it
                raise ReplicaShortfall(f"job {job.id}'s begin: {shortfall}")
        for reply in replies[:-1]:
            if isinstance(reply, Exception):
                raise reply  # Redis's trouble, not the job's: RQ's loop deals with it, as before
        self._run_taken(job, queue, claim, functools.partial(claim.read, replies[-1]))

    def _run_taken(self, job: Job, queue: Queue, claim: Claim, began: Callable[[], Any]) -> None:
        """Run a job taken (and begun) under its death penalty; what it raises is logged."""
        job.started_at = now()
        timeout = job.timeout or self.queue_class.DEFAULT_TIMEOUT
        penalty = self.death_penalty_class(timeout, JobTimeoutException, job_id=job.id)
        try:
            with self.job_context(), penalty:
                claim.run(began)
        except BaseException:  # noqa: BLE001 - as RQ's perform_job: even a SystemExit the job
            # raises is the job's, not the worker's (a cold shutdown's, raised by RQ's signal
            # handler, ends the loop there: the first signal set _stop_requested)
            log.exception("job_failed", job_id=job.id, queue=queue.name)

    def _busy(self, ttl: int, pipe: Any) -> None:
        """RQ's ``set_state(BUSY)`` and ``heartbeat(ttl)`` on ``pipe``, the worker key's two fields
        in one HSET."""
        self._state = WorkerStatus.BUSY
        self.last_heartbeat = now()
        pipe.hset(self.key, mapping={"state": WorkerStatus.BUSY, "last_heartbeat": utcformat(self.last_heartbeat)})
        pipe.expire(self.key, ttl)
        pipe.expire(self.executions_key, ttl)

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
            # RQ's cleanup_execution, but for its ZREM from the job's execution registry, which goes
            # in the DEL below with the execution's own key
            started_job_registry.remove_execution(execution, pipeline=pipe)
            pipe.srem(execution.worker_executions_key, execution.composite_key)
            self.executions.pop(execution.id, None)
            pipe.delete(
                execution.key,
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
        if in_finalizer(frame):
            # RQ stops an idle worker by raising StopRequested from the handler; raised into a
            # ``__del__`` (redis-py's Pipeline has one) it is swallowed, printed as "Exception
            # ignored" and the stop is lost. Deliver the signal again a moment later, outside it.
            threading.Timer(STOP_RETRY_S, os.kill, (os.getpid(), signum)).start()
            return
        self.ended_as_asked = True
        super().request_stop(signum, frame)  # type: ignore[no-untyped-call]

    def unsubscribe(self) -> None:
        """RQ's, with its listener thread told to stop first and then woken by a message on its own
        channel, sent on another connection: the thread sees the flag down, closes its pubsub and ends.

        RQ unsubscribes before stopping it: when the reply came first, the thread went back to its
        60 s read and RQ's ``join(timeout=1)`` waited it out (about one stop in seven). Nothing here
        touches the pubsub's connection while the thread may use it: an UNSUBSCRIBE sent on it raced
        the thread's own close (redis-py closes the pubsub as the thread ends; on the in-process
        Redis the two met in its parser: "generator already executing")."""
        thread = self.pubsub_thread
        if thread is None:
            return
        try:
            thread.stop(timeout=0)  # redis-py 8.2+: stop() also joins, unless told not to wait
        except TypeError:  # before 8.2: stop() only lowers the flag, and takes no timeout
            thread.stop()
        if thread.is_alive():
            try:
                self.connection.publish(self.pubsub_channel_name, LISTENER_WAKE)
            except redis.RedisError:  # Redis away: the thread's read ends with the connection
                pass
            thread.join(timeout=1)
        if not thread.is_alive():
            return
        self.pubsub.close()  # it did not wake in time: RQ's way, the socket closed under the read


    def dequeue_job_and_maintain_ttl(
        self, timeout: int | None, max_idle_time: int | None = None
    ) -> tuple[Job, Queue] | None:
        """RQ's, except that a job RQ cannot even load is set aside and the next one taken."""
        while True:
            try:
                result = self._ridden() if self._ride is not None else None
                if result is None:
                    result = super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
            except UnicodeDecodeError as exc:  # the popped id is not UTF-8: RQ fails to decode it
                self._set_aside(exc.object, self.queues, exc)
                continue
            except Exception as exc:
                if store_away(exc):
                    self._store_away("dequeue", exc)
                    if self._stop_requested:
                        return None
                    continue
                job_id, queue = getattr(exc, "job_id", None), getattr(exc, "queue", None)
                if not isinstance(job_id, str) or not isinstance(queue, Queue):  # not one job's fault
                    raise
                self._set_aside(job_id, [queue], exc)
                continue
            if result is None:  # burst mode and the queue is empty, or idle for max_idle_time
                self.ended_as_asked = True
            self._store_failures = 0
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
        for raw_id in self.connection.lrange(intermediate_key(queue), 0, -1):
            if _begun(raw_id):
                # a resume's begun attempt whose worker is starting it, or died with it: its run's
                # lease recovers it either way, and RQ's cleanup would die on the element
                self.connection.lrem(intermediate_key(queue), 1, raw_id)  # type: ignore[arg-type]
                continue
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
                    pipe.lrem(intermediate_key(queue), 1, raw_id)  # type: ignore[arg-type]
                    if job_id is not None:
                        pipe.zadd(queue.failed_job_registry.key, {job_id: current_timestamp() + DEFAULT_FAILURE_TTL})
                if job_id is not None:
                    pipe.expire(Job.key_for(job_id), DEFAULT_FAILURE_TTL)
                pipe.execute()
        except redis.RedisError:  # the id stays where it is; the next pass sets it aside
            log.exception("job_unreadable_not_set_aside", job_id=shown)

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
                pipe.lrem(intermediate_key(queue), 1, job.id)
                self.increment_failed_job_count(pipeline=pipe)
                pipe.execute()
        except StopRequested:
            raise
        except Exception as exc:  # the stored fields do not even write back
            self._set_aside(job.id, [queue], exc)


def _begun(raw: str | bytes) -> bool:
    """Whether an element of a queue's lists carries an attempt its resume began (format 3)."""
    return (b" " in raw) if isinstance(raw, bytes) else begun_element(raw)


def _rq_id(raw_id: str | bytes) -> str | None:
    """The id as RQ's registries can hold it, or None if RQ rejects it."""
    try:
        job_id = raw_id.decode() if isinstance(raw_id, bytes) else raw_id
        validate_job_id(job_id)
    except ValueError:  # UnicodeDecodeError included
        return None
    return job_id


def _deleted_on_success(job: Job, worker: SimpleWorker) -> bool:
    """Whether RQ would delete the job right after it succeeds, with nothing else to do."""
    return (
        job.get_result_ttl(worker.default_result_ttl) == 0
        and not job.repeats_left
        and not job.group_id
        and not job.has_rate_limit
    )


STOP_RETRY_S = 0.01
"""how soon a stop signal that landed in a finalizer is delivered again"""


def in_finalizer(frame: FrameType | None) -> bool:
    """Whether ``frame`` (where a signal interrupted the main thread) runs inside a ``__del__``."""
    while frame is not None:
        if frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False
