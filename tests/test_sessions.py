"""Sessions: a tree of messages whose branches park on their own (issue 10).

Every behaviour runs embedded and on a real Redis with parkway's worker (the harness); what needs
work in flight while a branch parks runs a real `parkway worker` process."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import pytest

from parkway import Caller, ResumeOutcome, RunStatus, ValidationError
from parkway.adapters.redis import layout
from parkway.errors import BranchBusy, BranchParked, SessionDenied
from parkway.runtime.clock import now_ms
from parkway.runtime.policy import parse_actions
from parkway.sessions.rules import rebuild
from tests import session_flows as sf
from tests.conftest import SECRET, Harness
from tests.procs import Worker, wait_for

ADA = Caller("user", "ada", "acme")
BOB = Caller("user", "bob", "acme")
EVE = Caller("user", "ada", "other")
MACHINE = Caller("machine", tenant="acme")
FOREIGN_MACHINE = Caller("machine", tenant="other")
SYSTEM = Caller("system")


def _open(h: Harness, agent: Any) -> str:
    return h.pw.sessions.open(agent, owner="ada", tenant="acme")


def _messages(h: Harness, sid: str) -> dict[str, Any]:
    return h.pw.sessions.get(sid).messages


def test_a_message_dispatches_the_agent_and_its_reply_becomes_the_head(harness: Harness) -> None:
    sid = _open(harness, sf.echo)
    sent = harness.pw.sessions.send(sid, "hello", caller=ADA)
    harness.run_jobs()
    view = harness.pw.sessions.get(sid, caller=ADA)
    reply = view.messages[view.head]
    assert (reply.role, reply.content, reply.parent) == ("assistant", "you said hello", sent.message_id)
    assert harness.pw.get_run(sent.run_id).status is RunStatus.COMPLETED
    again = harness.pw.sessions.send(sid, "again", caller=ADA)
    assert view.messages[view.head].id == harness.pw.sessions.get(sid).messages[again.message_id].parent


def test_a_parked_branch_refuses_messages_while_a_sibling_runs_and_switching_back_reparks(harness: Harness) -> None:
    sid = _open(harness, sf.asking)
    first = harness.pw.sessions.send(sid, "pay the invoice", caller=ADA)
    harness.run_jobs()
    view = harness.pw.sessions.get(sid)
    assert [i.anchor for i in view.open_interrupts] == [first.message_id]
    before = len(view.messages)
    with pytest.raises(BranchParked) as refused:
        harness.pw.sessions.send(sid, "hello?", caller=ADA)
    assert refused.value.interrupts == (view.open_interrupts[0].id,)
    assert len(_messages(harness, sid)) == before  # nothing written
    # an edit branches off above the anchor: its run goes on (here: to its own question)
    sibling = harness.pw.sessions.edit(sid, first.message_id, "pay it tomorrow", caller=ADA)
    harness.run_jobs()
    view = harness.pw.sessions.get(sid)
    assert view.head == sibling.message_id and len(view.open_interrupts) == 2
    assert harness.pw.get_run(sibling.run_id).status is RunStatus.WAITING
    # back on the first branch: still parked, its interrupt still there to answer
    harness.pw.sessions.switch(sid, first.message_id, caller=ADA)
    with pytest.raises(BranchParked):
        harness.pw.sessions.send(sid, "hello?", caller=ADA)
    first_interrupt = next(i for i in view.open_interrupts if i.anchor == first.message_id)
    cleared = harness.pw.sessions.resume_interrupt(sid, first_interrupt.id, "ACC-1", caller=ADA)
    assert cleared.outcome == "resumed" and cleared.run_id == first.run_id
    harness.run_jobs()
    view = harness.pw.sessions.get(sid)
    assert view.messages[view.head].content == "account ACC-1"
    assert harness.pw.get_run(sibling.run_id).status is RunStatus.WAITING  # the other branch still waits


@pytest.mark.parametrize("order", ["first-then-second", "second-then-first"])
def test_two_interrupts_on_two_branches_resume_in_either_order(harness: Harness, order: str) -> None:
    sid = _open(harness, sf.asking)
    one = harness.pw.sessions.send(sid, "one", caller=ADA)
    two = harness.pw.sessions.edit(sid, one.message_id, "two", caller=ADA)
    harness.run_jobs()
    by_anchor = {i.anchor: i.id for i in harness.pw.sessions.get(sid).open_interrupts}
    sequence = [one, two] if order == "first-then-second" else [two, one]
    for sent in sequence:
        harness.pw.sessions.switch(sid, sent.message_id, caller=ADA)
        outcome = harness.pw.sessions.resume_interrupt(sid, by_anchor[sent.message_id], sent.message_id, caller=ADA)
        assert outcome.outcome == "resumed"
        harness.run_jobs()
        assert harness.pw.get_run(sent.run_id).status is RunStatus.COMPLETED
    view = harness.pw.sessions.get(sid)
    assert not view.open_interrupts
    replies = sorted(m.content for m in view.messages.values() if m.role == "assistant")
    assert replies == sorted(f"account {s.message_id}" for s in (one, two))


def test_a_branch_parked_twice_stays_parked_until_both_are_cleared(harness: Harness) -> None:
    sid = _open(harness, sf.asking)
    sent = harness.pw.sessions.send(sid, "pay", caller=ADA)
    harness.run_jobs()
    asked = harness.pw.sessions.get(sid).open_interrupts[0].id
    audit = harness.pw.sessions.raise_interrupt(sid, "audit first", caller=MACHINE)  # same anchor
    first = harness.pw.sessions.resume_interrupt(sid, asked, "ACC-7", caller=ADA)
    assert (first.outcome, first.parked_by) == ("still_parked", (audit,))
    harness.run_jobs()  # the run takes the answer, and is held before its follow-on
    assert harness.pw.get_run(sent.run_id).status is RunStatus.WAITING
    assert len(_messages(harness, sid)) == 1
    with pytest.raises(BranchParked):
        harness.pw.sessions.send(sid, "hello?", caller=ADA)
    assert harness.pw.sessions.resume_interrupt(sid, audit, "ok", caller=MACHINE).outcome == "resumed"
    harness.run_jobs()
    view = harness.pw.sessions.get(sid)
    assert view.messages[view.head].content == "account ACC-7"


def test_clearing_an_interrupt_of_an_abandoned_branch_delivers_nothing_until_switched_back(harness: Harness) -> None:
    sid = _open(harness, sf.asking)
    one = harness.pw.sessions.send(sid, "one", caller=ADA)
    harness.run_jobs()
    iid = harness.pw.sessions.get(sid).open_interrupts[0].id
    harness.pw.sessions.edit(sid, one.message_id, "two", caller=ADA)  # the user walks away
    cleared = harness.pw.sessions.resume_interrupt(sid, iid, "X", caller=ADA)
    assert cleared.outcome == "cleared"
    harness.run_jobs()
    assert harness.pw.get_run(one.run_id).status is RunStatus.WAITING  # nothing delivered
    assert harness.pw.sessions.resume_interrupt(sid, iid, "Y", caller=ADA).outcome == "already_cleared"
    harness.pw.sessions.switch(sid, one.message_id, caller=ADA)  # back: the kept answer is delivered
    harness.run_jobs()
    view = harness.pw.sessions.get(sid)
    assert harness.pw.get_run(one.run_id).status is RunStatus.COMPLETED
    assert any(m.content == "account X" for m in view.messages.values())


def test_a_global_interrupt_parks_every_branch_until_a_system_caller_clears_it(harness: Harness) -> None:
    sid = _open(harness, sf.echo)
    first = harness.pw.sessions.send(sid, "hi", caller=ADA)
    harness.run_jobs()
    iid = harness.pw.sessions.raise_interrupt(sid, "budget exhausted", {"spent": 10}, caller=SYSTEM, scope="session")
    with pytest.raises(BranchParked):
        harness.pw.sessions.send(sid, "more", caller=ADA)
    with pytest.raises(BranchParked):
        harness.pw.sessions.edit(sid, first.message_id, "other", caller=ADA)
    with pytest.raises(SessionDenied):
        harness.pw.sessions.resume_interrupt(sid, iid, None, caller=ADA)  # a user cannot lift a system pause
    with pytest.raises(SessionDenied):  # session-wide: system and machine callers only
        harness.pw.sessions.raise_interrupt(sid, "stop", caller=ADA, scope="session")
    cleared = harness.pw.sessions.resume_interrupt(sid, iid, {"topped_up": True}, caller=SYSTEM)
    assert cleared.outcome == "dispatched"  # no run was live at the head: the agent gets the trigger
    harness.run_jobs()
    view = harness.pw.sessions.get(sid)
    assert view.messages[view.head].content == f"resumed {iid} with {{'topped_up': True}}"
    harness.pw.sessions.send(sid, "more", caller=ADA)  # the branch takes messages again


def test_an_interrupt_raised_before_any_message_is_global(harness: Harness) -> None:
    sid = _open(harness, sf.echo)
    iid = harness.pw.sessions.raise_interrupt(sid, "maintenance", caller=MACHINE)
    assert harness.pw.sessions.get(sid).open_interrupts[0].anchor == ""
    with pytest.raises(BranchParked):
        harness.pw.sessions.send(sid, "hi", caller=ADA)
    assert harness.pw.sessions.resume_interrupt(sid, iid, caller=MACHINE).outcome == "cleared"
    harness.pw.sessions.send(sid, "hi", caller=ADA)


@pytest.mark.parametrize("approved", [True, False])
def test_the_send_email_approval(harness: Harness, approved: bool) -> None:
    sid = _open(harness, sf.mail)
    sent = harness.pw.sessions.send(sid, "mail bob", caller=ADA)
    harness.run_jobs()
    [pending] = harness.pw.sessions.get(sid).open_interrupts
    assert (pending.reason, pending.payload, pending.anchor) == (
        "confirm",
        {"message": "Send the email?"},
        sent.message_id,
    )
    listed = harness.pw.list_interrupts(run_id=sent.run_id).items[0]
    assert listed.request.meta["session"] == sid and listed.request.meta["anchor"] == sent.message_id
    with pytest.raises(BranchParked):
        harness.pw.sessions.send(sid, "and?", caller=ADA)
    with pytest.raises(SessionDenied):
        harness.pw.sessions.resume_interrupt(sid, pending.id, {"approved": True}, caller=BOB)
    result = harness.pw.sessions.resume(
        sid, {"type": "interrupt.resume", "interrupt_id": pending.id, "payload": {"approved": approved}}, caller=ADA
    )
    assert result.outcome == "resumed"
    harness.run_jobs()
    view = harness.pw.sessions.get(sid)
    expected = "done: sent" if approved else "not sent: tool 'send_email' failed: declined"
    assert view.messages[view.head].content == expected
    tool_messages = [m for m in view.messages.values() if m.role == "tool"]
    assert len(tool_messages) == 1
    again = harness.pw.sessions.resume_interrupt(sid, pending.id, {"approved": True}, caller=ADA)
    assert again.outcome == "already_cleared"  # a duplicate: no second delivery


def test_a_session_interrupt_still_answers_to_its_token(harness: Harness) -> None:
    sid = _open(harness, sf.mail)
    sent = harness.pw.sessions.send(sid, "mail bob", caller=ADA)
    harness.run_jobs()
    token = harness.token(sent.run_id)
    assert harness.pw.resume(token, value={"approved": True}).outcome is ResumeOutcome.ACCEPTED
    harness.run_jobs()
    view = harness.pw.sessions.get(sid)
    assert view.messages[view.head].content == "done: sent"
    assert not view.open_interrupts


def test_a_deferred_tool_waits_on_its_call_not_the_session(harness: Harness) -> None:
    sid = _open(harness, sf.deferred)
    sent = harness.pw.sessions.send(sid, "weather", caller=ADA)
    harness.run_jobs()
    assert harness.pw.sessions.get(sid).open_interrupts == []  # nothing parks the branch
    with pytest.raises(BranchBusy):
        harness.pw.sessions.send(sid, "hurry", caller=ADA)  # its run is still live
    assert harness.pw.sessions.answer_tool(sid, "nope", 1).outcome is ResumeOutcome.UNKNOWN
    assert harness.pw.sessions.answer_tool(sid, "lk", {"temp": 21}, caller=ADA).accepted
    harness.run_jobs()
    view = harness.pw.sessions.get(sid)
    assert view.messages[view.head].content == "found {'temp': 21}"
    assert harness.pw.get_run(sent.run_id).status is RunStatus.COMPLETED


def test_stale_unknown_and_duplicate_ids_are_noops(harness: Harness) -> None:
    sid = _open(harness, sf.echo)
    harness.pw.sessions.send(sid, "hi", caller=ADA)
    harness.run_jobs()
    assert harness.pw.sessions.resume_interrupt(sid, "never-raised", 1).outcome == "unknown"
    iid = harness.pw.sessions.raise_interrupt(sid, "check", caller=ADA)
    first = harness.pw.sessions.resume_interrupt(sid, iid, 1, caller=ADA)
    assert first.outcome in ("resumed", "dispatched")
    assert harness.pw.sessions.resume_interrupt(sid, iid, 2, caller=ADA).outcome == "already_cleared"
    harness.run_jobs()
    runs = [e for e in harness.pw.sessions.events(sid) if e.type == "run.dispatched"]
    assert len(runs) == 2  # the message's run and one for the trigger: the duplicate delivered nothing


ALLOWED = {  # (origin of the raise, caller clearing) -> allowed
    ("system", "system"): True,
    ("system", "machine"): False,
    ("system", "ada"): False,
    ("machine", "system"): True,
    ("machine", "machine"): True,
    ("machine", "ada"): False,
    ("frontend", "system"): True,
    ("frontend", "machine"): True,
    ("frontend", "ada"): True,
    ("frontend", "bob"): False,
    ("frontend", "eve"): False,
    ("frontend", "foreign-machine"): False,
    ("machine", "foreign-machine"): False,
}
CALLERS = {"system": SYSTEM, "machine": MACHINE, "ada": ADA, "bob": BOB, "eve": EVE, "foreign-machine": FOREIGN_MACHINE}
RAISERS = {"system": SYSTEM, "machine": MACHINE, "frontend": ADA}


@pytest.mark.parametrize(("origin", "caller"), sorted(ALLOWED))
def test_who_may_clear_an_interrupt(harness: Harness, origin: str, caller: str) -> None:
    sid = _open(harness, sf.echo)
    iid = harness.pw.sessions.raise_interrupt(sid, "check", caller=RAISERS[origin])
    record = next(i for i in harness.pw.sessions.get(sid).interrupts if i.id == iid)
    assert record.origin == origin  # from the caller, never from a payload
    if ALLOWED[(origin, caller)]:
        assert harness.pw.sessions.resume_interrupt(sid, iid, caller=CALLERS[caller]).outcome == "cleared"
        cleared = next(i for i in harness.pw.sessions.get(sid).interrupts if i.id == iid)
        assert cleared.cleared_by == CALLERS[caller].public()  # the audit
    else:
        with pytest.raises(SessionDenied):
            harness.pw.sessions.resume_interrupt(sid, iid, caller=CALLERS[caller])
        assert [i.id for i in harness.pw.sessions.get(sid).open_interrupts] == [iid]


def test_other_tenants_and_owners_cannot_read_or_write_a_session(harness: Harness) -> None:
    sid = _open(harness, sf.echo)
    for caller in (BOB, EVE, FOREIGN_MACHINE):
        with pytest.raises(SessionDenied):
            harness.pw.sessions.get(sid, caller=caller)
        with pytest.raises(SessionDenied):
            harness.pw.sessions.send(sid, "hi", caller=caller)
    with pytest.raises(SessionDenied):
        harness.pw.sessions.open(sf.echo, owner="ada", tenant="acme", caller=BOB)


def test_policy_actions_are_checked() -> None:
    with pytest.raises(ValidationError, match="reason"):
        parse_actions({"actions": [{"type": "interrupt", "payload": {}}]})
    with pytest.raises(ValidationError):
        parse_actions('{"actions": [{"type": "launch"}]}')
    assert parse_actions('{"actions": [{"type": "interrupt", "reason": "confirm"}]}')[0]["reason"] == "confirm"
    with pytest.raises(ValidationError):
        parse_actions("not json")


def _hold_dir() -> str:
    path = tempfile.mkdtemp(prefix="pw-session-")
    open(os.path.join(path, "hold"), "w").close()
    return path


def _count(path: str, name: str) -> int:
    try:
        with open(os.path.join(path, name)) as f:
            return len(f.read())
    except FileNotFoundError:
        return 0


@pytest.fixture
def live_harness(redis_client: Any, redis_url: str) -> Any:
    from parkway import Parkway, Settings

    settings = Settings(redis_url=redis_url, secret=SECRET)
    worker = Worker(redis_url, SECRET, "--workers", "2")  # two branches' calls in flight at once
    with Parkway(settings) as pw:
        yield pw
    worker.stop()


def test_a_tool_result_settling_while_parked_is_kept_and_its_follow_on_held_until_after_the_resume(
    live_harness: Any,
) -> None:
    pw = live_harness
    path = _hold_dir()
    sid = pw.sessions.open(sf.slow_tool_flow, owner="ada", tenant="acme")
    sent = pw.sessions.send(sid, path, caller=ADA)
    wait_for(lambda: _count(path, "tool-calls") == 1, 20, "the tool to start")
    iid = pw.sessions.raise_interrupt(sid, "hold on", caller=MACHINE)  # parks the branch mid-call
    os.remove(os.path.join(path, "hold"))
    wait_for(lambda: pw.get_run(sent.run_id).status is RunStatus.WAITING, 20, "the run to be held")
    view = pw.sessions.get(sid)
    assert [m.role for m in view.messages.values()].count("tool") == 1  # the result was recorded
    assert not any(m.content.startswith("after") for m in view.messages.values())  # its follow-on was not
    assert pw.sessions.resume_interrupt(sid, iid, "go", caller=MACHINE).outcome == "resumed"
    wait_for(lambda: pw.get_run(sent.run_id).status is RunStatus.COMPLETED, 20, "the run to finish")
    types = [e.type for e in pw.stream(sent.run_id, timeout=5)]
    assert types.index("run.held") < types.index("interrupt.resumed") < types.index("run.completed")
    view = pw.sessions.get(sid)
    assert view.messages[view.head].content == "after tool call 1"
    assert _count(path, "tool-calls") == 1  # the tool ran once


def test_a_model_call_in_flight_on_a_parked_branch_is_voided_and_replayed_after_the_resume(live_harness: Any) -> None:
    pw = live_harness
    path = _hold_dir()
    sid = pw.sessions.open(sf.slow_model, owner="ada", tenant="acme")
    first = pw.sessions.send(sid, path, caller=ADA)
    wait_for(lambda: _count(path, "model-calls") == 1, 20, "the first branch's model call")
    sibling = pw.sessions.edit(sid, first.message_id, path, caller=ADA)  # a branch whose call keeps going
    wait_for(lambda: _count(path, "model-calls") == 2, 20, "the sibling's model call")
    iid = pw.sessions.raise_interrupt(sid, "hold on", caller=ADA, anchor=first.message_id)
    os.remove(os.path.join(path, "hold"))
    wait_for(lambda: pw.get_run(first.run_id).status is RunStatus.WAITING, 20, "the first branch's run to be held")
    wait_for(lambda: pw.get_run(sibling.run_id).status is RunStatus.COMPLETED, 20, "the sibling to finish")
    view = pw.sessions.get(sid)
    assert view.children(first.message_id) == []  # the voided reply was never committed
    assert [view.messages[m].content for m in view.children(sibling.message_id)] == ["call 2"]
    pw.sessions.switch(sid, first.message_id, caller=ADA)
    assert pw.sessions.resume_interrupt(sid, iid, None, caller=ADA).outcome == "resumed"
    wait_for(lambda: pw.get_run(first.run_id).status is RunStatus.COMPLETED, 20, "the first branch's run to finish")
    view = pw.sessions.get(sid)
    assert view.messages[view.head].content == "call 3"  # the model was called again, after the resume
    assert _count(path, "model-calls") == 3
    types = [e.type for e in pw.stream(first.run_id, timeout=5)]
    assert types.index("run.held") < types.index("interrupt.resumed") < types.index("run.completed")


def test_a_session_rebuilds_from_its_events(harness: Harness) -> None:
    sid = _open(harness, sf.asking)
    one = harness.pw.sessions.send(sid, "one", caller=ADA)
    harness.run_jobs()
    harness.pw.sessions.edit(sid, one.message_id, "two", caller=ADA)
    iid = harness.pw.sessions.raise_interrupt(sid, "pause", caller=MACHINE)
    harness.pw.sessions.switch(sid, one.message_id, caller=ADA)
    _assert_rebuilds(harness, sid)
    harness.pw.sessions.resume_interrupt(sid, iid, caller=MACHINE)
    _assert_rebuilds(harness, sid)


def test_a_held_run_can_be_cancelled(live_harness: Any) -> None:
    pw = live_harness
    path = _hold_dir()
    sid = pw.sessions.open(sf.slow_tool_flow, owner="ada", tenant="acme")
    sent = pw.sessions.send(sid, path, caller=ADA)
    wait_for(lambda: _count(path, "tool-calls") == 1, 20, "the tool to start")
    pw.sessions.raise_interrupt(sid, "hold on", caller=MACHINE)
    os.remove(os.path.join(path, "hold"))
    wait_for(lambda: pw.get_run(sent.run_id).status is RunStatus.WAITING, 20, "the run to be held")
    assert pw.cancel(sent.run_id, reason="never mind").status is RunStatus.CANCELLED
    assert pw.get_run(sent.run_id).status is RunStatus.CANCELLED
    assert pw.sessions.get(sid).live_runs == {}


def _assert_rebuilds(h: Harness, sid: str) -> None:
    view = h.pw.sessions.get(sid)
    state = rebuild((e.type, e.data) for e in h.pw.sessions.events(sid))
    assert state.head == view.head
    assert state.parents == {m.id: m.parent for m in view.messages.values()}
    assert state.open == {i.id: i.anchor for i in view.open_interrupts if i.scope == "session"}


def _deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return {"a": value}


@pytest.mark.parametrize(
    "call",
    [
        lambda s, sid: s.send(sid + "\n", "hi"),
        lambda s, sid: s.send(sid, ""),
        lambda s, sid: s.send(sid, "x" * 100_001),
        lambda s, sid: s.edit(sid, "m_1\n", "hi"),
        lambda s, sid: s.switch(sid, "{m}"),
        lambda s, sid: s.raise_interrupt(sid, ""),
        lambda s, sid: s.raise_interrupt(sid, "why", interrupt_id="int_forged"),
        lambda s, sid: s.raise_interrupt(sid, "why", _deep(40)),
        lambda s, sid: s.resume_interrupt(sid, "x:y"),
        lambda s, sid: s.resume(sid, {"type": "interrupt.resume"}),
        lambda s, sid: s.resume(sid, '{"type": "interrupt.resume", "interrupt_id": "a b"}'),
        lambda s, sid: s.answer_tool(sid, "lk\n", 1),
        lambda s, sid: s.open(sf.echo, owner="ada\n", tenant="acme"),
        lambda s, sid: s.open(sf.echo, owner="ada", tenant="acme", session_id="a--b"),
        lambda s, sid: s.open(sf.echo, owner="ada", tenant="acme", session_id="s" * 47),
        lambda s, sid: s.open(sf.echo, owner="ada", tenant="acme", session_id=sid),  # taken
        lambda s, sid: s.open("os:system", owner="ada", tenant="acme"),
    ],
)
def test_bad_session_input_is_refused_with_nothing_written(harness: Harness, call: Any) -> None:
    from parkway import ParkwayError

    sid = _open(harness, sf.echo)
    before = harness.pw.sessions.events(sid)
    with pytest.raises(ParkwayError):
        call(harness.pw.sessions, sid)
    assert harness.pw.sessions.events(sid) == before


def test_an_unknown_session_is_not_found(harness: Harness) -> None:
    from parkway.errors import SessionNotFound

    for call in (lambda: harness.pw.sessions.get("nope"), lambda: harness.pw.sessions.send("nope", "hi"),
                 lambda: harness.pw.sessions.resume_interrupt("nope", "x")):
        with pytest.raises(SessionNotFound):
            call()


def test_a_run_posing_as_a_branch_run_can_neither_read_nor_write_the_session(harness: Harness) -> None:
    """start() refuses a branch run's id shape; a run written with one anyway (and the session in
    its input) is no branch run (only the session's scripts write a run's session and leaf): its
    add_message is refused, the run fails, and the session is untouched."""
    sid = _open(harness, sf.echo)
    before = harness.pw.sessions.events(sid)
    with pytest.raises(ValidationError, match="may not contain"):
        harness.pw.start(sf.poser, {"session": sid, "leaf": ""}, run_id=f"{sid}--forged")
    # one written straight into Redis (by whoever has its access) gets nothing from the session either
    from parkway.runtime.store import NewRun

    forged = f"{sid}--forged"
    ref = harness.pw.workflow_ref(sf.poser)[1]
    if not harness.pw.store.create_run(NewRun(forged, "session-poser", ref, "pose", {"session": sid, "leaf": ""},
                                              60_000, 1)):
        harness.pw.backend.dispatcher.enqueue(forged, 0, 0)
    harness.run_jobs()
    run = harness.pw.get_run(forged)
    assert run.status is RunStatus.FAILED and "branch run only" in (run.error.message if run.error else "")
    assert harness.pw.sessions.events(sid) == before
    assert harness.pw.sessions.get(sid).messages == {}


def test_a_session_and_its_runs_live_by_its_ttl(harness: Harness) -> None:
    """Every key of the session and its branch runs expires with the session's TTL (a run's records
    within the slack their renewal gives them; the runs' summaries outlive them by the retention, as
    every run's does)."""
    sid = harness.pw.sessions.open(sf.echo, owner="ada", tenant="acme", ttl_ms=30_000)
    harness.pw.sessions.send(sid, "hi", caller=ADA)
    harness.run_jobs()
    client = harness.pw.store.client  # type: ignore[attr-defined]
    found = [k for k in client.keys(f"pw:{{{sid}}}:*") if not k.endswith(b":sum")]
    assert len(found) > 5
    for key in found:
        assert 0 < client.pttl(key) <= 30_000 + 30_000 // layout.RENEW_SLACK, key


