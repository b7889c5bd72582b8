"""The HTTP API, against a real server process (uvicorn), a real Redis and a real worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from parkway.http.app import hash_key
from parkway.runtime import links
from tests import flows
from tests.conftest import SECRET, Closing
from tests.procs import ROOT, WORKFLOWS, Worker, answers, free_port, wait_for

KEY = "machine-key-" + "k" * 24
USER_KEY = "user-key-" + "u" * 24


class Server:
    """`uvicorn --factory parkway.http.app:app_from_env` in a process of its own."""

    def __init__(self, redis_url: str, extra_keys: str = "", *, cwd: Path = ROOT, **env_vars: str) -> None:
        self.port = free_port()
        self.log = tempfile.TemporaryFile()
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("PARKWAY_")},
               "PARKWAY_REDIS_URL": redis_url, "PARKWAY_SECRET": SECRET, "PYTHONPATH": str(ROOT),
               "PARKWAY_WORKFLOWS": WORKFLOWS,
               "PARKWAY_API_KEYS": f"{hash_key(KEY)}=machine,{hash_key(USER_KEY)}=user:ana:acme{extra_keys}",
               **env_vars}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--factory", "parkway.http.app:app_from_env", "--port", str(self.port),
             "--host", "127.0.0.1"],
            cwd=cwd, env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        try:
            wait_for(self._up, 60, "the API server to answer")
        except BaseException:
            self.stop()  # never left running for the later tests of this worker
            raise

    def _up(self) -> bool:
        assert self.proc.poll() is None, self.output()
        return answers(self.url)

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self) -> str:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:  # uvicorn's graceful stop waits on open long polls: not under test here
            self.proc.kill()
            self.proc.wait(10)
        out = self.output()
        self.log.close()
        return out


@contextmanager
def serving(redis_url: str, extra_keys: str = "") -> Iterator[Server]:
    """An API server process (with ``extra_keys`` besides KEY and USER_KEY) and a worker process."""
    srv = Server(redis_url, extra_keys)
    worker = Worker(redis_url, SECRET)
    try:
        yield srv
    finally:
        worker.stop()
        srv.stop()


@pytest.fixture
def server(redis_url: str, redis_client: redis.Redis) -> Iterator[Server]:
    with serving(redis_url) as srv:
        yield srv


_clients: list[httpx.Client] = []


def _api(srv: Server, key: str = KEY) -> httpx.Client:
    client = httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {key}"}, timeout=15)
    _clients.append(client)
    return client


def close_api_clients() -> None:
    """Close the clients ``_api`` opened (each module that calls it closes them after every test)."""
    while _clients:
        _clients.pop().close()


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    close_api_clients()


def _wait_status(api: httpx.Client, run_id: str, status: str) -> dict[str, Any]:
    return wait_for(lambda: (r := api.get(f"/v1/runs/{run_id}").json()).get("status") == status and r, 20,
                    f"run {run_id} to be {status}")


def _token(api: httpx.Client, run_id: str) -> tuple[str, str]:
    page = api.get("/v1/interrupts", params={"runId": run_id, "tokens": "true"}).json()
    item = page["items"][0]
    return item["resumeToken"], item["requestId"]


def test_the_interrupt_listing_waits_for_a_pause_with_wait_ms(server: Server) -> None:
    """GET /v1/interrupts?waitMs= answers when a run of the workflow asked for pauses; a waitMs
    outside 0..30000, or not an integer, is a 422."""
    api = _api(server)
    for bad in ("-1", "30001", "1.5", "soon"):
        assert api.get("/v1/interrupts", params={"waitMs": bad}).status_code == 422, bad
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(_api(server).get, "/v1/interrupts", params={"workflow": "one_choice", "waitMs": 10_000})
        time.sleep(0.3)
        assert not waiting.done()
        run_id = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}}).json()["runId"]
        page = waiting.result(15).json()
    assert [i["runId"] for i in page["items"]] == [run_id]


def test_every_v1_route_needs_a_key_and_health_does_not(server: Server) -> None:
    """No key or a wrong one is 401 on every /v1 route; /healthz answers without one."""
    with httpx.Client(base_url=server.url, timeout=10) as anonymous, _api(server, "wrong-key") as wrong:
        assert anonymous.get("/healthz").json() == {"redis": "ok"}
        for method, path in (("GET", "/v1/interrupts"), ("GET", "/v1/runs/run_x"), ("POST", "/v1/resume"),
                             ("POST", "/v1/runs"), ("GET", "/v1/runs/run_x/events"),
                             ("POST", "/v1/runs/run_x/cancel")):
            assert anonymous.request(method, path).status_code == 401, path
            assert wrong.request(method, path).status_code == 401, path


def test_resume_says_what_happened_with_its_status_code(server: Server) -> None:
    """422 for an answer that does not fit (the interrupt stays open), 200 accepted (the same answer
    again too), 409 already resolved (another answer), 404 for a token nobody signed, 422 for a
    malformed one; the responder is the caller."""
    api = _api(server)
    created = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}})
    assert created.status_code == 201
    run_id = created.json()["runId"]
    run = _wait_status(api, run_id, "waiting")
    assert run["interrupt"]["request"]["question"] == "Pick a color" and "runId" in run
    token, request_id = _token(api, run_id)
    bad = api.post("/v1/resume", json={"token": token, "selected": "green"})
    assert bad.status_code == 422 and "green" in bad.json()["detail"] and token not in bad.text
    assert _token(api, run_id)[0] == token
    ok = api.post("/v1/resume", json={"token": token, "requestId": request_id, "selected": "red"})
    assert ok.status_code == 200 and ok.json()["outcome"] == "accepted"
    again = api.post("/v1/resume", json={"token": token, "selected": "red"})  # a retry: the same answer
    assert again.status_code == 200 and again.json()["outcome"] == "accepted"
    other = api.post("/v1/resume", json={"token": token, "selected": "blue"})
    assert other.status_code == 409 and other.json()["outcome"] == "already_resolved"
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    assert api.post("/v1/resume", json={"token": forged, "selected": "red"}).status_code == 404
    assert api.post("/v1/resume", json={"token": "nope", "selected": "red"}).status_code == 422
    done = _wait_status(api, run_id, "completed")
    assert done["output"]["painted"] == "red"
    events = list(_sse(server, run_id))
    resumed = [data for kind, data in events if kind == "interrupt.resumed"][0]
    assert resumed["responder"] == "machine"


def test_a_user_answers_as_themselves(server: Server) -> None:
    """A user's key answers (a run of its tenant) under the user's name, whatever responder the body claims."""
    api, person = _api(server), _api(server, USER_KEY)
    run = {"workflow": "tests.flows:one_choice", "input": {}, "tenant": "acme"}
    run_id = api.post("/v1/runs", json=run).json()["runId"]
    _wait_status(api, run_id, "waiting")
    token, _ = _token(api, run_id)
    answered = person.post("/v1/resume", json={"token": token, "selected": "red", "responder": "the-boss"})
    assert answered.status_code == 200
    _wait_status(api, run_id, "completed")
    resumed = [data for kind, data in _sse(server, run_id) if kind == "interrupt.resumed"][0]
    assert resumed["responder"] == "user:ana"


def test_an_expired_interrupt_is_410_and_an_unknown_run_404(server: Server) -> None:
    """A token whose pause is past its TTL answers 410; a run nobody started 404."""
    api = _api(server)
    # 2 s: listed while pending even when a loaded machine is slow to park it
    created = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {"ttl_ms": 2000}})
    run_id = created.json()["runId"]
    _wait_status(api, run_id, "waiting")
    token, _ = _token(api, run_id)
    time.sleep(2.2)
    assert api.post("/v1/resume", json={"token": token, "selected": "red"}).status_code == 410
    assert api.get("/v1/runs/run_never_started").status_code == 404
    assert api.post("/v1/runs", json={"workflow": "this:s"}).status_code == 422


def _sse(server: Server, run_id: str, last_event_id: str | None = None, stop_at: str | None = None
         ) -> Iterator[tuple[str, dict[str, Any]]]:
    headers = {"Authorization": f"Bearer {KEY}", **({"Last-Event-ID": last_event_id} if last_event_id else {})}
    with httpx.stream("GET", f"{server.url}/v1/runs/{run_id}/events", headers=headers, timeout=20) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        frame: dict[str, str] = {}
        for line in response.iter_lines():
            if line.startswith(":"):
                continue
            if not line:
                if frame:
                    yield frame["event"], {**json.loads(frame["data"]), "_id": frame["id"]}
                    if frame["event"] == stop_at:
                        return
                frame = {}
                continue
            name, _, value = line.partition(": ")
            frame[name] = value


def test_an_event_stream_resumes_after_a_dropped_connection(server: Server) -> None:
    """A client drops the stream at the interrupt and reconnects with Last-Event-ID: it gets the
    events after that one, none twice, through done."""
    api = _api(server)
    run_id = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}}).json()["runId"]
    first = list(_sse(server, run_id, stop_at="interrupt"))  # the connection closes here
    kinds = [k for k, _ in first]
    assert kinds[0] == "run.started" and kinds[-1] == "interrupt" and "resumeToken" in first[-1][1]
    token = first[-1][1]["resumeToken"]
    assert api.post("/v1/resume", json={"token": token, "selected": "blue"}).status_code == 200
    rest = list(_sse(server, run_id, last_event_id=first[-1][1]["_id"]))
    assert [k for k, _ in rest][0] == "interrupt.resumed" and rest[-1][0] == "done"
    assert not {d["_id"] for _, d in first} & {d["_id"] for _, d in rest}
    assert api.get(f"/v1/runs/{run_id}/events", params={"after": "x; DROP"}).status_code == 422


def test_cancel_and_the_openapi_document(server: Server) -> None:
    """Cancelling a waiting run ends it and says so (status cancelled, as the run then reads); the
    OpenAPI document lists every route."""
    api = _api(server)
    run_id = api.post("/v1/runs", json={"workflow": "tests.flows:denial", "input": {}}).json()["runId"]
    _wait_status(api, run_id, "waiting")
    cancelled = api.post(f"/v1/runs/{run_id}/cancel", json={"reason": "no"})
    assert cancelled.status_code == 200
    assert cancelled.json() == {"outcome": "cancelled", "runId": run_id, "status": "cancelled"}
    assert api.get(f"/v1/runs/{run_id}").json()["status"] == "cancelled"
    paths = set(api.get("/openapi.json").json()["paths"])
    assert {"/v1/runs", "/v1/runs/{run_id}", "/v1/runs/{run_id}/events", "/v1/interrupts", "/v1/resume"} <= paths


def test_the_app_closes_its_own_redis_connections_when_it_shuts_down(
    redis_url: str, redis_client: redis.Redis, closing: Closing
) -> None:
    """The connection an event stream read through goes when the stream ends (nothing is left for the
    app's shutdown to close); the Parkway the app was given stays open (its owner closes it)."""
    import asyncio

    from parkway import Parkway, Settings
    from parkway.http.app import create_app
    from tests.test_secret import _connections

    pw = closing(Parkway(Settings(redis_url=redis_url, secret=SECRET)))
    run_id = pw.start(flows.one_choice, {})
    pw.cancel(run_id)  # its stream ends at done
    before = _connections(redis_client)

    async def serve_one_stream() -> None:
        # the app's lifespan, driven as a server drives it, around one request through ASGI
        app = create_app(pw)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://parkway") as client:
                body = (await client.get(f"/v1/runs/{run_id}/events")).text
            assert "event: done" in body
            assert _connections(redis_client) == before

    asyncio.run(serve_one_stream())
    assert _connections(redis_client) == before
    assert pw.get_run(run_id).status.value == "cancelled"


def test_tokens_never_reach_the_server_log(redis_url: str, redis_client: redis.Redis) -> None:
    """After runs are started, listed with tokens, streamed and resumed, no token is in the log."""
    srv = Server(redis_url)
    worker = Worker(redis_url, SECRET)
    try:
        api = _api(srv)
        run_id = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}}).json()["runId"]
        _wait_status(api, run_id, "waiting")
        token, _ = _token(api, run_id)
        api.post("/v1/resume", json={"token": token, "selected": "nope"})
        api.post("/v1/resume", json={"token": token, "selected": "red"})
        list(_sse(srv, run_id))
    finally:
        worker.stop()
        log = srv.stop()
    assert "POST /v1/resume" in log  # the access log is on
    assert token not in log and token.split(".")[-1] not in log


