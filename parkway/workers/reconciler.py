"""The reconciler: no run stays queued, running or waiting forever.

One pass looks at what the store says is due and acts:

- a *lease* that expired (the worker executing the run stopped renewing it:
  SIGKILL, OOM, a hung host) -> requeue the run under a new fence, so the
  node replays on a live worker, or fail it after ``max_lost`` lost attempts;
- an *outbox* entry older than a few seconds whose job is no longer pending
  (a resume accepted but never enqueued, a job lost with its worker before it
  began) -> move the run to a new fence and enqueue it, and drop the lost job from RQ's
  records (RQ would fail it, and keep the failure a year);
- what no run holds any more (closed interrupts past the retention, a workflow with no
  interrupt left, the pause feed once no workflow has one) -> drop it, so an idle deployment
  returns to its fixed keys (``Store.prune_idle``); a run whose summary is gone -> out of the run
  index (``Store.prune_runs``);
- a parked run's stream past the moment its park left it for its blocked readers -> read, so
  Redis drops it now (``Store.reclaim_folded``);
- an interrupt past its TTL -> record ``interrupt.expired`` and apply its
  ``on_expire`` policy: end its run ``expired`` (the default) or ``failed``, queue
  its node with a cancellation or a default answer, or escalate it (ask again,
  under the same token, another audience with a new TTL: the run keeps waiting).

Every worker runs it in a background thread: the due interrupts are shared among all of them
(each claims a batch of its own, and passes follow each other at once while batches come back
full), the rest is one worker's at a time (by lock), who also keeps the records of the runs of an
expiry backlog alive past the grace (``PARKWAY_EXPIRY_GRACE_MS``) until their expiry is recorded,
and logs the backlog (``expiry_overdue``). ``parkway reconcile`` runs one pass by hand.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..adapters.limits import Limits
from ..runtime.clock import now_ms
from ..runtime.errors import ParkwayError
from ..runtime.logger import get_logger
from ..runtime.store import IndexEntry, UpkeepStore
from .jobs import Dispatcher

log = get_logger()

OUTBOX_AGE_MS = 5000
CLAIM_MS = 10_000
"""how long a reconciler holds the due interrupts it claimed (one batch) before another may take them"""
SETTLE_POLL_S = 0.02
"""how often a pass that waits for other reconcilers' claims looks again"""
OVERDUE_LOG_MS = 5000
"""an interrupt this long past its expiry, unrecorded, is logged (``expiry_overdue``) at every pass"""
EXTEND_LIMIT = 100_000
"""the most runs one pass keeps the records of (the earliest due first; per workflow)"""


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
    store: UpkeepStore,
    dispatcher: Dispatcher,
    *,
    max_lost: int = 3,
    now: int | None = None,
    outbox_age_ms: int = OUTBOX_AGE_MS,
    limit: int = 200,
    grace_ms: int = Limits.expiry_grace_ms,
) -> Report:
    """One pass over what is due, every due interrupt included (batch after batch while they come
    back full, and until those other reconcilers claimed are recorded too: when it returns, every
    interrupt due at ``now`` has its expiry recorded); returns what it did."""
    report = Report()
    watch_backlog(store, now_ms() if now is None else now, grace_ms)
    housekeep(store, dispatcher, report, max_lost=max_lost, now=now, outbox_age_ms=outbox_age_ms, limit=limit)
    expire_due(store, dispatcher, report, now=now, limit=limit, settle=True)
    return report


