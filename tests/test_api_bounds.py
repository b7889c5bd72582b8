"""What the HTTP surface bounds and withholds, against a real server process: TTLs, event ids, pages,
error bodies, redirects and the pages' content security policy."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from parkway.http.app import hash_key
from parkway.runtime.protocol import MAX_TTL_MS
from tests.conftest import SECRET
from tests.procs import ROOT, Worker, wait_for
from tests.test_api import KEY, USER_KEY, Server, _api, _wait_status, close_api_clients

ADMIN_KEY = "admin-key-" + "a" * 24
"""a system key of the module's server: an admin, who may see a failure's traceback whole"""


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    close_api_clients()


@pytest.fixture(scope="module")
def server(redis_url: str) -> Iterator[Server]:
    """One server and worker for the module (every test here only adds runs and sessions of its own)."""
    redis.Redis.from_url(redis_url).flushdb()
    srv, worker = Server(redis_url, f",{hash_key(ADMIN_KEY)}=system"), Worker(redis_url, SECRET)
    try:
        yield srv
    finally:
        worker.stop()
        srv.stop()


def test_a_ttl_outside_its_bounds_is_422(server: Server) -> None:
    """A run's or a session's ttlMs below 1 s, negative, or past MAX_TTL_MS (which would overflow
    the times computed from it) is refused with 422; the bounds themselves are accepted."""
    api, person = _api(server), _api(server, USER_KEY)
    for ttl in (10**15, 2**62, MAX_TTL_MS + 1, -5, 0, 999):
        started = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}, "ttlMs": ttl})
        assert started.status_code == 422, (ttl, started.text)
        opened = person.post("/v1/sessions", json={"agent": "tests.session_flows:echo", "ttlMs": ttl})
        assert opened.status_code == 422, (ttl, opened.text)
    for ttl in (1000, MAX_TTL_MS):
        started = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}, "ttlMs": ttl})
        assert started.status_code == 201, started.text
    assert person.post("/v1/sessions", json={"agent": "tests.session_flows:echo", "ttlMs": MAX_TTL_MS}
                       ).status_code == 201


def test_event_ids_past_64_bits_are_422_before_a_stream_opens(server: Server) -> None:
    """Each part of an event id is an unsigned 64-bit integer: a larger one (or the very last id,
    after which nothing can be read) is 422 for a run's stream (query or Last-Event-ID) and a
    session's events and stream; the largest with a successor is accepted."""
    api, person = _api(server), _api(server, USER_KEY)
    run_id = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}}).json()["runId"]
    sid = person.post("/v1/sessions", json={"agent": "tests.session_flows:echo"}).json()["sessionId"]
    for bad in ("99999999999999999999-0", "18446744073709551616", "0-18446744073709551616",
                "18446744073709551615-18446744073709551615"):
        assert api.get(f"/v1/runs/{run_id}/events", params={"after": bad}).status_code == 422
        assert api.get(f"/v1/runs/{run_id}/events", headers={"Last-Event-ID": bad}).status_code == 422
        assert person.get(f"/v1/sessions/{sid}/events", params={"after": bad}).status_code == 422
        assert person.get(f"/v1/sessions/{sid}/stream", params={"after": bad}).status_code == 422
    top = "18446744073709551614-18446744073709551615"
    assert person.get(f"/v1/sessions/{sid}/events", params={"after": top}).json() == []


def test_a_sessions_events_come_a_page_at_a_time(server: Server) -> None:
    """GET /v1/sessions/{id}/events returns at most ``limit`` events (100 by default, 1000 at most);
    the next page starts after the last eventId, and the pages together are the whole stream."""
    person = _api(server, USER_KEY)
    sid = person.post("/v1/sessions", json={"agent": "tests.session_flows:echo"}).json()["sessionId"]
    assert person.post(f"/v1/sessions/{sid}/messages", json={"content": "hi"}).status_code == 201
    whole = person.get(f"/v1/sessions/{sid}/events", params={"limit": 1000}).json()
    assert len(whole) >= 3
    pages, after = [], "0"
    while page := person.get(f"/v1/sessions/{sid}/events", params={"after": after, "limit": 2}).json():
        assert len(page) <= 2
        pages += page
        after = page[-1]["eventId"]
    assert [e["eventId"] for e in pages] == [e["eventId"] for e in whole[: len(pages)]]
    assert person.get(f"/v1/sessions/{sid}/events", params={"limit": 1001}).status_code == 422