def test_the_policy_sees_each_trigger_and_may_park_on_it(harness: Harness) -> None:
    """decide() is asked on session.start, user.message and tool.results too; an interrupt action
    there parks the branch before the node runs on (and is not asked again after the resume)."""
    sid = _open(harness, sf.guarded)
    first = harness.pw.sessions.send(sid, "expensive 3", caller=ADA)
    harness.run_jobs()
    view = harness.pw.sessions.get(sid)
    assert [(i.reason, i.anchor) for i in view.open_interrupts] == [("this will cost money", first.message_id)]
    assert len(view.messages) == 1  # the node has not run
    assert harness.pw.sessions.resume_interrupt(sid, "budget", "ok", caller=ADA).outcome == "resumed"  # its name
    harness.run_jobs()
    view = harness.pw.sessions.get(sid)
    assert view.messages[view.head].content == "size 30"
    harness.pw.sessions.send(sid, "big 20", caller=ADA)  # 200 > 100: reviewed after the tool's result
    harness.run_jobs()
    [review] = harness.pw.sessions.get(sid).open_interrupts
    assert (review.reason, review.payload) == ("review the result", {"result": 200})
    harness.pw.sessions.resume_interrupt(sid, review.id, "fine", caller=ADA)
    harness.run_jobs()
    view = harness.pw.sessions.get(sid)
    assert view.messages[view.head].content == "size 200"
    assert [m.role for m in view.messages.values()].count("tool") == 2  # each tool ran once