def housekeep(
    store: UpkeepStore,
    dispatcher: Dispatcher,
    report: Report,
    *,
    max_lost: int = 3,
    now: int | None = None,
    outbox_age_ms: int = OUTBOX_AGE_MS,
    limit: int = 200,
) -> None:
    """What one reconciler does for all (the lock holder): lost leases, lost jobs, parked streams,
    idle records (the expiry backlog's watch is ``watch_backlog``'s, on a beat of its own)."""
    now = now_ms() if now is None else now
    due = store.due(now, outbox_age_ms, limit)
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
        # taken by a worker that died before beginning it: RQ's cleanup would fail it. Dropped first,
        # while the outbox entry still names it: if this pass stops here, the next one does both
        dispatcher.discard(run_id, fence)
        result = store.redispatch(run_id, step, fence, now)
        if result.outcome == "requeued":
            dispatcher.enqueue(run_id, result.step, result.fence)
            report.redispatched.append(run_id)
            log.warning("job_redispatched", run_id=run_id, step=step, reason="job not begun")
    store.reclaim_folded(now, limit * 5)
    for workflow in store.prune_idle(now):
        log.info("workflow_idle", workflow=workflow)
    store.prune_runs(now, limit * 5)


def watch_backlog(store: UpkeepStore, now: int, grace_ms: int, *, extend: bool = True) -> None:
    """Log the interrupts past their expiry still unrecorded when the oldest waited ``OVERDUE_LOG_MS``
    or more; with ``extend``, keep the records of those an eighth of the grace past their expiry
    alive a whole grace from now (``Store.extend_overdue``), so a backlog however deep never outlives
    them: a run's expiry is late, never lost, while some reconciler watches every eighth of the
    grace (late by up to half the grace still loses nothing)."""
    backlog = store.overdue(now)
    age = backlog.age_ms(now)
    if age >= OVERDUE_LOG_MS:
        log.warning("expiry_overdue", interrupts=backlog.count, oldest_overdue_ms=age)
    if extend and age >= grace_ms // 8:
        extended = store.extend_overdue(now, now - grace_ms // 8, now + grace_ms, EXTEND_LIMIT)
        log.info("expiry_records_extended", runs=extended, until_ms=now + grace_ms)


def expire_due(
    store: UpkeepStore,
    dispatcher: Dispatcher,
    report: Report,
    *,
    now: int | None = None,
    limit: int = 200,
    budget_s: float | None = None,
    settle: bool = False,
) -> bool:
    """Record the expiry of the interrupts past their TTL and apply their policies, a batch of
    ``limit`` at a time while batches come back full. Each batch is claimed (``Store.claim_due``),
    so every reconciler running this at once takes a batch of its own. Past ``budget_s`` seconds it
    stops after a batch; returns whether that batch was full (more may be due). With ``settle``, a
    batch short of ``limit`` ends it only once no interrupt is left due (those other reconcilers
    claimed are recorded, or their claims lapsed and it took them)."""
    deadline = None if budget_s is None else time.monotonic() + budget_s
    while True:
        at = now_ms() if now is None else now
        batch = store.claim_due(at, limit, CLAIM_MS)
        done: list[str] = []
        try:
            for entry in batch:
                _expire(store, dispatcher, report, entry, at)
                done.append(entry.run_id)
        finally:  # a claim not released (its expiry raised) lapses: retried in CLAIM_MS, not at once
            store.release_claims(done)
        if len(batch) < limit:
            if not settle or store.overdue(at).count == 0:
                return False
            time.sleep(SETTLE_POLL_S)
            continue
        if deadline is not None and time.monotonic() >= deadline:
            return True


def _expire(store: UpkeepStore, dispatcher: Dispatcher, report: Report, entry: IndexEntry, now: int) -> None:
    expiry = store.expire(entry, now)
    if expiry.outcome == "escalated":
        report.escalated.append(entry.run_id)
        log.info("interrupt_escalated", run_id=entry.run_id, request_id=entry.request_id)
    if expiry.outcome == "expired":
        report.expired.append(entry.run_id)
        log.info("interrupt_expired", run_id=entry.run_id, request_id=entry.request_id, action=expiry.action)
        if expiry.action in ("cancel", "answer", "timer"):  # the run goes on: its node replays
            dispatcher.enqueue(entry.run_id, expiry.step, expiry.fence)


class Maintenance:
    """A worker's background threads, each on a beat of its own so none delays another:

    - ``tick``, every ``period`` (``interval``, or an eighth of the expiry grace if shorter): renew
      the lease of the running job (and, every ``busy_every_s`` of one job, call ``busy``: the worker
      keeps its RQ key alive through a long node) and, for one worker at a time (by lock), watch the expiry
      backlog (``watch_backlog``: log it; every eighth of the grace, keep its runs' records alive);
    - ``sweep``, every ``interval``: the lock holder's ``housekeep`` (leases, lost jobs, parked
      streams, idle records);
    - ``drain``: expire the due interrupts, batches of its own (``expire_due``), one after the
      other while they come back full.

    A pass on a Redis that does not answer raises ``StoreUnavailable`` within the store's bound
    (``GIVE_UP_S`` of ``adapters.redis.connection``); the thread logs ``maintenance_error`` and waits
    twice as long before the next pass (up to 5 s), and back to its beat once one works.
    """

    def __init__(
        self,
        store: UpkeepStore,
        dispatcher: Dispatcher,
        *,
        owner: str,
        current: Callable[[], str | None],
        lease_ms: int = 5000,
        max_lost: int = 3,
        grace_ms: int = Limits.expiry_grace_ms,
        busy: Callable[[], None] | None = None,
        busy_every_s: float = 30.0,
    ) -> None:
        self.store, self.dispatcher, self.owner, self.current = store, dispatcher, owner, current
        self.busy, self.busy_every_s = busy, busy_every_s
        self._busy_run: str | None = None
        self._next_busy = 0.0
        self.lease_ms, self.max_lost, self.grace_ms = lease_ms, max_lost, grace_ms
        self.interval = lease_ms / 5000
        self.period = max(0.05, min(self.interval, grace_ms / 8000))
        self._next_extend = 0.0
        self._stop = threading.Event()
        beats = ((self.tick, self.period, "maintenance"), (self.sweep, self.interval, "sweep"),
                 (self.drain, self.interval, "expiry"))
        self._threads = [
            threading.Thread(target=self._loop, args=(body, period), name=f"parkway-{name}", daemon=True)
            for body, period, name in beats
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=5)

    def _lead(self) -> bool:
        return self.store.try_lock(self.owner, int(self.lease_ms * 0.6))

    def tick(self) -> bool:
        """Renew the running job's lease; watch the expiry backlog if this worker holds the lock."""
        run_id = self.current()
        if run_id is not None:
            self.store.heartbeat([run_id], now_ms() + self.lease_ms)
            if self.busy is not None:
                if run_id != self._busy_run:  # a job's start raised the key's expiry itself
                    self._busy_run, self._next_busy = run_id, time.monotonic() + self.busy_every_s
                elif time.monotonic() >= self._next_busy:
                    self._next_busy = time.monotonic() + self.busy_every_s
                    self.busy()
        else:
            self._busy_run = None
        if self._lead():
            extend = time.monotonic() >= self._next_extend
            if extend:  # every eighth of the grace, not at every beat: a deep backlog costs a read per run
                self._next_extend = time.monotonic() + self.grace_ms / 8000
            watch_backlog(self.store, now_ms(), self.grace_ms, extend=extend)
        return False

    def sweep(self) -> bool:
        """The lock holder's housekeeping."""
        if self._lead():
            housekeep(self.store, self.dispatcher, Report(), max_lost=self.max_lost)
        return False

    def drain(self) -> bool:
        """Expire a share of the due interrupts for about ``interval``; whether more may be due."""
        return expire_due(self.store, self.dispatcher, Report(), budget_s=self.interval)

    def _loop(self, body: Callable[[], bool], period: float) -> None:
        backoff = period
        while not self._stop.wait(backoff):
            try:
                backoff = 0 if body() else period
            except ParkwayError as exc:
                backoff = min(max(backoff, period) * 2, 5.0)
                log.warning("maintenance_error", error=exc.message, retry_in=backoff)
            except Exception:  # never let housekeeping kill the worker
                log.exception("maintenance_crashed")
                time.sleep(1)
