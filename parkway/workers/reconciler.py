"""The reconciler: no run stays queued, running or waiting forever.

One pass looks at what the store says is due and acts:

- a *lease* that expired (the worker executing the run stopped renewing it:
  SIGKILL, OOM, a hung host) -> requeue the run under a new fence, so the
  node replays on a live worker, or fail it after ``max_lost`` lost attempts;
- an *outbox* entry older than a few seconds whose job is no longer pending
  (a resume accepted but never enqueued, a job lost with its worker before it
  began) -> move the run to a new fence and enqueue it;
- what no run holds any more (closed interrupts past the retention, a workflow with no
  interrupt left, the pause feed once no workflow has one) -> drop it, so an idle deployment
  returns to its fixed keys (``Store.prune_idle``);
- a parked run's stream past the moment its park left it for its blocked readers -> read, so
  Redis drops it now (``Store.reclaim_folded``);
- an interrupt past its TTL -> record ``interrupt.expired`` and apply its
  ``on_expire`` policy: end its run ``expired`` (the default) or ``failed``, queue
  its node with a cancellation or a default answer, or escalate it (ask again,
  under the same token, another audience with a new TTL: the run keeps waiting).

Every worker runs it in a background thread, one worker at a time (by lock);
``parkway reconcile`` runs one pass by hand.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..runtime.clock import now_ms
from ..runtime.errors import ParkwayError
from ..runtime.logger import get_logger
from ..runtime.store import Store
from .jobs import Dispatcher

log = get_logger()

OUTBOX_AGE_MS = 5000


@dataclass
class Report:
    recovered: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    redispatched: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    escalated: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.recovered or self.failed or self.redispatched or self.expired or self.escalated)


def reconcile_once(
    store: Store,
    dispatcher: Dispatcher,
    *,
    max_lost: int = 3,
    now: int | None = None,
    outbox_age_ms: int = OUTBOX_AGE_MS,
    limit: int = 200,
) -> Report:
    """One pass over what is due; returns what it did."""
    now = now_ms() if now is None else now
    due = store.due(now, outbox_age_ms, limit)
    report = Report()
    for run_id in due.expired_leases:
        error = {
            "message": f"the worker running this node was lost {max_lost} times; giving up",
            "type": "parkway.WorkerLost",
            "traceback": "",
            "node": None,
        }
        result = store.recover(run_id, now, max_lost, error)
        if result.outcome == "requeued":
            dispatcher.enqueue(run_id, result.step, result.fence)
            report.recovered.append(run_id)
            log.warning("attempt_recovered", run_id=run_id, step=result.step, reason="lease expired")
        elif result.outcome == "failed":
            report.failed.append(run_id)
            log.error("run_failed", run_id=run_id, reason="worker lost too often")
    for run_id, step, fence in due.stale_outbox:
        if dispatcher.is_pending(run_id, fence):
            continue
        result = store.redispatch(run_id, step, fence, now)
        if result.outcome == "requeued":
            dispatcher.enqueue(run_id, result.step, result.fence)
            report.redispatched.append(run_id)
            log.warning("job_redispatched", run_id=run_id, step=step, reason="job not begun")
    for entry in due.expired_interrupts:
        expiry = store.expire(entry, now)
        if expiry.outcome == "escalated":
            report.escalated.append(entry.run_id)
            log.info("interrupt_escalated", run_id=entry.run_id, request_id=entry.request_id)
        if expiry.outcome == "expired":
            report.expired.append(entry.run_id)
            log.info("interrupt_expired", run_id=entry.run_id, request_id=entry.request_id, action=expiry.action)
            if expiry.action in ("cancel", "answer", "timer"):  # the run goes on: its node replays
                dispatcher.enqueue(entry.run_id, expiry.step, expiry.fence)
    store.reclaim_folded(now, limit * 5)
    for workflow in store.prune_idle(now):
        log.info("workflow_idle", workflow=workflow)
    return report


class Maintenance:
    """A worker's background thread: renew the lease of the running job, reconcile by lock.

    A pass on a Redis that does not answer raises ``StoreUnavailable`` within the store's bound
    (``GIVE_UP_S`` of ``adapters.redis.store``); the thread logs ``maintenance_error`` and waits
    twice as long before the next pass (up to 5 s), and back to every ``interval`` once one works.
    """

    def __init__(
        self,
        store: Store,
        dispatcher: Dispatcher,
        *,
        owner: str,
        current: Callable[[], str | None],
        lease_ms: int = 5000,
        max_lost: int = 3,
    ) -> None:
        self.store, self.dispatcher, self.owner, self.current = store, dispatcher, owner, current
        self.lease_ms, self.max_lost = lease_ms, max_lost
        self.interval = lease_ms / 5000
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="parkway-maintenance", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def tick(self) -> None:
        """One pass: renew the running job's lease, then reconcile if this worker holds the lock."""
        run_id = self.current()
        if run_id is not None:
            self.store.heartbeat([run_id], now_ms() + self.lease_ms)
        if self.store.try_lock(self.owner, int(self.lease_ms * 0.6)):
            reconcile_once(self.store, self.dispatcher, max_lost=self.max_lost)

    def _loop(self) -> None:
        backoff = self.interval
        while not self._stop.wait(backoff):
            try:
                self.tick()
                backoff = self.interval
            except ParkwayError as exc:
                backoff = min(backoff * 2, 5.0)
                log.warning("maintenance_error", error=exc.message, retry_in=backoff)
            except Exception:  # never let housekeeping kill the worker
                log.exception("maintenance_crashed")
                time.sleep(1)
