"""What a session keeps per turn: a branch run that ended keeps, once the session's next transition
sees it ended, its summary only (its status, whose it is, when), not its hash, stream or snapshots,
and that summary as one field of the session's hash of ended runs, not a key of its own: it then
reads as a run past its records' TTL does, and expires with the session."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from parkway import Caller, RunStatus
from parkway.adapters import codec
from parkway.adapters.redis import keys
from tests import session_flows as sf
from tests.conftest import Harness

ADA = Caller("user", "ada", "acme")


def test_an_ended_branch_run_keeps_only_its_summary_once_the_next_turn_sees_it_ended(harness: Harness) -> None:
    client = harness.pw.store.client  # type: ignore[attr-defined]
    sid = harness.pw.sessions.open(sf.echo, owner="ada", tenant="acme")
    first = harness.pw.sessions.send(sid, "hello " * 20, caller=ADA)
    harness.run_jobs()
    assert client.exists(keys.events(first.run_id)) == 1  # ended: kept whole until a transition sees it
    second = harness.pw.sessions.send(sid, "again", caller=ADA)
    harness.run_jobs()
    assert client.exists(keys.run(first.run_id), keys.events(first.run_id), keys.snapshots(first.run_id)) == 0
    assert client.exists(keys.summary(first.run_id)) == 0  # folded into the session's hash of ended runs
    assert client.hexists(keys.ended_summaries(first.run_id), keys.ended_field(first.run_id)) == 1
    run = harness.pw.get_run(first.run_id)  # its summary: status, workflow, whose, when
    assert run.status is RunStatus.COMPLETED
    assert (run.owner, run.tenant, run.workflow) == ("ada", "acme", sf.echo.name)
    assert run.node is None and run.output is None and run.created_at > 0
    record = harness.pw.store.get_run(first.run_id, 0)  # the store's record: whose it is, whole
    assert (record.session, record.origin, record.owner, record.tenant) == (sid, "frontend", "ada", "acme")
    # the session reads as before: every message, the head the second reply
    view = harness.pw.sessions.get(sid, caller=ADA)
    assert view.messages[view.head].content == "you said again"
    assert client.exists(keys.events(second.run_id), keys.run(second.run_id)) == 2  # the latest stays whole


def test_a_message_event_names_the_message_without_repeating_its_content(harness: Harness) -> None:
    sid = harness.pw.sessions.open(sf.echo, owner="ada", tenant="acme")
    sent = harness.pw.sessions.send(sid, "hello", caller=ADA)
    harness.run_jobs()
    added = [e.data for e in harness.pw.sessions.events(sid) if e.type == "message.added"]
    assert [(a["id"], a["role"]) for a in added][0] == (sent.message_id, "user")
    assert added[0]["parent"] == "" and added[0]["runId"] == sent.run_id
    assert [a["role"] for a in added] == ["user", "assistant"]
    assert all("content" not in a for a in added)
    messages = harness.pw.sessions.get(sid).messages
    assert [messages[a["id"]].content for a in added] == ["hello", "you said hello"]


def test_a_message_event_is_stored_as_the_message_id_alone_and_read_whole(harness: Harness) -> None:
    """The stream keeps a ``message.added`` as its message's id; every reader (the session's events,
    a blocking read, the HTTP stream's plan) joins the rest from the message and its parent."""
    if harness.connection is None:
        pytest.skip("reads the stream by hand")
    sid = harness.pw.sessions.open(sf.echo, owner="ada", tenant="acme")
    sent = harness.pw.sessions.send(sid, "hello", caller=ADA)
    harness.run_jobs()
    stored = [codec.decode(f[b"d"]) for _, f in harness.connection.xrange(keys.session_events(sid))
              if f[b"t"] == b"message.added"]
    view = harness.pw.sessions.get(sid, caller=ADA)
    reply = view.head
    assert stored == [{"id": sent.message_id}, {"id": reply}]
    at = [m["at"] for m in (codec.decode(harness.connection.hget(keys.session_messages(sid), i))
                             for i in (sent.message_id, reply))]
    whole = [{"id": sent.message_id, "parent": "", "role": "user", "at": at[0], "runId": sent.run_id},
             {"id": reply, "role": "assistant", "runId": sent.run_id, "at": at[1]}]
    added = [e for e in harness.pw.sessions.events(sid) if e.type == "message.added"]
    assert [{k: v for k, v in e.data.items() if k != "incarnation"} for e in added] == whole
    blocked = harness.pw.sessions.store.events(sid, "0", 100, 100)
    assert [e.data for e in blocked if e.type == "message.added"] == [e.data for e in added]