def test_answer_links_confirm_on_get_answer_once_on_post(server: Server, redis_url: str, closing: Closing) -> None:
    """A GET of a link shows its option and changes nothing; its POST answers; a second use, or
    another option's link, says already answered; a tampered link is refused; an expired one says so."""
    from parkway import Parkway, Settings

    api = _api(server)
    pw = closing(Parkway(Settings(redis_url=redis_url, secret=SECRET)))
    run_id = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}}).json()["runId"]
    _wait_status(api, run_id, "waiting")
    token, _ = _token(api, run_id)
    urls = pw.answer_links(token, server.url, responder="ana@example.com")
    assert set(urls) == {"red", "blue"} and all(token not in u for u in urls.values())
    with httpx.Client(timeout=15) as browser:
        page = browser.get(urls["blue"])
        assert page.status_code == 200 and "Blue" in page.text and "<form method='post'>" in page.text
        assert api.get(f"/v1/runs/{run_id}").json()["status"] == "waiting"  # a GET never answers
        assert browser.post(urls["blue"]).status_code == 200
        assert "already answered" in browser.post(urls["blue"]).text
        assert "already answered" in browser.get(urls["red"]).text
        head, _, tail = urls["red"].rpartition("/a/")
        tampered = head + "/a/" + tail.replace(tail[5], "A" if tail[5] != "A" else "B", 1)
        assert browser.get(tampered).status_code == 404
        # well-formed, unexpired, for a still-open option's shape — but signed with another key
        run_part, request_part, _ = token.split(".")
        foreign = links.mint(b"another deployment's key" * 2,
                             links.AnswerLink(run_part, request_part, "red", 2**42, None))
        assert browser.post(f"{server.url}/a/{foreign}").status_code == 404
        done = _wait_status(api, run_id, "completed")
        assert done["output"]["painted"] == "blue"
        resumed = [d for k, d in _sse(server, run_id) if k == "interrupt.resumed"][0]
        assert resumed["responder"] == "ana@example.com"

        other = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}}).json()["runId"]
        _wait_status(api, other, "waiting")
        short = pw.answer_links(_token(api, other)[0], server.url, ttl_ms=1000)
        time.sleep(1.1)
        assert browser.post(short["red"]).status_code == 410
        assert api.get(f"/v1/runs/{other}").json()["status"] == "waiting"


