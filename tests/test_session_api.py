"""Sessions over HTTP: a real server process, a real worker, a real Redis; the seed's send_email
approval driven with the seed's JSON shapes, and the status codes for each refusal."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis

from parkway.http.app import hash_key
from tests.conftest import SECRET
from tests.procs import Worker, wait_for
from tests.test_api import KEY, USER_KEY, Server

OTHER_USER = "other-user-key-" + "o" * 24
EVE = "eve-user-key-" + "e" * 24
FOREIGN = "foreign-key-" + "f" * 24


@pytest.fixture
def api(redis_url: str, redis_client: redis.Redis) -> Iterator[dict[str, httpx.Client]]:
    extra = f",{hash_key(OTHER_USER)}=user:bob:acme,{hash_key(FOREIGN)}=machine::other,{hash_key(EVE)}=user:ana:other"
    srv = Server(redis_url, extra)
    worker = Worker(redis_url, SECRET)
    clients = {name: httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {key}"}, timeout=15)
               for name, key in (("machine", KEY), ("ana", USER_KEY), ("bob", OTHER_USER), ("foreign", FOREIGN),
                                 ("eve", EVE))}
    try:
        yield clients
    finally:
        for client in clients.values():
            client.close()
        worker.stop()
        srv.stop()


def _wait_for_head(api: httpx.Client, sid: str, content: str) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        body = api.get(f"/v1/sessions/{sid}").json()
        head = next((m for m in body["messages"] if m["id"] == body["head"]), None)
        return body if head and head["content"] == content else None

    return wait_for(reached, 20, f"the head to read {content!r}")


def test_the_send_email_approval_over_http(api: dict[str, httpx.Client]) -> None:
    ana = api["ana"]
    opened = ana.post("/v1/sessions", json={"agent": "tests.session_flows:mail"})
    assert opened.status_code == 201, opened.text
    sid = opened.json()["sessionId"]
    sent = ana.post(f"/v1/sessions/{sid}/messages", json={"content": "mail bob"})
    assert sent.status_code == 201
    pending = wait_for(lambda: ana.get(f"/v1/sessions/{sid}").json()["parkedBy"], 20, "the approval")
    # a message on the parked branch: 409, nothing written
    refused = ana.post(f"/v1/sessions/{sid}/messages", json={"content": "and?"})
    assert refused.status_code == 409 and refused.json()["error"] == "BranchParked"
    # another owner, another tenant: 404, as for no session (ids are no oracle)
    assert api["bob"].get(f"/v1/sessions/{sid}").status_code == 404
    assert api["foreign"].post(f"/v1/sessions/{sid}/resume", json={
        "type": "interrupt.resume", "interrupt_id": pending[0], "payload": {"approved": True}}).status_code == 404
    resume = {"type": "interrupt.resume", "interrupt_id": pending[0], "payload": {"approved": True}}
    first = ana.post(f"/v1/sessions/{sid}/resume", json=resume)
    assert first.status_code == 200 and first.json()["outcome"] == "resumed"
    assert ana.post(f"/v1/sessions/{sid}/resume", json=resume).status_code == 409  # duplicate: no second delivery
    unknown = ana.post(f"/v1/sessions/{sid}/resume", json={**resume, "interrupt_id": "nope"})
    assert unknown.status_code == 404 and unknown.json()["outcome"] == "unknown"
    _wait_for_head(ana, sid, "done: sent")
    events = [e["type"] for e in ana.get(f"/v1/sessions/{sid}/events").json()]
    assert events[0] == "session.opened" and "interrupt.cleared" in events


def test_session_requests_are_checked(api: dict[str, httpx.Client]) -> None:
    ana, machine = api["ana"], api["machine"]
    sid = ana.post("/v1/sessions", json={"agent": "tests.session_flows:echo"}).json()["sessionId"]
    assert ana.post(f"/v1/sessions/{sid}/resume", json={"type": "interrupt.resume"}).status_code == 422
    assert ana.post(f"/v1/sessions/{sid}/interrupts", json={"payload": {}}).status_code == 422  # no reason
    assert ana.post(f"/v1/sessions/{sid}/interrupts", json={"reason": "x", "scope": "session"}).status_code == 403
    assert machine.post("/v1/sessions", json={"agent": "tests.session_flows:echo"}).status_code == 422  # no owner
    assert ana.get("/v1/sessions/no-such").status_code == 404
    assert ana.get("/v1/sessions/bad%0Aid").status_code == 422
    iid = machine.post(f"/v1/sessions/{sid}/interrupts", json={"reason": "maintenance"}).json()["interruptId"]
    assert ana.post(f"/v1/sessions/{sid}/messages", json={"content": "hi"}).status_code == 409
    lift = {"type": "interrupt.resume", "interrupt_id": iid}
    assert ana.post(f"/v1/sessions/{sid}/resume", json=lift).status_code == 403  # a machine's pause
    cleared = machine.post(f"/v1/sessions/{sid}/resume", json=lift)
    assert cleared.status_code == 200 and cleared.json()["outcome"] == "cleared"
    assert ana.post(f"/v1/sessions/{sid}/messages", json={"content": "hi"}).status_code == 201
    _wait_for_head(ana, sid, "you said hi")


def test_a_session_streams_its_events_live_and_picks_up_after_a_drop(api: dict[str, httpx.Client]) -> None:
    ana = api["ana"]
    sid = ana.post("/v1/sessions", json={"agent": "tests.session_flows:echo"}).json()["sessionId"]
    assert api["bob"].get(f"/v1/sessions/{sid}/stream").status_code == 404
    seen: list[tuple[str, str]] = []
    with ana.stream("GET", f"/v1/sessions/{sid}/stream") as response:
        assert response.status_code == 200
        ana.post(f"/v1/sessions/{sid}/messages", json={"content": "hi"})
        event_id = kind = ""
        for line in response.iter_lines():
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                seen.append((event_id, kind))
                if kind == "message.added" and len([k for _, k in seen if k == "message.added"]) == 2:
                    break  # the user's message and the agent's reply, live
    assert [k for _, k in seen][:3] == ["session.opened", "message.added", "run.dispatched"]
    # a dropped connection picks up after the last event it saw
    with ana.stream("GET", f"/v1/sessions/{sid}/stream", headers={"Last-Event-ID": seen[0][0]}) as response:
        first = next(line for line in response.iter_lines() if line.startswith("id: "))
    assert first == f"id: {seen[1][0]}"


def test_a_sessions_runs_and_interrupts_stay_in_its_tenant(api: dict[str, httpx.Client]) -> None:
    """The run and interrupt routes apply the session's rules to its branch runs: another tenant
    (or another owner) neither lists its interrupts nor reads, streams, cancels or answers its runs."""
    ana = api["ana"]
    sid = ana.post("/v1/sessions", json={"agent": "tests.session_flows:mail"}).json()["sessionId"]
    run_id = ana.post(f"/v1/sessions/{sid}/messages", json={"content": "mail bob"}).json()["runId"]
    wait_for(lambda: ana.get(f"/v1/sessions/{sid}").json()["parkedBy"], 20, "the approval")
    assert [i["runId"] for i in api["machine"].get("/v1/interrupts").json()["items"]] == [run_id]
    assert [i["runId"] for i in ana.get("/v1/interrupts").json()["items"]] == [run_id]
    token = api["machine"].get("/v1/interrupts", params={"tokens": "true"}).json()["items"][0]["resumeToken"]
    for name in ("eve", "bob", "foreign"):
        other = api[name]
        assert other.get("/v1/interrupts").json()["items"] == [], name
        assert other.get(f"/v1/runs/{run_id}").status_code == 404, name
        assert other.get(f"/v1/runs/{run_id}/events").status_code == 404, name
        assert other.post(f"/v1/runs/{run_id}/cancel", json={}).status_code == 404, name
    assert api["foreign"].get("/v1/interrupts", params={"tokens": "true"}).json()["items"] == []
    answered = api["foreign"].post("/v1/resume", json={"token": token, "value": {"approved": True}})
    assert answered.status_code == 404  # even holding the token: as no run
    assert ana.get(f"/v1/runs/{run_id}").json()["status"] == "waiting"
