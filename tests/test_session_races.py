"""An accepted answer reaches the code that asked, whatever races it (issue 19, defects 1 and 2).

Each test races real client threads on one session (embedded and on a real Redis) and then checks
that the end state is one a serial order of the same calls could reach."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from parkway import Caller, RunStatus
from parkway.adapters.redis.store.store import RedisStore, ScriptCall
from tests import session_flows as sf
from tests.conftest import Harness, all_at_once

ADA = Caller("user", "ada", "acme")
TRIALS = 12


def _two_branches(h: Harness) -> tuple[str, Any, Any, str]:
    """A session whose first branch is parked on its run's question and abandoned for a sibling
    (the head), which parks on its own: (session, first, sibling, first's interrupt id)."""
    sid = h.pw.sessions.open(sf.asking, owner="ada", tenant="acme")
    one = h.pw.sessions.send(sid, "one", caller=ADA)
    h.run_jobs()
    [asked] = h.pw.sessions.get(sid).open_interrupts
    two = h.pw.sessions.edit(sid, one.message_id, "two", caller=ADA)
    h.run_jobs()
    return sid, one, two, asked.id


def _race(*calls: Any) -> list[Any]:
    """Run the calls from threads released together; their results (or exceptions), in call order."""
    barrier = threading.Barrier(len(calls))
    out: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        try:
            out[i] = calls[i]()
        except Exception as exc:  # reported by the caller's assertions
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


@contextmanager
def _slow_script(h: Harness, name: str, seconds: float) -> Iterator[None]:
    """Every call of the script ``name`` reaches Redis ``seconds`` late (a slow link), so that
    whatever the client read before it can be overtaken by a racing call."""
    store = h.pw.store
    assert isinstance(store, RedisStore)

    def around(call: ScriptCall, run: Callable[[], Any]) -> Any:
        if call.name == name:
            time.sleep(seconds)
        return run()

    with store.around_scripts(around):
        yield


def _resume(h: Harness, sid: str, iid: str, payload: str) -> Callable[[], Any]:
    return lambda: h.pw.sessions.resume_interrupt(sid, iid, payload, caller=ADA)


def _switch(h: Harness, sid: str, head: str) -> Callable[[], Any]:
    return lambda: h.pw.sessions.switch(sid, head, caller=ADA)


@pytest.mark.parametrize("link", ["fast", "slow switch"])
def test_a_resume_racing_a_switch_back_to_its_branch_is_delivered_once(harness: Harness, link: str) -> None:
    """Whichever comes first, the answer given while the branch was abandoned reaches its run once
    the branch is active, and a second answer to the same interrupt is refused (before the fix: a
    resume landing between the switch's read and its move was kept and never delivered, and a
    second resume was accepted with another payload)."""
    for trial in range(TRIALS if link == "fast" else 3):
        sid, one, _, iid = _two_branches(harness)
        with _slow_script(harness, "session_switch", 0.2 if link != "fast" else 0):
            cleared, _ = _race(_resume(harness, sid, iid, f"ACC-{trial}"), _switch(harness, sid, one.message_id))
        assert not isinstance(cleared, Exception), cleared
        assert cleared.outcome in ("cleared", "resumed"), cleared
        again = harness.pw.sessions.resume_interrupt(sid, iid, "OTHER", caller=ADA)
        assert again.outcome == "already_cleared", (trial, cleared, again)
        harness.run_jobs()
        assert harness.pw.get_run(one.run_id).status is RunStatus.COMPLETED, (trial, cleared)
        view = harness.pw.sessions.get(sid)
        assert view.messages[view.head].content == f"account ACC-{trial}"
        assert iid not in {i.id for i in view.open_interrupts}


def test_a_resume_racing_a_switch_away_from_its_branch_is_delivered_or_kept(harness: Harness) -> None:
    """A resume racing a switch away from the branch either reaches the run at once or is kept, and
    the switch back delivers what was kept: the run ends with that answer either way."""
    for trial in range(TRIALS):
        sid, one, two, iid = _two_branches(harness)
        harness.pw.sessions.switch(sid, one.message_id, caller=ADA)
        cleared, _ = _race(_resume(harness, sid, iid, f"ACC-{trial}"), _switch(harness, sid, two.message_id))
        assert not isinstance(cleared, Exception), cleared
        assert cleared.outcome in ("cleared", "resumed"), cleared
        harness.pw.sessions.switch(sid, one.message_id, caller=ADA)
        harness.run_jobs()
        assert harness.pw.get_run(one.run_id).status is RunStatus.COMPLETED, (trial, cleared)
        assert harness.pw.sessions.resume_interrupt(sid, iid, "OTHER", caller=ADA).outcome == "already_cleared"


def _all_resume(h: Harness, sid: str, iid: str, n: int = 20) -> list[tuple[int, Any]]:
    """n resumes of ``iid`` at once, the i-th answering ``ACC-<i>``: (i, its outcome) each."""
    return all_at_once(lambda i: (i, h.pw.sessions.resume_interrupt(sid, iid, f"ACC-{i}", caller=ADA)), n)


@pytest.mark.parametrize("via", ["name", "request id"])
def test_duplicate_resumes_of_one_interrupt_accept_one_and_call_the_rest_already_cleared(
    harness: Harness, via: str
) -> None:
    """Of 20 concurrent resumes of one interrupt exactly one is accepted; every other one reads
    already_cleared (never unknown, as losers that read between the answer and its clearing did),
    and the run gets the accepted answer."""
    for trial in range(4):
        sid = harness.pw.sessions.open(sf.asking, owner="ada", tenant="acme")
        sent = harness.pw.sessions.send(sid, "pay", caller=ADA)
        harness.run_jobs()
        [asked] = harness.pw.sessions.get(sid).open_interrupts
        iid = asked.id if via == "name" else harness.pw.list_interrupts(run_id=sent.run_id).items[0].request_id
        results = _all_resume(harness, sid, iid)
        outcomes = sorted(r.outcome for _, r in results)
        assert outcomes == ["already_cleared"] * 19 + ["resumed"], (trial, " ".join(outcomes))
        harness.run_jobs()
        [winner] = [i for i, r in results if r.outcome == "resumed"]
        view = harness.pw.sessions.get(sid)
        assert view.messages[view.head].content == f"account ACC-{winner}"


def test_a_kept_answer_spends_the_runs_token(harness: Harness) -> None:
    """An answer kept for an abandoned branch is the answer: the run's token, used directly, is
    refused (already resolved), and the switch back delivers the kept one."""
    from parkway import ResumeOutcome

    sid, one, _, iid = _two_branches(harness)
    token = harness.pw.list_interrupts(run_id=one.run_id, include_tokens=True).items[0].resume_token
    assert token is not None
    assert harness.pw.sessions.resume_interrupt(sid, iid, "KEPT", caller=ADA).outcome == "cleared"
    assert harness.pw.resume(token, value="BY-TOKEN").outcome is ResumeOutcome.ALREADY_RESOLVED
    harness.pw.sessions.switch(sid, one.message_id, caller=ADA)
    harness.run_jobs()
    assert harness.pw.get_run(one.run_id).status is RunStatus.COMPLETED
    view = harness.pw.sessions.get(sid)
    assert view.messages[view.head].content == "account KEPT"