def test_a_session_is_read_a_page_of_messages_at_a_time(server: Server) -> None:
    """A session of 24 messages of 100 KB reads in pages of at most about 1 MB (``nextCursor`` to
    the next), each message once and whole; its outline (every message's id and parent, no
    content) alone is a few KB, and ``ids`` reads just the messages named."""
    person = _api(server, USER_KEY)
    sid = person.post("/v1/sessions", json={"agent": "tests.session_flows:bulky"}).json()["sessionId"]
    assert person.post(f"/v1/sessions/{sid}/messages", json={"content": "bulk 24"}).status_code == 201
    wait_for(lambda: len(person.get(f"/v1/sessions/{sid}", params={"limit": 0}).json()["outline"]) == 25, 60,
             "the 24 messages")
    pages, cursor = [], None
    while True:
        answer = person.get(f"/v1/sessions/{sid}", params={"cursor": cursor} if cursor else {})
        assert answer.status_code == 200 and len(answer.content) < 1_200_000, len(answer.content)
        pages.append(answer.json())
        cursor = pages[-1]["nextCursor"]
        if cursor is None:
            break
    read = [m for page in pages for m in page["messages"]]
    assert len(pages) >= 3 and sorted(m["id"] for m in read) == sorted(m["id"] for m in pages[0]["outline"])
    bulk = sorted(m["content"] for m in read if m["role"] == "assistant")
    assert bulk == sorted(str(i % 10) * 100_000 for i in range(24))
    outline = person.get(f"/v1/sessions/{sid}", params={"limit": 0})
    assert outline.json()["messages"] == [] and len(outline.content) < 10_000, len(outline.content)
    two = [read[7]["id"], read[11]["id"]]
    named = person.get(f"/v1/sessions/{sid}", params={"ids": ",".join([*two, "nothing"])}).json()
    assert [m["id"] for m in named["messages"]] == two and named["nextCursor"] is None
    for bad in ({"limit": 1001}, {"limit": -1}, {"cursor": "a b"}, {"ids": "a*b"}):
        assert person.get(f"/v1/sessions/{sid}", params=bad).status_code == 422, bad


def test_error_bodies_say_nothing_about_the_server(server: Server) -> None:
    """A workflow the server cannot start gets a generic 422: no working directory, no list of the
    modules it may import, no import error; the detail goes to the server's log."""
    api = _api(server)
    for ref in ("nowhere:flow", "tests.no_such_module:flow", "tests.flows:no_such_flow", "os:system"):
        refused = api.post("/v1/runs", json={"workflow": ref, "input": {}})
        assert refused.status_code == 422, refused.text
        body = refused.text
        assert str(ROOT) not in body and "PARKWAY_WORKFLOWS" not in body and "tests" not in body.replace(ref, "")
        assert "No module named" not in body and "installed" not in body
    assert "http_workflow_refused" in server.output()


def _stream_text(server: Server, key: str, run_id: str) -> str:
    """The whole event stream of an ended run, as the key's client receives it (to its ``done``)."""
    text = ""
    with _api(server, key).stream("GET", f"/v1/runs/{run_id}/events") as response:
        assert response.status_code == 200
        for chunk in response.iter_text():
            text += chunk
            if "event: done" in text:
                return text
    return text


