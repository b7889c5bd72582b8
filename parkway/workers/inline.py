"""The embedded executor: jobs run on one background thread of this process."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from ..runtime import executor
from ..runtime.errors import WorkflowError
from ..runtime.loading import WorkflowModules
from ..runtime.logger import get_logger
from ..runtime.store import Handoff, Store
from ..runtime.workflow import Workflow

log = get_logger()

_registry: dict[str, Workflow] = {}


def register(workflow: Workflow) -> str:
    """Keep ``workflow`` in this process so embedded runs find it even if it cannot be imported."""
    try:
        ref = workflow.ref()
    except WorkflowError:
        ref = f"embedded:{workflow.name}:{id(workflow):x}"
    _registry[ref] = workflow
    return ref


def loader(modules: WorkflowModules) -> Callable[[str], Workflow]:
    """Find a workflow registered in this process, else import it if ``modules`` allows."""

    def load(ref: str) -> Workflow:
        workflow = _registry.get(ref)
        return workflow if workflow is not None else modules.load(ref)

    return load


class InlineExecutor:
    """Runs parkway jobs in-process, one at a time, in enqueue order; duplicate enqueues are no-ops."""

    def __init__(self, store: Store, options: executor.Options) -> None:
        self.store = store
        self.options = options
        self._jobs: queue.Queue[tuple[str, int, int]] = queue.Queue()
        self._seen: set[tuple[str, int]] = set()
        self._waiting: set[tuple[str, int]] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def enqueue(self, run_id: str, step: int, fence: int) -> None:
        with self._lock:
            if (run_id, fence) in self._seen:
                return
            self._seen.add((run_id, fence))
            self._waiting.add((run_id, fence))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="parkway-inline", daemon=True)
                self._thread.start()
        self._jobs.put((run_id, step, fence))

    def handoff(self, run_id: str, step: int, fence: int) -> Handoff | None:
        """None: the memory store cannot enqueue, the caller does."""
        return None

    def is_pending(self, run_id: str, fence: int) -> bool:
        with self._lock:
            return (run_id, fence) in self._waiting

    def _loop(self) -> None:
        from .reconciler import reconcile_once

        while True:
            try:
                run_id, step, fence = self._jobs.get(timeout=1.0)
            except queue.Empty:  # idle: record expiries, like a worker's reconciler would
                try:
                    reconcile_once(self.store, self)
                except Exception:
                    log.exception("reconcile_crashed")
                continue
            with self._lock:
                self._waiting.discard((run_id, fence))
            try:
                executor.execute(self.store, self.options, run_id, step, fence)
            except Exception:  # a store failure must not kill the executor thread
                log.exception("job_crashed", run_id=run_id, step=step)
            finally:
                self._jobs.task_done()

    def drain(self) -> None:
        """Block until every enqueued job has run."""
        self._jobs.join()