def test_a_switch_delivers_a_kept_answer_only_onto_its_own_branch_whatever_its_caller_prepared(
    harness: Harness,
) -> None:
    """The switch script itself refuses (retry, nothing written) a kept answer prepared for a run
    whose branch the new head's path does not run through: the answer stays kept, the run waits,
    and the switch back to its branch delivers it."""
    sid = _open(harness, sf.asking)
    one = harness.pw.sessions.send(sid, "one", caller=ADA)
    harness.run_jobs()
    [asked] = harness.pw.sessions.get(sid).open_interrupts
    two = harness.pw.sessions.edit(sid, one.message_id, "two", caller=ADA)
    three = harness.pw.sessions.edit(sid, one.message_id, "three", caller=ADA)
    harness.run_jobs()
    harness.pw.sessions.switch(sid, two.message_id, caller=ADA)
    assert harness.pw.sessions.resume_interrupt(sid, asked.id, "ACC-1", caller=ADA).outcome == "cleared"
    sessions = harness.pw.sessions
    prepared = sessions._due(sessions.store.read(sid), one.message_id)  # as for the switch back to one
    assert [(r, run) for r, run, _, _ in prepared] == [(asked.id, one.run_id)] and prepared[0][2] is not None
    reply = sessions.store.switch(sid, three.message_id, now_ms(), [(r, run, a) for r, run, a, _ in prepared])
    assert reply == ["retry"]
    assert harness.pw.get_run(one.run_id).status is RunStatus.WAITING
    assert sessions.get(sid).head == two.message_id and sessions.store.read(sid).deliveries == {asked.id: one.run_id}
    sessions.switch(sid, one.message_id, caller=ADA)  # delivered
    harness.run_jobs()
    assert harness.pw.get_run(one.run_id).status is RunStatus.COMPLETED


