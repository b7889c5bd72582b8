"""What a session's policy, node code and streams name, in one spelling: ``toolCallId``, ``messageId``,
``runId`` (the seed's own shapes keep its ``interrupt_id``); records stored under the old names
(``run``, ``tool_call_id``) still read. The same over HTTP: tests/test_casing.py."""

from __future__ import annotations

import os
from typing import Any

from parkway import Caller, RunStatus
from parkway.adapters import codec
from parkway.adapters.redis import keys
from parkway.adapters.redis.store.store import RedisStore
from parkway.runtime.agents import DEFERRED_TOOL
from parkway.sessions.rules import rebuild
from tests import session_flows as sf
from tests.casing import not_camel
from tests.conftest import Harness

ADA = Caller("user", "ada", "acme")
MACHINE = Caller("machine")


def test_the_policy_sees_each_tool_call_as_tool_call_id_in_camel_case(harness: Harness) -> None:
    """decide() is shown tool.execute, the approval's interrupt.resumed and tool.results with
    ``toolCallId`` (and user.message with ``messageId``); only the seed's ``interrupt_id`` is not camelCase."""
    sf.policy_seen.clear()
    sid = harness.pw.sessions.open(sf.noted_mail, owner="ada", tenant="acme")
    sent = harness.pw.sessions.send(sid, "mail bob", caller=ADA)
    harness.run_jobs()
    approval = harness.pw.sessions.get(sid).parked_by()[0]
    assert harness.pw.sessions.resume_interrupt(sid, approval, {"approved": True}, caller=ADA).outcome == "resumed"
    harness.run_jobs()
    assert harness.pw.sessions.answer_tool(sid, "lk", "bob@example.com", caller=ADA).accepted
    harness.run_jobs()
    by_type: dict[str, list[dict[str, Any]]] = {}
    for trigger in sf.policy_seen:
        by_type.setdefault(trigger["type"], []).append(trigger)
    assert by_type["user.message"][0]["messageId"] == sent.message_id
    assert [t["toolCallId"] for t in by_type["tool.execute"]] == ["mail", "lk"]
    assert {t["toolCallId"] for t in by_type["tool.results"]} == {"mail", "lk"}
    resumed = by_type["interrupt.resumed"][0]
    assert (resumed["toolCallId"], resumed["interrupt_id"]) == ("mail", approval)
    assert resumed["payload"] == {"approved": True}
    assert [t for t in sf.policy_seen if not_camel(t)] == []
    assert harness.pw.sessions.get(sid).messages[harness.pw.sessions.get(sid).head].content == (
        "done: sent, found bob@example.com"
    )
    # the approval's answer, read when the call settled, is read again by every later replay (the
    # deferred call parks the run after it): the run completes, not stuck on an answer "unconsumed"
    assert harness.pw.get_run(sent.run_id).status == RunStatus.COMPLETED


def test_records_stored_under_the_old_names_still_read(harness: Harness) -> None:
    """A message stored with ``run`` (and its ``message.added`` event) still names its run, and a
    deferred call's request stored with ``tool_call_id`` still reads; what is written now says
    ``runId`` and ``toolCallId`` only."""
    sid = harness.pw.sessions.open(sf.echo, owner="ada", tenant="acme")
    sent = harness.pw.sessions.send(sid, "hi", caller=ADA)
    harness.run_jobs()
    store = harness.pw.store
    assert isinstance(store, RedisStore)
    stored = {m: codec.decode(b) for m, b in store.client.hgetall(keys.session_messages(sid)).items()}
    assert all("runId" in m and "run" not in m for m in stored.values())
    old = {"role": "user", "content": "hi", "at": 1, "run": sent.run_id}  # as a message was stored before
    store.client.hset(keys.session_messages(sid), sent.message_id, codec.encode(old))
    assert harness.pw.sessions.get(sid).messages[sent.message_id].run_id == sent.run_id
    # its message.added event (kept as the message's id) is made whole from it with runId
    added = [e.data for e in harness.pw.sessions.events(sid) if e.type == "message.added"]
    assert added[0]["id"] == sent.message_id and added[0]["runId"] == sent.run_id and "run" not in added[0]
    state = rebuild([
        ("session.opened", {"owner": "ada", "tenant": "acme"}),
        ("message.added", {"id": "m1", "parent": "", "role": "user", "run": "r1"}),
        ("run.dispatched", {"runId": "r1", "leaf": "m1"}),
        ("message.added", {"id": "m2", "role": "assistant", "run": "r1"}),
    ])
    assert state.parents == {"m1": "", "m2": "m1"} and state.runs == {"r1": "m2"} and state.head == "m2"
    request = {"tool": "lookup", "arguments": {"q": "x"}, "tool_call_id": "lk"}
    assert DEFERRED_TOOL.check_request(request) == {"tool": "lookup", "arguments": {"q": "x"}, "toolCallId": "lk"}


def test_a_trigger_delivered_to_a_live_run_is_streamed_as_an_interrupt_id_event(harness: Harness) -> None:
    """A caller's interrupt cleared while a run is live at the head is written into that run's
    journal as the seed's trigger (``interrupt_id``, what its policy and ``use_triggers`` read) and onto
    its stream as an ``interrupt.resumed`` event in camelCase, ``{interruptId, payload}``."""
    # a run that stays live until the test lets it go: embedded, the worker may take it before the
    # clear, and a run that ended has no journal of its step left (one that parked would park the branch)
    from tests.test_sessions import _hold_dir

    path = _hold_dir()
    sid = harness.pw.sessions.open(sf.slow_model, owner="ada", tenant="acme")
    sent = harness.pw.sessions.send(sid, path, caller=ADA)  # live at the head: queued, or in its model call
    try:
        iid = harness.pw.sessions.raise_interrupt(sid, "audit", caller=MACHINE, scope="branch")
        cleared = harness.pw.sessions.resume_interrupt(sid, iid, {"ok": True}, caller=MACHINE)
        assert (cleared.outcome, cleared.run_id) == ("resumed", sent.run_id)
        streamed = [e.data for e in harness.pw.store.read_events(sent.run_id, "0", None, 1000)
                    if e.type == "interrupt.resumed"]
        assert streamed == [{"interruptId": iid, "payload": {"ok": True}}]
        journal, _ = harness.pw.store.read_activation(sent.run_id, 0)
        assert [e.value for f, e in journal.items() if f.startswith("g:")] == [
            {"type": "interrupt.resumed", "interrupt_id": iid, "payload": {"ok": True}}
        ]
    finally:
        os.remove(os.path.join(path, "hold"))
