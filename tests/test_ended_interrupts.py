"""An ended interrupt stays readable after its run's records are gone: its lifecycle record keeps
the request as clients saw it, and every door (Python, HTTP, the CLI) lists it. The case that broke:
a session's approval (a contract request) answered, then the session moved on, so its branch run
kept only its summary, and listing resolved interrupts raised CorruptRecord."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
import redis

from parkway import Caller
from tests import session_flows
from tests.conftest import Harness
from tests.test_api import KEY, Server
from tests.test_cli import _env, in_process

ADA = Caller("user", owner="ada", tenant="acme")


def _approved_then_moved_on(harness: Harness) -> tuple[str, str, str]:
    """A session whose approval was answered and which then took another turn (its branch run's
    records pruned to its summary); its session id, the approval's request id and its run's id."""
    pw = harness.pw
    sid = pw.sessions.open(session_flows.mail, owner="ada", tenant="acme")
    pw.sessions.send(sid, "mail bob", caller=ADA)
    harness.run_jobs()
    asked = pw.sessions.get(sid).parked_by()[0]
    (pending,) = pw.list_interrupts(session=sid).items
    resumed = pw.sessions.resume(
        sid, {"type": "interrupt.resume", "interrupt_id": asked, "payload": {"approved": True}}, caller=ADA
    )
    assert resumed.outcome == "resumed"
    harness.run_jobs()
    pw.sessions.send(sid, "thanks", caller=ADA)
    harness.run_jobs()
    return sid, pending.request_id, pending.run_id


def test_a_session_approval_reads_as_resolved_after_its_session_moved_on(harness: Harness) -> None:
    """Listed and read by id once its branch run kept only its summary: the request as it was shown
    (kind, question, payload), the answer and who gave it."""
    sid, request_id, run_id = _approved_then_moved_on(harness)
    listed = [i.request_id for i in harness.pw.list_interrupts(status="resolved").items]
    assert listed.count(request_id) == 1
    item = harness.pw.get_interrupt(request_id, run_id=run_id)
    assert item is not None and item.request is not None and item.lifecycle is not None
    assert item.lifecycle.status == "resolved" and item.lifecycle.answer == {"approved": True}
    assert item.request.kind == "contract" and item.request.payload == {
        "reason": "confirm", "payload": {"message": "Send the email?"}}
    assert item.request.meta["session"] == sid


@pytest.fixture
def server(redis_url: str, redis_client: redis.Redis) -> Iterator[Server]:
    srv = Server(redis_url)
    try:
        yield srv
    finally:
        srv.stop()


def test_http_and_the_cli_list_it_too(harness: Harness, server: Server, redis_url: str) -> None:
    """``GET /v1/interrupts?status=resolved`` answers 200 with it, and ``parkway interrupts --status
    resolved`` prints it and exits 0, as JSON too (500 and exit 1 before)."""
    if harness.kind != "redis":
        pytest.skip("the server and the CLI read the real Redis")
    sid, request_id, _ = _approved_then_moved_on(harness)
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=15) as api:
        page = api.get("/v1/interrupts", params={"status": "resolved"})
        assert page.status_code == 200, server.output()[-3000:]
        items = [i for i in page.json()["items"] if i["requestId"] == request_id]
        assert len(items) == 1 and items[0]["request"]["meta"]["session"] == sid
        assert items[0]["lifecycle"]["answer"] == {"approved": True}
    done = in_process("interrupts", "--status", "resolved", "--json", env=_env(PARKWAY_REDIS_URL=redis_url))
    assert done.returncode == 0, done.stderr
    assert request_id in [item["requestId"] for item in json.loads(done.stdout)["items"]]
    shown = in_process("interrupts", "--status", "resolved", env=_env(PARKWAY_REDIS_URL=redis_url))
    assert shown.returncode == 0 and request_id in shown.stdout, shown.stderr
