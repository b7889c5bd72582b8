"""A run's status never flickers through a finished one: between its interrupt's deadline and the
reconciler's pass a run reads ``waiting`` (its interrupt's expiry in the past), and only a run that
really ends expired reads ``expired`` (issue 25, defect 3)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from parkway import RunStatus
from parkway.runtime.clock import now_ms
from parkway.workers.reconciler import reconcile_once
from tests import flows_life
from tests.conftest import Harness

ESCALATE = {"escalate": {"to": "team:later", "ttl_ms": 60_000}}


class Poll:
    """Reads the run's status every 20 ms on a thread of its own, until stopped."""

    def __init__(self, harness: Harness, run_id: str) -> None:
        self.harness, self.run_id, self.seen = harness, run_id, [RunStatus.WAITING]
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._poll)
        self.thread.start()

    def _poll(self) -> None:
        while not self.done.wait(0.02):
            status = self.harness.pw.get_run(self.run_id).status
            if status is not self.seen[-1]:
                self.seen.append(status)

    def stop(self) -> list[RunStatus]:
        self.done.set()
        self.thread.join()
        return self.seen


@pytest.mark.parametrize(
    ("policy", "end"),
    [
        ("fail", RunStatus.FAILED),
        ("cancel", RunStatus.COMPLETED),
        ({"answer": "blue"}, RunStatus.COMPLETED),
        (ESCALATE, RunStatus.WAITING),
        ("timer", RunStatus.COMPLETED),
        ("expire", RunStatus.EXPIRED),
    ],
    ids=["fail", "cancel", "answer", "escalate", "use_first-timer", "expire"],
)
def test_a_status_read_every_20_ms_around_a_deadline_never_passes_through_a_finished_one(
    harness: Harness, policy: Any, end: RunStatus
) -> None:
    """Read every 20 ms from before the deadline to after the policy: the run reads waiting (its
    interrupt's expiry in the past) until the reconciler applies the policy, then moves on; no
    finished status is ever read and then left, and expired is read only by a run that ends so."""
    run_id = harness.start_and_run(flows_life.expiring_policy, {"policy": policy})
    deadline = harness.interrupt_event(run_id)["expiresAt"]
    poll = Poll(harness, run_id)
    try:
        time.sleep(max(0.0, deadline / 1000 - time.time()) + 0.2)
        late = harness.pw.get_run(run_id)
        if late.status is RunStatus.WAITING and policy != ESCALATE:  # (an embedded worker's reconciler
            assert late.interrupt is not None and late.interrupt.expires_at <= now_ms()  # may be first)
        reconcile_once(harness.pw.store, harness.pw.backend.dispatcher)
        harness.run_jobs()
        settle = time.time() + 10
        while (run := harness.pw.get_run(run_id)).status is not end:
            assert time.time() < settle, run
            time.sleep(0.02)
            harness.run_jobs()
        time.sleep(0.1)  # a few more reads after the end
    finally:
        seen = poll.stop()
    finished = [s for s in seen if s.finished]
    assert finished in ([], [end]) and (not finished or seen[-1] is end), seen
    assert seen[-1] is end, seen
