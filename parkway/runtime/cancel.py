"""Cancelling a run and the runs below it: for ``Parkway.cancel`` and for ``use_first``'s losing child.

Cancel wins: a run is ended before anything below it is touched. A parent waiting on a child is
ended first (its fence checked, so a parent that moved in the meantime is read again), and only then
is the child cancelled: the child's end finds its parent finished and queues no replay of it, so no
node of the tree runs again to catch the cancellation, and every run records the caller's reason and
responder. A run moves between the read and the write, so each pass reads the run again and makes
one transition: a waiting run's interrupt is cancelled (no job replays its node), and a queued,
running or child-waiting run ends.

The runs below a run (the child it waited on, the child that raced its interrupt, the children of
its fan-out not yet ended, and the same of each down its tree) are read after its fence, whatever
its status: a fan-out's parent is queued or running between two children as often as it waits on
them. Those whose parent ends and that are queued, running or waiting on runs below them end in the
same step as the run (a child started since the read moves a fence or is not named, and that step
is refused and read again), so no run of the tree begins or commits a node once the run has ended;
then each run below is cancelled the same way (a question it waits on, the runs below that). Each
step is atomic, the cascade is not: a cancel cut short between a parent's end and its children's (a
crash) leaves those waiting on an interrupt open, and cancelling the parent again
(``already_resolved``) cancels them.
"""

from __future__ import annotations

from collections.abc import Callable

from .errors import ParkwayError, RunNotFound, StaleFence
from .protocol import CancelOutcome, CancelResult, ResumeOutcome, RunStatus
from .store import Answer, RunRecord, Store

PASSES = 10
"""how many times a run that keeps moving is read again before cancelling gives up"""


def cancel_run(
    store: Store, run_id: str, reason: str | None, responder: str | None, clock: Callable[[], int]
) -> CancelResult:
    """End ``run_id`` cancelled (and every run below it); see ``Parkway.cancel``."""
    for _ in range(PASSES):
        record = store.get_run(run_id, clock())
        if record is None:
            raise RunNotFound(f"no run {run_id!r}", run_id=run_id)
        if record.status.finished:
            if record.status is RunStatus.CANCELLED:  # a cancel cut short after this run ended: finish below
                for child, parent in store.runs_below(run_id):
                    if parent == run_id:
                        _cancel_below(store, child, reason, responder, clock)
            return CancelResult(outcome=CancelOutcome.ALREADY_RESOLVED, run_id=run_id, status=record.status)
        waiting = record.waiting_on if record.status is RunStatus.WAITING else None
        if waiting and not waiting.startswith("child:") and waiting not in ("session", "children"):
            if _cancel_interrupt(store, record, waiting, reason, responder, clock) is not ResumeOutcome.EXPIRED:
                continue
            # past its deadline, the policy not applied yet: the run still waits, and ends below
        below = store.runs_below(run_id)  # after the fence read: a child started since moves it
        try:
            store.finish(
                run_id, record.fence, "cancelled", None,
                ("run.cancelled", {"reason": reason, "responder": responder}), clock(), below,
            )
        except StaleFence:
            continue
        for child, parent in below:
            if parent == run_id:
                _cancel_below(store, child, reason, responder, clock)
        return CancelResult(outcome=CancelOutcome.CANCELLED, run_id=run_id, status=RunStatus.CANCELLED)
    raise ParkwayError(f"run {run_id} kept changing while being cancelled; try again", run_id=run_id)


def _cancel_below(
    store: Store, run_id: str, reason: str | None, responder: str | None, clock: Callable[[], int]
) -> None:
    """Cancel a run below one just ended; one that ended meanwhile, or is gone, is left alone."""
    try:
        cancel_run(store, run_id, reason, responder, clock)
    except RunNotFound:
        pass


def _cancel_interrupt(
    store: Store, record: RunRecord, request_id: str, reason: str | None, responder: str | None,
    clock: Callable[[], int],
) -> ResumeOutcome | None:
    """Cancel the interrupt the run waits on, with no job to replay the node (the next pass ends
    the run); None when the run holds no record of it."""
    interrupt = store.get_interrupt(record.run_id, request_id)
    if interrupt is None:
        return None
    event = {"requestId": interrupt.request_id, "node": interrupt.node, "responder": responder, "reason": reason}
    answer = Answer(interrupt, interrupt.token_hash, None, interrupt.cancellation(reason), event, clock(), False)
    return store.resume(record.run_id, answer).outcome