def test_nothing_is_called_on_a_parked_branch(harness: Harness) -> None:
    """A run that starts (or is released) while its branch is parked is held before its node calls
    a model or a tool: a budget stop stops the spending, not only the commits."""
    path = tempfile.mkdtemp(prefix="pw-session-")
    sid = _open(harness, sf.counted)  # its model counts its calls on disk; its node waits for "go" first
    sent = harness.pw.sessions.send(sid, path, caller=ADA)
    # (embedded, the in-process worker may begin the run before the stop: its node waits at the gate
    # until then, and its model call is what the parked branch must refuse)
    stop = harness.pw.sessions.raise_interrupt(sid, "budget stop", caller=SYSTEM, scope="session")
    open(os.path.join(path, "go"), "w").close()
    harness.run_jobs()
    assert harness.pw.get_run(sent.run_id).status is RunStatus.WAITING
    assert _count(path, "model-calls") == 0
    assert harness.pw.sessions.resume_interrupt(sid, stop, caller=SYSTEM).outcome == "resumed"
    harness.run_jobs()
    assert _count(path, "model-calls") == 1
    assert harness.pw.get_run(sent.run_id).status is RunStatus.COMPLETED


def test_a_name_two_branches_wait_on_answers_the_active_one(harness: Harness) -> None:
    sid = _open(harness, sf.guarded)
    one = harness.pw.sessions.send(sid, "expensive 1", caller=ADA)
    two = harness.pw.sessions.edit(sid, one.message_id, "expensive 2", caller=ADA)
    harness.run_jobs()
    assert harness.pw.sessions.resume_interrupt(sid, "budget", "ok", caller=ADA).run_id == two.run_id  # the head's
    harness.run_jobs()
    assert harness.pw.get_run(two.run_id).status is RunStatus.COMPLETED
    assert harness.pw.get_run(one.run_id).status is RunStatus.WAITING
    # a duplicate by name is a no-op that says so, not unknown
    again = harness.pw.sessions.resume_interrupt(sid, "budget", "ok", caller=ADA)
    assert (again.outcome, again.run_id) == ("cleared", one.run_id)  # the other branch's, kept for it
    assert harness.pw.sessions.resume_interrupt(sid, "budget", "ok", caller=ADA).outcome == "already_cleared"


