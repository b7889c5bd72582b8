"""Random sequences of send / edit / switch / raise / resume against a real Redis and parkway's
worker, checking after every step: at most one live run per branch, no parked branch advances, and
the session rebuilt from its events is the session stored."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import redis
from hypothesis import HealthCheck, given, settings

from parkway import Caller, Parkway, Settings
from parkway.errors import BranchBusy, BranchParked, SessionDenied
from parkway.sessions.rules import rebuild
from tests import session_flows as sf
from tests.conftest import SECRET, Harness

ADA = Caller("user", "ada", "acme")
SYSTEM = Caller("system")

step = st.one_of(
    st.tuples(st.just("send"), st.sampled_from(["hi", "?why", "ok", "?when"])),
    st.tuples(st.just("edit"), st.integers(0, 20), st.sampled_from(["again", "?again"])),
    st.tuples(st.just("switch"), st.integers(0, 40)),
    st.tuples(st.just("raise"), st.integers(0, 40), st.booleans()),
    st.tuples(st.just("resume"), st.integers(0, 10)),
    st.tuples(
        st.just("jobs"),
    ),
)


def _parked_messages(view: Any) -> set[str]:
    """Every message whose path an open interrupt parks."""
    return {m for m in view.messages if view.parked_by(m)}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(step, min_size=1, max_size=14))
def test_random_session_histories_keep_the_invariants(redis_url: str, steps: list[tuple[Any, ...]]) -> None:
    config = Settings(redis_url=redis_url, secret=SECRET)
    with redis.Redis.from_url(redis_url) as client, Parkway(config) as pw:
        client.flushdb()
        h = Harness("redis", pw, config, client)
        sid = pw.sessions.open(sf.mixed, owner="ada", tenant="acme")
        for op in steps:
            before = pw.sessions.get(sid)
            parked_before = _parked_messages(before)
            _apply(h, sid, before, op)
            after = pw.sessions.get(sid)
            # no parked branch advances: nothing new below a message parked before and after the step
            still = parked_before & _parked_messages(after)
            for mid, message in after.messages.items():
                if mid not in before.messages:
                    assert message.parent not in still, f"{op}: {mid} added below parked {message.parent}"
            # at most one live run per branch
            leaves = list(after.live_runs.values())
            assert len(leaves) == len(set(leaves)), f"{op}: two live runs on one branch: {after.live_runs}"
            # the events tell the same session
            state = rebuild((e.type, e.data) for e in pw.sessions.events(sid))
            assert state.head == after.head
            assert state.parents == {m.id: m.parent for m in after.messages.values()}
            assert state.open == {i.id: i.anchor for i in after.open_interrupts if i.scope == "session"}
    client.close()


def _apply(h: Harness, sid: str, view: Any, op: tuple[Any, ...]) -> None:
    sessions = h.pw.sessions
    ids = sorted(view.messages)
    try:
        if op[0] == "send":
            sessions.send(sid, op[1], caller=ADA)
        elif op[0] == "edit":
            users = [m for m in ids if view.messages[m].role == "user"]
            if users:
                sessions.edit(sid, users[op[1] % len(users)], op[2], caller=ADA)
        elif op[0] == "switch" and ids:
            sessions.switch(sid, ids[op[1] % len(ids)], caller=ADA)
        elif op[0] == "raise":
            if op[2] or not ids:
                sessions.raise_interrupt(sid, "global", caller=SYSTEM, scope="session")
            else:
                sessions.raise_interrupt(sid, "anchored", caller=ADA, anchor=ids[op[1] % len(ids)])
        elif op[0] == "resume":
            pending = view.open_interrupts
            if pending:
                target = pending[op[1] % len(pending)]
                outcome = sessions.resume_interrupt(sid, target.id, "x", caller=SYSTEM)
                assert outcome.outcome in ("resumed", "dispatched", "cleared", "still_parked")
            else:
                assert sessions.resume_interrupt(sid, "nothing", caller=SYSTEM).outcome == "unknown"
        elif op[0] == "jobs":
            h.run_jobs()
    except (BranchParked, BranchBusy):
        pass  # refused, and (checked by the caller) nothing was written
    except SessionDenied:
        raise