def test_more_than_a_hundred_streams_stay_open_and_resumes_still_answer(redis_url: str, redis_client: redis.Redis
                                                                        ) -> None:
    """120 event streams open at once, from two keys (redis-py's asyncio pool held 100 by default)
    all stay open, and a resume meanwhile is accepted."""

    with serving(redis_url, f",{hash_key(OTHER_KEY)}=machine") as server:
        _many_streams(server)


OTHER_KEY = "other-machine-key-" + "o" * 24


def _many_streams(server: Server) -> None:
    import asyncio

    api = _api(server)
    runs = [api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}}).json()["runId"]
            for _ in range(3)]
    for run_id in runs:
        _wait_status(api, run_id, "waiting")
    token, _ = _token(api, runs[0])

    async def scenario() -> tuple[int, int]:
        headers = {"Authorization": f"Bearer {KEY}"}
        opened: list[int] = []
        # one client per key, each stream on a connection of its own (no pool limit): a client per
        # stream would build 120 TLS contexts, seconds of CPU on a machine the tests share
        unpooled = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        clients = [httpx.AsyncClient(timeout=None, limits=unpooled, headers={"Authorization": f"Bearer {key}"})
                   for key in (KEY, OTHER_KEY)]

        async def hold(run_id: str, client: httpx.AsyncClient) -> None:
            async with client.stream("GET", f"{server.url}/v1/runs/{run_id}/events") as r:
                opened.append(r.status_code)
                async for _ in r.aiter_lines():
                    pass

        tasks = [asyncio.create_task(hold(runs[1 + i % 2], clients[i % 2])) for i in range(120)]
        deadline = time.monotonic() + 60  # opening them all takes seconds on a busy machine
        while len(opened) < 120 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.5)  # past a keep-alive round
        async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=15) as client:
            status = (await client.post("/v1/resume", json={"token": token, "selected": "red"})).status_code
        alive = sum(1 for t in tasks if not t.done())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for client in clients:
            await client.aclose()
        assert opened.count(200) == 120
        return status, alive

    status, alive = asyncio.run(scenario())
    assert status == 200 and alive == 120