def test_a_deferred_tool_name_two_branches_wait_on_answers_the_active_one(harness: Harness) -> None:
    sid = _open(harness, sf.deferred)
    one = harness.pw.sessions.send(sid, "a", caller=ADA)
    two = harness.pw.sessions.edit(sid, one.message_id, "b", caller=ADA)
    harness.run_jobs()
    assert harness.pw.sessions.answer_tool(sid, "lk", "for b", caller=ADA).accepted
    harness.run_jobs()
    assert harness.pw.get_run(two.run_id).status is RunStatus.COMPLETED
    assert harness.pw.get_run(one.run_id).status is RunStatus.WAITING
    harness.pw.sessions.switch(sid, "", caller=ADA)  # neither branch active: the one call left takes it
    assert harness.pw.sessions.answer_tool(sid, "lk", "for a", caller=ADA).accepted


def test_the_policy_is_not_asked_again_on_replay(harness: Harness) -> None:
    sf.gate_asks.clear()
    sid = _open(harness, sf.gated)
    sent = harness.pw.sessions.send(sid, "q", caller=ADA)
    harness.run_jobs()  # the gate lets it through; the node then waits on its deferred tool
    assert harness.pw.sessions.answer_tool(sid, "lk", 7, caller=ADA).accepted
    harness.run_jobs()  # the replay does not ask the gate again (it would now say "over budget")
    assert harness.pw.get_run(sent.run_id).status is RunStatus.COMPLETED
    assert sf.gate_asks == [1]