def test_a_turn_reaches_the_model_in_five_round_trips_whatever_the_sessions_length(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """send: its read and its script; the worker: begin, the attempt's check with its path, the
    model call's check (redis-py's round trips naming parkway's keys, as bench.counted counts)."""
    if harness.kind != "redis":
        pytest.skip("counts redis-py's round trips to a real Redis")
    from redis.connection import AbstractConnection

    original = AbstractConnection.send_packed_command

    def counting(self: Any, command: Any, check_health: bool = True) -> Any:
        packed = command if isinstance(command, bytes | bytearray) else b"".join(bytes(p) for p in command)
        # not the burst worker's start, nor the format announcements a thread refreshes every few seconds
        if b"pw:" in packed and b"pw:keyid" not in packed and threading.current_thread().name != "parkway-formats":
            sf.TRIPS["now"] += 1
        return original(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counting)
    sid = harness.pw.sessions.open(sf.tripped, owner="ada", tenant="acme")
    harness.pw.store.formats.writes()  # the process's one decision of the format it writes (a round trip, once)
    for i in range(12):  # the live set names the last turn's run: a send checks it
        start = sf.TRIPS["now"]
        harness.pw.sessions.send(sid, f"turn {i}", caller=ADA)
        sent = sf.TRIPS["now"] - start
        harness.run_jobs()
        assert (sent, sf.TRIPS["at_model"] - start) == (2, 5)


def test_a_folded_summary_answers_every_read_of_the_run_and_expires_with_the_session(harness: Harness) -> None:
    """Whose the run is, when it was born and its place in the run listing read the folded summary,
    with the owner and tenant it was written with; the session's hash of ended runs has the
    session's TTL."""
    client = harness.pw.store.client  # type: ignore[attr-defined]
    sid = harness.pw.sessions.open(sf.echo, owner="ada", tenant="acme")
    first = harness.pw.sessions.send(sid, "hello", caller=ADA)
    harness.run_jobs()
    before = harness.pw.get_run(first.run_id)
    harness.pw.sessions.send(sid, "again", caller=ADA)
    harness.run_jobs()
    assert client.exists(keys.summary(first.run_id)) == 0
    store = harness.pw.store
    assert store.authorities([first.run_id]) == {first.run_id: ("acme", "ada")}
    assert store.births([first.run_id]) == {first.run_id: str(before.created_at)}
    listed = {r.run_id: r for r in harness.pw.list_runs(caller=ADA).items}
    assert listed[first.run_id].status is RunStatus.COMPLETED
    assert (listed[first.run_id].owner, listed[first.run_id].tenant) == ("ada", "acme")
    ended, session = client.pttl(keys.ended_summaries(first.run_id)), client.pttl(keys.session(sid))
    assert 0 < ended and abs(ended - session) < 5_000
    after = harness.pw.get_run(first.run_id)
    assert (after.workflow, after.created_at) == (before.workflow, before.created_at)
    assert after.updated_at == before.updated_at


def test_a_message_and_its_dispatch_keep_the_run_id_past_the_sessions_and_read_it_whole(harness: Harness) -> None:
    """The session's key names the session: its records keep a branch run's id as the part after
    ``<session>--``, and every reader (the session, its events, a blocking read) gets the id whole."""
    if harness.connection is None:
        pytest.skip("reads the records by hand")
    sid = harness.pw.sessions.open(sf.echo, owner="ada", tenant="acme")
    sent = harness.pw.sessions.send(sid, "hello", caller=ADA)
    harness.run_jobs()
    suffix = sent.run_id.removeprefix(f"{sid}--")
    assert suffix != sent.run_id
    stored = [codec.decode(b) for b in harness.connection.hvals(keys.session_messages(sid))]
    assert sorted(m["runId"] for m in stored) == [suffix, suffix]
    dispatched = [codec.decode(f[b"d"]) for _, f in harness.connection.xrange(keys.session_events(sid))
                  if f[b"t"] == b"run.dispatched"]
    assert [d["runId"] for d in dispatched] == [suffix]
    view = harness.pw.sessions.get(sid, caller=ADA)
    assert {m.run_id for m in view.messages.values()} == {sent.run_id}
    events = harness.pw.sessions.events(sid)
    assert {e.data["runId"] for e in events if e.type in ("message.added", "run.dispatched")} == {sent.run_id}
    blocked = harness.pw.sessions.store.events(sid, "0", 100, 100)
    assert [e.data for e in blocked] == [e.data for e in events]
