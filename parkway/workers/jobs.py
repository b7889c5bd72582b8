"""The one RQ job parkway runs, and how it is enqueued.

Every job is ``execute_job(run_id, step, fence)`` with the deterministic id
``<prefix>-<run_id>-<fence>`` (``pw-`` by default, see ``keys.PREFIX``) and
``unique=True``: enqueuing the same transition twice is a no-op. Results are
not kept (``result_ttl=0``); what a job did is in the run's records. The job a
start or a resume calls for is written by the store's script that commits it,
for the fence it wrote (``RQDispatcher.next_job``); the others, and that one
when a store cannot, are enqueued by ``RQDispatcher``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import redis
from rq import Queue, Worker
from rq.exceptions import DuplicateJobError
from rq.job import Job, JobStatus

from ..adapters.redis import keys
from ..adapters.redis.connection.connection import connect
from ..adapters.redis.connection.errors import translated
from ..adapters.redis.connection.token_key import token_key
from ..adapters.redis.formats import gates_of
from ..adapters.redis.store.store import RedisStore
from ..config import Settings
from ..runtime import executor, features
from ..runtime.errors import InvalidId
from ..runtime.logger import get_logger
from ..runtime.protocol import TENANT_SEPARATOR, WorkerSeen, check_id
from ..runtime.store import Attempt, Store
from . import rq_internals
from .serializer import MsgpackSerializer

log = get_logger()

_PENDING = {JobStatus.QUEUED, JobStatus.DEFERRED, JobStatus.SCHEDULED}


def _heads(run_id: str) -> tuple[str, str]:
    """The job id and the description of ``run_id``'s jobs up to the fence and the step (the
    store's scripts append them when they write the job).

    RQ allows only letters, digits, '_' and '-' in a job id, so a tenant's run (``<tenant>~<name>``,
    ``protocol.scoped_id``) is named ``<prefix>_<length of tenant>-<tenant>-<name>-<fence>``
    (``pw_4-acme-order-1-3``): no run id of no tenant gives that (its id follows ``<prefix>-``),
    and the length says where the tenant ends (a tenant may hold '-')."""
    tenant, sep, name = run_id.rpartition(TENANT_SEPARATOR)
    named = f"_{len(tenant)}-{tenant}-{name}" if sep else f"-{run_id}"
    return f"{keys.PREFIX}{named}-", f"parkway {run_id} step "


def job_id(run_id: str, fence: int) -> str:
    return f"{_heads(run_id)[0]}{fence}"


def parse_job_id(value: str) -> tuple[str, int] | None:
    """The run and the fence a parkway job id names, or None for any other id."""
    head, _, fence = value.rpartition("-")
    if not head.startswith(keys.PREFIX) or not fence.isascii() or not fence.isdigit() or fence != str(int(fence)):
        return None
    run_id = head[len(keys.PREFIX) + 1 :]
    if head[len(keys.PREFIX) : len(keys.PREFIX) + 1] == "_":  # a tenant's run: _<length>-<tenant>-<name>
        length, _, rest = run_id.partition("-")
        if not length.isascii() or not length.isdigit() or rest[int(length) : int(length) + 1] != "-":
            return None
        run_id = f"{rest[: int(length)]}{TENANT_SEPARATOR}{rest[int(length) + 1 :]}"
    elif head[len(keys.PREFIX) : len(keys.PREFIX) + 1] != "-":
        return None
    try:
        return check_id(run_id, "run id"), int(fence)
    except InvalidId:
        return None


def _description(run_id: str, step: int) -> str:
    return f"{_heads(run_id)[1]}{step}"


class Dispatcher(Protocol):
    """Starts the job for a transition (on RQ's queue, in production and embedded alike)."""

    def enqueue(self, run_id: str, step: int, fence: int) -> None:
        """Enqueue the job for ``fence``; enqueuing it twice is a no-op."""

    def is_pending(self, run_id: str, fence: int) -> bool:
        """Whether the job for ``fence`` still waits in the queue (and so will begin)."""

    def discard(self, run_id: str, fence: int) -> None:
        """Drop what the queue keeps of the job for ``fence``, which no worker will begin (the
        reconciler redispatched its run)."""

    def workers(self) -> list[WorkerSeen]:
        """The workers registered on the queue."""

    def queued(self) -> int:
        """How many jobs wait on the queue."""


def _ms(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.replace(tzinfo=moment.tzinfo or UTC).timestamp() * 1000)


class RQDispatcher:
    """Enqueues parkway jobs on an RQ queue."""

    def __init__(self, connection: redis.Redis, settings: Settings) -> None:
        self.settings = settings
        self.connection = connection
        self.queue = Queue(settings.queue, connection=connection, serializer=MsgpackSerializer)
        self.next_job = rq_internals.JobHash(self.queue, self._job("run", 0, 0), _heads)
        """the job hash as RQ's unique enqueue writes it, for the store's scripts to write with the
        transition that calls for the job (``RedisStore(next_job=...)``)"""

    def _job(self, run_id: str, step: int, fence: int) -> Job:
        return self.queue.create_job(
            execute_job,
            args=(run_id, step, fence),
            job_id=job_id(run_id, fence),
            result_ttl=0,
            timeout=self.settings.job_timeout,
            description=_description(run_id, step),
        )

    def enqueue(self, run_id: str, step: int, fence: int) -> None:
        with translated(run_id):
            try:
                self.queue.enqueue_job(self._job(run_id, step, fence), unique=True)
            except DuplicateJobError:
                log.info("enqueue_duplicate", run_id=run_id, fence=fence)

    def workers(self) -> list[WorkerSeen]:
        """The workers on this queue in RQ's worker registry (``Worker.all``: one read per worker)."""
        with translated():
            found = Worker.all(connection=self.connection, queue=self.queue)
        return [
            WorkerSeen(
                name=w.name,
                host=w.hostname,
                pid=w.pid,
                started_at=_ms(w.birth_date),
                heartbeat_at=_ms(w.last_heartbeat),
            )
            for w in found
        ]

    def queued(self) -> int:
        """How many jobs wait on the queue."""
        with translated():
            return int(self.queue.count)

    def discard(self, run_id: str, fence: int) -> None:
        """Drop the job for ``fence`` from RQ's records in one MULTI: a job a worker took and died
        with before beginning it stays in RQ's intermediate list, and RQ's cleanup would fail it
        into its registry (kept a year) for a run the reconciler has sent on."""
        with translated(run_id), self.connection.pipeline() as pipe:
            rq_internals.discard_taken(pipe, self.queue, job_id(run_id, fence))
            pipe.execute()

    def is_pending(self, run_id: str, fence: int) -> bool:
        """Queued and still in the queue: a job a worker took (into RQ's intermediate list) and
        died with before starting it still says "queued", but no worker will ever run it."""
        jid = job_id(run_id, fence)
        with translated(run_id):
            pipe = self.connection.pipeline(transaction=False)
            pipe.hget(Job.key_for(jid), "status")
            rq_internals.is_taken(pipe, self.queue, jid)
            status, taken = pipe.execute()
        if status is None or taken is not None:
            return False
        return JobStatus(status.decode() if isinstance(status, bytes) else status) in _PENDING


@dataclass
class WorkerRuntime:
    """What one worker process needs to run jobs."""

    pid: int
    settings: Settings
    store: RedisStore
    options: executor.Options
    dispatcher: RQDispatcher
    current: str | None = None
    """the run this process is executing now (its lease is renewed in the background)"""


_runtime: WorkerRuntime | None = None
_serving: ContextVar[WorkerRuntime | None] = ContextVar("parkway_serving", default=None)


@contextmanager
def serving(rt: WorkerRuntime) -> Iterator[None]:
    """Run the jobs started inside this block with ``rt``: RQ calls a job function with the job's
    arguments only, so a worker that brings its own runtime (the embedded one) names it here."""
    token = _serving.set(rt)
    try:
        yield
    finally:
        _serving.reset(token)


def install(settings: Settings) -> WorkerRuntime:
    """Prepare this process to run jobs (the worker calls it; see ``worker_runtime`` for the rest).
    The runtime it replaces, if this process installed one, has its connections closed."""
    global _runtime
    if settings.redis_url is None:
        raise RuntimeError("parkway workers need PARKWAY_REDIS_URL")
    client = connect(settings.redis_url)
    try:
        dispatcher = RQDispatcher(client, settings)
        # a child run's start, and its parent's resume when it ends, enqueue their jobs in their scripts
        store = RedisStore(client, settings.limits, dispatcher.next_job, settings.acks, settings.lease_ms)
        secret = token_key(settings.secret, store.client)
    except BaseException:
        client.close()
        raise
    options = executor.Options(
        secret=secret, loader=settings.modules.load, lease_ms=settings.lease_ms, extensions=features.extensions()
    )
    uninstall()
    _runtime = WorkerRuntime(os.getpid(), settings, store, options, dispatcher)
    return _runtime


def uninstall() -> None:
    """Close the connections of the runtime this process installed, if any (a forked child leaves
    its parent's alone); the next job installs one again."""
    global _runtime
    old, _runtime = _runtime, None
    if old is not None and old.pid == os.getpid():
        for gate in gates_of(old.store):
            gate.stop()  # its announcement too (adapters/redis/formats.py)
        old.store.client.close()


def worker_runtime() -> WorkerRuntime:
    """The runtime of the job running now: its worker's (see ``serving``), else this process's."""
    rt = _serving.get()
    if rt is not None:
        return rt
    if _runtime is None or _runtime.pid != os.getpid():
        # a job run by a worker that brought no runtime (RQ's own worker, or a process forked after
        # ``install``): across that process boundary, the environment is all it has to go on
        return install(Settings.from_env())
    return _runtime


def execute_job(run_id: str, step: int, fence: int, began: Callable[[], Attempt] | None = None) -> str:
    """RQ entrypoint: carry the run from ``step`` until it pauses, ends or fails. ``began`` is given
    by parkway's worker, which sent the activation's ``begin`` in the round trip that took the
    job (see ``ParkwayJob``): it returns the attempt, or raises what ``begin`` would."""
    return execute_with(worker_runtime(), run_id, step, fence, began)


def execute_with(
    rt: WorkerRuntime,
    run_id: str,
    step: int | None,
    fence: int,
    began: Callable[[], Attempt] | None = None,
    *,
    last: Store | None = None,
) -> str:
    """``execute_job`` with ``rt``; ``step`` None when the job is known by its id alone (parkway's
    worker runs those without reading their hash: ``began`` is then always given). ``last``: the
    store the job's last commit goes through (``executor.execute``; None: ``rt.store``)."""
    rt.current = run_id
    try:
        return executor.execute(rt.store, rt.options, run_id, step, fence, began, last).value
    finally:
        rt.current = None


EXECUTE_JOB = f"{execute_job.__module__}.{execute_job.__qualname__}"
"""the job function's name as RQ records it (``Job.func_name``)"""