def test_an_answer_kept_for_an_abandoned_branch_is_checked_first(harness: Harness) -> None:
    from parkway import InvalidAnswer

    sid = _open(harness, sf.asking)
    one = harness.pw.sessions.send(sid, "one", caller=ADA)
    harness.run_jobs()
    iid = harness.pw.sessions.get(sid).open_interrupts[0].id
    harness.pw.sessions.edit(sid, one.message_id, "two", caller=ADA)
    with pytest.raises(InvalidAnswer):
        harness.pw.sessions.resume_interrupt(sid, iid, {"not": "text"}, caller=ADA)
    assert harness.pw.sessions.resume_interrupt(sid, iid, "fine", caller=ADA).outcome == "cleared"


def test_a_user_cannot_raise_an_unanchored_interrupt_once_messages_exist(harness: Harness) -> None:
    sid = _open(harness, sf.echo)
    harness.pw.sessions.send(sid, "hi", caller=ADA)
    with pytest.raises(SessionDenied):
        harness.pw.sessions.raise_interrupt(sid, "stop all", caller=ADA, anchor="")


def test_every_session_transition_renews_all_its_keys(harness: Harness) -> None:
    sid = harness.pw.sessions.open(sf.asking, owner="ada", tenant="acme", ttl_ms=60_000)
    one = harness.pw.sessions.send(sid, "one", caller=ADA)
    harness.run_jobs()
    harness.pw.sessions.edit(sid, one.message_id, "two", caller=ADA)
    client = harness.pw.store.client  # type: ignore[attr-defined]
    session_keys = [k for k in client.keys(f"pw:{{{sid}}}:*") if b"--" not in k]
    for key in session_keys:  # age them: only what a transition renews gets its TTL back
        client.pexpire(key, 5_000)
    iid = harness.pw.sessions.raise_interrupt(sid, "x", caller=MACHINE)
    ttls = {k: client.pttl(k) for k in session_keys}
    assert min(ttls.values()) > 50_000, ttls
    for key in session_keys:
        client.pexpire(key, 5_000)
    harness.pw.sessions.resume_interrupt(sid, iid, caller=MACHINE)
    assert min(client.pttl(k) for k in session_keys) > 50_000


def test_a_stale_attempt_settles_nothing(harness: Harness) -> None:
    """A branch run's hook result from an attempt that is no longer current (another fence, or a
    run not running) is refused and writes neither the journal nor a message."""
    from parkway.errors import StaleFence
    from parkway.runtime.store import JournalEntry

    sid = _open(harness, sf.echo)
    sent = harness.pw.sessions.send(sid, "hi", caller=ADA)
    harness.run_jobs()  # the reply run has ended (embedded, its worker may have begun it at once)
    assert harness.pw.get_run(sent.run_id).status is RunStatus.COMPLETED
    before = _messages(harness, sid)
    message = {"id": "m_stale", "role": "assistant", "content": "late", "runId": sent.run_id}
    for fence in (0, 1, 7):  # the attempt that ran, and fences no attempt had: the run is not running
        with pytest.raises(StaleFence):  # (RunGone, a StaleFence, once its ended records are trimmed)
            harness.pw.sessions.store.settle(
                sid, sent.run_id, fence, 0, "keep", "@0", JournalEntry("model", "", {}), message, 1
            )
    assert _messages(harness, sid) == before and "m_stale" not in before