def test_a_body_over_the_bound_is_refused_before_it_is_read(server: Server) -> None:
    """A 3 MiB body is refused with 413 whether it declares its length or streams in chunks."""
    api = _api(server)
    big = b'{"workflow": "tests.flows:one_choice", "input": {"x": "' + b"y" * (3 << 20) + b'"}}'
    assert api.post("/v1/runs", content=big, headers={"Content-Type": "application/json"}).status_code == 413

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(big), 65536):
            yield big[i : i + 65536]

    assert api.post("/v1/runs", content=chunks(), headers={"Content-Type": "application/json"}).status_code == 413
    assert api.get("/healthz").status_code == 200


def test_a_user_key_never_reads_resume_tokens(server: Server) -> None:
    """A user's key may list interrupts and follow a run, but gets no resume token: 403 for
    tokens=true, and interrupt events without resumeToken."""
    api, person = _api(server), _api(server, USER_KEY)
    run_id = person.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}}).json()["runId"]
    _wait_status(api, run_id, "waiting")
    assert person.get("/v1/interrupts", params={"tokens": "true"}).status_code == 403
    listed = person.get("/v1/interrupts", params={"runId": run_id}).json()["items"][0]
    assert listed.get("resumeToken") is None
    headers = {"Authorization": f"Bearer {USER_KEY}"}
    data = ""
    with httpx.stream("GET", f"{server.url}/v1/runs/{run_id}/events", headers=headers, timeout=10) as response:
        after_interrupt = False
        for line in response.iter_lines():
            if after_interrupt and line.startswith("data: "):
                data = line
                break
            after_interrupt = after_interrupt or line == "event: interrupt"
    assert "requestId" in data and "resumeToken" not in data, data