def test_a_failed_runs_error_shows_users_and_machines_no_server_paths(server: Server) -> None:
    """A failed run's error (the run read, and its node.retry and run.failed events) shows a user's and
    a machine key its message and frames by file name, never the server's file paths; a system key
    (an admin) reads the traceback whole."""
    person = _api(server, USER_KEY)
    run_id = person.post("/v1/runs", json={"workflow": "tests.flows_inbox:deep_failure", "input": {}}).json()["runId"]
    _wait_status(person, run_id, "failed")
    installed = str(Path(re.__file__).parent)
    for key in (USER_KEY, KEY):
        read, stream = _api(server, key).get(f"/v1/runs/{run_id}"), _stream_text(server, key, run_id)
        for shown in (read.text, stream):
            assert str(ROOT) not in shown and installed not in shown and "/tests/" not in shown
        error = read.json()["error"]
        assert 'File "flows_inbox.py"' in error["traceback"] and "in _descend" in error["traceback"]
        assert error["message"].startswith("the ledger at the bottom disagreed (start/level/level")
        assert "node.retry" in stream and "run.failed" in stream
    whole = _api(server, ADMIN_KEY).get(f"/v1/runs/{run_id}").json()["error"]["traceback"]
    assert str(ROOT / "tests" / "flows_inbox.py") in whole
    assert str(ROOT) in _stream_text(server, ADMIN_KEY, run_id)


def test_a_trailing_slash_is_not_redirected_to_the_host_header(server: Server) -> None:
    """/v1/runs/ is not redirected to http://<Host header>/v1/runs: no Location reflects the Host."""
    api = _api(server)
    answer = api.get("/v1/interrupts/", headers={"Host": "evil.example"}, follow_redirects=False)
    assert answer.status_code == 404
    assert "evil.example" not in answer.headers.get("location", "")


def test_the_live_page_runs_only_its_own_script_and_no_page_may_be_framed(server: Server) -> None:
    """/ui's CSP allows only its own scripts and styles, by a nonce new on each load (no
    'unsafe-inline'), and forbids framing; /ui/assets/ serves the page's own files and nothing
    else; answer-link pages allow no script and no framing;
    /docs (Swagger UI from a CDN) is not served, /openapi.json is."""
    api = _api(server)
    pages = [api.get("/ui"), api.get("/ui")]
    nonces = []
    for page in pages:
        csp = page.headers["content-security-policy"]
        assert "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp, csp
        nonce = re.search(r"script-src 'nonce-([^']+)'", csp)
        assert nonce is not None, csp
        nonces.append(nonce.group(1))
        # its inline script and the one it loads beside it (/ui/assets/), its style and stylesheet
        assert page.text.count("<script") == page.text.count(f'<script nonce="{nonce.group(1)}"') == 2
        assert page.text.count("<link") == page.text.count(f'<link nonce="{nonce.group(1)}" rel="stylesheet"') == 1
    assert nonces[0] != nonces[1]
    script = api.get("/ui/assets/inbox.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    assert script.headers["x-content-type-options"] == "nosniff"
    assert api.get("/ui/assets/ui.html").status_code == 404 and api.get("/ui/assets/..%2Fauth.py").status_code == 404
    link = api.get("/a/not-a-link.at-all")
    csp = link.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "script-src" not in csp and "default-src 'none'" in csp
    assert api.get("/docs").status_code == 404 and api.get("/redoc").status_code == 404
    assert api.get("/openapi.json").status_code == 200


def test_a_run_with_the_largest_ttl_runs(server: Server) -> None:
    """A run started with MAX_TTL_MS pauses as any run does (nothing overflows in the worker)."""
    api = _api(server)
    started = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}, "ttlMs": MAX_TTL_MS})
    _wait_status(api, started.json()["runId"], "waiting")


def test_a_server_side_failure_says_nothing_of_redis_or_its_scripts(server: Server, redis_url: str) -> None:
    """A run whose record Redis cannot read as a run (another type under its key) fails on the server:
    the 5xx body is generic (no Redis reply, no script, no SHA), the detail is in the server's log."""
    from parkway.adapters.redis import keys

    run_id = "wrong-type-run"
    redis.Redis.from_url(redis_url).set(keys.run(run_id), "not a hash")
    api = _api(server)
    for answer in (api.get(f"/v1/runs/{run_id}"), api.post(f"/v1/runs/{run_id}/cancel", json={})):
        assert answer.status_code >= 500, answer.text
        body = answer.text
        assert "WRONGTYPE" not in body and "script" not in body.lower() and not re.search(r"[0-9a-f]{40}", body)
    assert "http_server_error" in server.output() and "WRONGTYPE" in server.output()
