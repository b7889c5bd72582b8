"""Cleared interrupts' triggers reach the branch's policy and node code (issue 19, defects 3 and 4).

When interrupts raised by callers park a branch and are cleared, each one's ``interrupt.resumed``
trigger (with its payload) is delivered, in clearing order, once nothing parks the branch any more:
to the run held there, or the run at the head, or a run dispatched for them. The policy sees each
once (``decide``), and node code reads them with ``use_triggers``, the same on every replay."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from parkway import Caller, RunStatus
from tests import session_flows as sf
from tests.conftest import Harness

ADA = Caller("user", "ada", "acme")


@pytest.fixture(autouse=True)
def _seen() -> None:
    sf.triggers_seen.clear()


def _stack_two(h: Harness, sid: str) -> tuple[str, str, Any]:
    """Raise int-1 and int-2 at the head, clear int-1 (still parked) then int-2: their ids, and
    the second clearing's outcome."""
    one = h.pw.sessions.raise_interrupt(sid, "first check", interrupt_id="int-1", scope="branch")
    two = h.pw.sessions.raise_interrupt(sid, "second check", interrupt_id="int-2", scope="branch")
    first = h.pw.sessions.resume_interrupt(sid, one, {"n": 1})
    assert (first.outcome, first.parked_by) == ("still_parked", (two,))
    return one, two, h.pw.sessions.resume_interrupt(sid, two, {"n": 2})


def _finish(h: Harness, sid: str) -> str:
    """Confirm the run's question; the head's content once the run ends."""
    h.run_jobs()
    confirm = h.pw.sessions.get(sid).open_interrupts
    assert [i.reason for i in confirm] == ["Go on?"]
    assert h.pw.sessions.resume_interrupt(sid, confirm[0].id, "yes", caller=ADA).outcome == "resumed"
    h.run_jobs()
    view = h.pw.sessions.get(sid)
    return view.messages[view.head].content


EXPECTED = "triggers int-1={'n': 1}, int-2={'n': 2} (yes)"


def test_stacked_interrupts_deliver_each_trigger_in_clearing_order_to_a_dispatched_run(harness: Harness) -> None:
    """No run is live at the head: the run dispatched when the last interrupt clears gets both
    triggers (before the fix: only the last one's; the first one's payload was never delivered)."""
    sid = harness.pw.sessions.open(sf.triggered, owner="ada", tenant="acme")
    harness.pw.sessions.send(sid, "hi", caller=ADA)
    harness.run_jobs()
    _, _, last = _stack_two(harness, sid)
    assert last.outcome == "dispatched"
    assert _finish(harness, sid) == EXPECTED
    assert [(t["interrupt_id"], t["payload"]) for t in sf.triggers_seen] == [("int-1", {"n": 1}), ("int-2", {"n": 2})]


@pytest.fixture
def raiser(harness: Harness) -> Iterator[None]:
    """The self-parking tool raises its interrupts with the harness's client."""
    sf.raiser["pw"] = harness.pw
    sf.follow_ons.clear()
    yield
    sf.raiser.clear()


def test_a_held_run_woken_by_caller_raised_interrupts_gets_their_triggers_in_decide_and_node_code(
    harness: Harness, raiser: None
) -> None:
    """A run held on its branch, parked by two caller-raised interrupts during its tool call, and
    woken when the last one clears: decide() is shown each interrupt.resumed with its payload,
    once, in clearing order, and use_triggers() returns both, also on the replay after the run's
    own question is answered (before the fix: the payloads went only to the run's stream)."""
    sid = harness.pw.sessions.open(sf.self_parking, owner="ada", tenant="acme")
    sent = harness.pw.sessions.send(sid, "branch:int-1,int-2", caller=ADA)
    harness.run_jobs()
    assert harness.pw.get_run(sent.run_id).status is RunStatus.WAITING  # held
    assert sf.follow_ons == []
    first = harness.pw.sessions.resume_interrupt(sid, "int-1", {"n": 1})
    assert first.outcome == "still_parked"
    last = harness.pw.sessions.resume_interrupt(sid, "int-2", {"n": 2})
    assert (last.outcome, last.run_id) == ("resumed", sent.run_id)
    assert _finish(harness, sid) == EXPECTED
    assert [(t["interrupt_id"], t["payload"]) for t in sf.triggers_seen] == [("int-1", {"n": 1}), ("int-2", {"n": 2})]


def test_a_run_queued_at_the_head_reads_the_triggers_delivered_before_its_first_attempt(harness: Harness) -> None:
    """Interrupts raised and cleared while the head's run is queued, before any attempt: their
    triggers go into its journal, and its first attempt reads them (a run's first attempt skips the
    journal read only while nothing was delivered into it: session_clear drops `fresh`)."""
    if harness.kind == "embedded":
        pytest.skip("the embedded worker may begin the run first: on Redis no worker runs before run_jobs")
    sid = harness.pw.sessions.open(sf.triggered, owner="ada", tenant="acme")
    sent = harness.pw.sessions.send(sid, "hi", caller=ADA)  # queued: no attempt yet
    _, _, last = _stack_two(harness, sid)
    assert (last.outcome, last.run_id) == ("resumed", sent.run_id)
    assert _finish(harness, sid) == EXPECTED
    assert [(t["interrupt_id"], t["payload"]) for t in sf.triggers_seen] == [("int-1", {"n": 1}), ("int-2", {"n": 2})]