def test_a_contract_interrupt_never_shows_where_its_contract_is_defined(server: Server) -> None:
    """A contract's ``module:attribute`` stays in the store for the resuming client: the listing, the
    interrupt, the run and the answer form over HTTP leave it out, and the answer is still checked
    against the contract (a wrong one: 422; a right one completes the run)."""
    api = _api(server)
    run_id = api.post("/v1/runs", json={"workflow": "tests.flows:contracted", "input": {"team": "ops"}}).json()["runId"]
    _wait_status(api, run_id, "waiting")
    listed = api.get("/v1/interrupts", params={"runId": run_id})
    request_id = listed.json()["items"][0]["requestId"]
    shown = [listed, api.get(f"/v1/interrupts/{request_id}", params={"runId": run_id}), api.get(f"/v1/runs/{run_id}"),
             api.get(f"/v1/interrupts/{request_id}/form", params={"runId": run_id})]
    assert all(r.status_code == 200 for r in shown), [r.text for r in shown]
    assert [r.request.url.path for r in shown if "contractRef" in r.text or "tests.flows:" in r.text] == []
    wrong = api.post(f"/v1/interrupts/{request_id}/answer", json={"runId": run_id, "value": {"job_id": "nightly"}})
    assert wrong.status_code == 422, wrong.text
    right = api.post(f"/v1/interrupts/{request_id}/answer", json={"runId": run_id, "value": {"job_id": "job-7"}})
    assert right.status_code == 200, right.text
    _wait_status(api, run_id, "completed")
