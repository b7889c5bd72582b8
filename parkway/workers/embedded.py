"""Embedded mode's jobs: parkway's own worker, on a thread of this process, over the in-process Redis.

Nothing here carries a run: jobs are enqueued as in production (by RQ, or by the
store's scripts in the call that commits a transition) and a :class:`ParkwayWorker`
runs them, its maintenance thread renewing leases and reconciling. What belongs to
one process only:

- workflows started as objects (defined anywhere, even in ``__main__``) are kept by
  reference in a :class:`Workflows` registry that the backend owns and hands to the
  executor as its loader; a reference not in it is imported as in production;
- ``drain`` blocks until every job has run (tests and scripts rely on it);
- the worker thread stops on ``Parkway.close()`` or, within a second, once the backend
  that started it is collected.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import fakeredis
from rq import Queue
from rq.job import JobStatus

from ..adapters.redis.connection import embedded as inproc
from ..adapters.redis.connection.errors import translated
from ..adapters.redis.store.store import RedisStore
from ..config import Settings
from ..runtime import executor
from ..runtime.errors import WaitTimeout, WorkflowError
from ..runtime.loading import WorkflowModules
from ..runtime.workflow import Workflow
from . import rq_internals
from .jobs import RQDispatcher, WorkerRuntime
from .serializer import MsgpackSerializer
from .worker import ParkwayWorker

WORKER_TTL_S = 16
"""RQ waits for a job at most ``WORKER_TTL_S - 15`` s at a time: how soon a stopped worker notices"""
STOP_WAIT_S = 1.0
"""how long ``WorkerThread.stop`` keeps waking the worker for its thread to end (a job running on longer
ends the thread after it)"""
DRAIN_POLL_S = 0.001
DRAIN_POLL_MAX_S = 0.02
_UNFINISHED = {s.value for s in (JobStatus.QUEUED, JobStatus.STARTED, JobStatus.DEFERRED, JobStatus.SCHEDULED)}


class Workflows:
    """Workflows started in this process, by reference: found before anything is imported."""

    def __init__(self, modules: WorkflowModules) -> None:
        self.modules = modules
        self._by_ref: dict[str, Workflow] = {}

    def register(self, workflow: Workflow) -> str:
        """Keep ``workflow``; return the reference its runs record."""
        try:
            ref = workflow.ref()
        except WorkflowError:  # not importable (a local, or a name not bound to it): a process-local ref
            ref = f"embedded:{workflow.name}:{id(workflow):x}"
        self._by_ref[ref] = workflow
        return ref

    def load(self, ref: str) -> Workflow:
        """The registered workflow, else the one ``modules`` allows importing."""
        workflow = self._by_ref.get(ref)
        return workflow if workflow is not None else self.modules.load(ref)


class EmbeddedDispatcher(RQDispatcher):
    """RQ's dispatcher on the in-process Redis, which can also wait for the queue to be worked off
    by the worker whose ``activity`` it is given (``WorkerThread.activity``)."""

    def __init__(self, connection: Any, settings: Settings, activity: Callable[[], tuple[bool, int]]) -> None:
        super().__init__(connection, settings)
        self.activity = activity

    def drain(self, timeout: float = 60.0) -> None:
        """Block until no job is queued or running; raise WaitTimeout after ``timeout`` s.

        A job is in the queue, then its hash says ``queued`` until its worker begins it, then
        the worker is busy with it until it ends, after anything it enqueued: a look at the
        worker (busy, and how many jobs it began), the queue, the hashes, and the worker again
        that finds nothing, and the worker unchanged, finds nothing only when no job is left.
        """
        deadline, pause = time.monotonic() + timeout, DRAIN_POLL_S
        while self._unfinished():
            if time.monotonic() > deadline:
                raise WaitTimeout(f"jobs still unfinished after {timeout}s")
            time.sleep(pause)
            pause = min(pause * 2, DRAIN_POLL_MAX_S)

    def _unfinished(self) -> bool:
        before = self.activity()
        return before[0] or self._listed() or self.activity() != before

    def _listed(self) -> bool:
        with translated():
            if self.queue.count:  # the cheap look first: the full one reads every job's hash
                return True
            # a popped element its worker has not taken yet (one a resume began has no hash: format 3)
            if self.connection.llen(rq_internals.intermediate_key(self.queue)):
                return True
            found = list(self.connection.scan_iter(match=f"{rq_internals.JOB_KEY_PREFIX}*", count=1000))
            pipe = self.connection.pipeline(transaction=False)
            for key in found:
                pipe.hget(key, "status")
            statuses: list[Any] = pipe.execute() if found else []
        return any(s is not None and s.decode() in _UNFINISHED for s in statuses)


def _quiet_rq_loggers() -> None:
    """RQ's worker gives its loggers handlers of its own (to stdout and stderr, and stops them
    propagating) when nothing would catch their records: right for an ``rq worker`` process, not
    inside an application. A NullHandler, the standard library's advice for libraries, tells it
    something does; the records still propagate to whatever the application configures."""
    for name in ("rq.worker", "rq.job"):
        logger = logging.getLogger(name)
        if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
            logger.addHandler(logging.NullHandler())


class WorkerThread:
    """A ParkwayWorker on a daemon thread of this process, on its own client of ``server``."""

    def __init__(self, server: fakeredis.FakeServer, settings: Settings, options: executor.Options) -> None:
        self.connection = inproc.client(server)
        dispatcher = RQDispatcher(self.connection, settings)
        store = RedisStore(self.connection, settings.limits, dispatcher.next_job, None, settings.lease_ms)
        rt = WorkerRuntime(os.getpid(), settings, store, options, dispatcher)
        queue = Queue(settings.queue, connection=self.connection, serializer=MsgpackSerializer)
        self.worker = ParkwayWorker(
            [queue], connection=self.connection, serializer=MsgpackSerializer, runtime=rt, worker_ttl=WORKER_TTL_S,
            rides=False,  # see TrimmedWorker.rides
        )
        _quiet_rq_loggers()
        self.thread = threading.Thread(
            target=self.worker.work, kwargs={"logging_level": None}, name="parkway-embedded-worker", daemon=True
        )

    def activity(self) -> tuple[bool, int]:
        """Whether the worker runs a job now, and how many it has begun."""
        return self.worker.busy, self.worker.jobs_begun

    def start(self, owner: object) -> None:
        """Start working; stop (within a dequeue timeout) once ``owner`` is collected."""
        self.thread.start()
        weakref.finalize(owner, self.worker.stop)  # a flag only: a finalizer may run anywhere, even mid-command

    def stop(self) -> None:
        """Stop after the job running now, if any; an idle worker is woken from its wait at once.

        The wake is repeated until the thread has ended (for up to a second): a worker between its
        check of the stop flag and its blocking pop is not blocked yet when the first wake comes, and
        would otherwise wait out a whole dequeue timeout."""
        self.worker.stop()
        if self.thread.ident is None or self.thread is threading.current_thread():  # never started, or asked by its job
            return
        deadline = time.monotonic() + STOP_WAIT_S
        while True:
            with translated():
                for client in self.connection.client_list():
                    self.connection.client_unblock(int(client["id"]))
            self.thread.join(timeout=0.02)
            if not self.thread.is_alive() or time.monotonic() > deadline:
                return
