"""The notification stream: each transition that raises, escalates, expires, cancels or answers an
interrupt writes its notification in its own atomic step, only while the deployment has channels."""

from __future__ import annotations

import time
from typing import Any

from parkway.adapters.redis import keys
from parkway.channels.delivery import notice_of
from parkway.workers.reconciler import reconcile_once
from tests import flows, flows_escalate
from tests.conftest import Harness

ONE_STEP = {"escalate": {"to": ["team:leads"], "ttl_ms": 1000, "then": "expire"}}


def _notices(harness: Harness) -> list[Any]:
    client = harness.pw.store.client  # type: ignore[attr-defined]
    return [notice_of(i, f) for i, f in client.xrange(keys.notices())]


def _past_deadline(harness: Harness, run_id: str) -> None:
    expires = harness.pw.get_run(run_id).expires_at
    assert expires is not None
    time.sleep(max(0.0, expires / 1000 - time.time()) + 0.05)
    reconcile_once(harness.pw.store, harness.pw.backend.dispatcher)


def test_without_channels_a_pause_and_its_answer_write_no_notification(harness: Harness) -> None:
    """With no pw:notify (no worker with channels), the pause and the answer write nothing to pw:notices."""
    run_id = harness.start_and_run(flows.one_choice, {})
    assert harness.pw.resume(harness.token(run_id), selected="red").accepted
    assert harness.pw.store.client.exists(keys.notices()) == 0  # type: ignore[attr-defined]


def test_a_pause_its_escalation_and_its_expiry_each_write_a_notification_of_their_own(harness: Harness) -> None:
    """raised, escalated (to the next audience), expired: one entry each, in order, with the request, the
    run and the workflow, each with an id of its own."""
    harness.pw.store.client.set(keys.notify_on(), 1)  # type: ignore[attr-defined]
    run_id = harness.start_and_run(flows_escalate.escalating, {"audience": "team:ops", "policy": ONE_STEP})
    _past_deadline(harness, run_id)
    _past_deadline(harness, run_id)
    got = _notices(harness)
    assert [n.kind for n in got] == ["raised", "escalated", "expired"]
    assert {(n.run_id, n.workflow) for n in got} == {(run_id, "escalating")}
    assert len({n.request_id for n in got}) == 1 and len({n.event_id for n in got}) == 3
    assert got[1].expires_at > got[0].expires_at and got[2].expires_at == got[1].expires_at


def test_an_answer_and_a_cancellation_write_their_notification(harness: Harness) -> None:
    """An accepted answer writes `answered`; a cancelled interrupt `cancelled`; a refused answer nothing."""
    harness.pw.store.client.set(keys.notify_on(), 1)  # type: ignore[attr-defined]
    answered = harness.start_and_run(flows.one_choice, {})
    token = harness.token(answered)
    assert harness.pw.resume(token, selected="red").accepted
    assert not harness.pw.resume(token, selected="blue").accepted
    cancelled = harness.start_and_run(flows_escalate.escalating, {})
    harness.pw.cancel_interrupt(harness.token(cancelled))
    got = [(n.kind, n.run_id) for n in _notices(harness)]
    assert got == [("raised", answered), ("answered", answered), ("raised", cancelled), ("cancelled", cancelled)]
