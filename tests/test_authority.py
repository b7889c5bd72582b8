"""Authority lives on records: every door of the HTTP API, for every key class, against runs and
sessions held by someone else, live and after their ids expired and were taken again; and the side
doors (a fork past a gate, a cursor, a stream held across expiry, resume-or-start after expiry).

One API server process and one worker for the module, with short TTLs, a short retention and a
short expiry grace; each
test makes its own runs and sessions (and the matrix is one test), so pytest-xdist may spread them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import redis

from parkway.http.app import hash_key
from tests.conftest import SECRET, Harness
from tests.procs import ROOT, WORKFLOWS, Worker, answers, free_port, wait_for

RETENTION_MS = 3000
GRACE_MS = 1000
"""how long a waiting run's records outlive its interrupt's expiry here (the reconciler records it
within a second or two): an unanswered run's id is free again a few seconds after it expired"""
THREE = "tests.flows_fork:three"
"""first -> second (asks a color: the gate) -> third"""
QUICK = "tests.flows_fork:quick"
"""completes at once: its records last its TTL, its summary the retention after (a waiting run's
records are kept a minute past their interrupt's expiry, for the reconciler)"""
ECHO = "tests.session_flows:echo"
ASKING = "tests.session_flows:asking"


@dataclass(frozen=True)
class Key:
    """An API key and the caller it maps to."""

    name: str
    role: str
    owner: str | None = None
    tenant: str | None = None

    @property
    def secret(self) -> str:
        return f"{self.name}-key-" + "k" * 24

    @property
    def config(self) -> str:
        return f"{hash_key(self.secret)}={self.role}:{self.owner or ''}:{self.tenant or ''}"


SYSTEM = Key("system", "system")
MACHINE = Key("machine", "machine")
ACME_MACHINE = Key("acme-machine", "machine", tenant="acme")
ADA = Key("ada", "user", "ada", "acme")
BOB = Key("bob", "user", "bob", "acme")
EVE = Key("eve", "user", "eve", "other")
ZED = Key("zed", "user", "zed", "other")
MATRIX_KEYS = (SYSTEM, MACHINE, ACME_MACHINE, ADA)
"""one key of each class: system, machine, machine bound to a tenant, user"""


class Deployment:
    """`parkway serve`'s app (uvicorn) and a worker, in processes of their own, on the test Redis."""

    def __init__(self, redis_url: str) -> None:
        self.port = free_port()
        self.log = tempfile.TemporaryFile()
        keys = ",".join(k.config for k in (SYSTEM, MACHINE, ACME_MACHINE, ADA, BOB, EVE, ZED))
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("PARKWAY_")},
               "PARKWAY_REDIS_URL": redis_url, "PARKWAY_SECRET": SECRET, "PYTHONPATH": str(ROOT),
               "PARKWAY_API_KEYS": keys, "PARKWAY_RETENTION_MS": str(RETENTION_MS), "PARKWAY_WORKFLOWS": WORKFLOWS,
               "PARKWAY_EXPIRY_GRACE_MS": str(GRACE_MS)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--factory", "parkway.http.app:app_from_env", "--port", str(self.port),
             "--host", "127.0.0.1"],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        self.worker = Worker(redis_url, SECRET, env={"PARKWAY_RETENTION_MS": str(RETENTION_MS),
                                                     "PARKWAY_EXPIRY_GRACE_MS": str(GRACE_MS)})
        self.clients: dict[str, httpx.Client] = {}
        try:
            wait_for(self._up, 90, "the API server to answer")  # (a loaded machine starts it slowly)
        except BaseException:
            self.stop()  # no server or worker outlives a failed start
            raise

    def _up(self) -> bool:
        assert self.proc.poll() is None, self.output()
        return answers(self.url)

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def api(self, key: Key) -> httpx.Client:
        if key.name not in self.clients:
            self.clients[key.name] = httpx.Client(
                base_url=self.url, headers={"Authorization": f"Bearer {key.secret}"}, timeout=15
            )
        return self.clients[key.name]

    def stop(self) -> None:
        for client in self.clients.values():
            client.close()
        self.worker.stop()
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.log.close()


@pytest.fixture(scope="module")
def deployment(redis_url: str) -> Iterator[Deployment]:
    found = Deployment(redis_url)
    try:
        yield found
    finally:
        found.stop()


@pytest.fixture
def dep(deployment: Deployment, redis_client: redis.Redis) -> Deployment:
    """The module's deployment, on a test database emptied for this test."""
    return deployment


def _unique(prefix: str) -> str:
    return f"{prefix}-{time.monotonic_ns() % 10**12:x}"


# --- runs and sessions to aim at ----------------------------------------------------------------


@dataclass
class Target:
    """A run (waiting at the gate) or a session, and who holds it now."""

    id: str
    holder: Key
    request_id: str = ""
    token: str = ""


def _start(dep: Deployment, holder: Key, run_id: str, ttl_ms: int, workflow: str = THREE) -> str:
    """Start a run named ``run_id`` as ``holder``; its id (scoped by the holder's tenant: ``acme~<name>``)."""
    body: dict[str, Any] = {"workflow": workflow, "input": {"a": 1, "b": 2} if workflow == QUICK else {},
                            "runId": run_id, "ttlMs": ttl_ms}
    started = dep.api(holder).post("/v1/runs", json=body)
    assert started.status_code == 201, started.text
    return str(started.json()["runId"])


def _parked(dep: Deployment, target: Target) -> Target:
    """The target once its run waits at the gate, with its request id and token (read as system)."""

    def listed() -> list[dict[str, Any]]:
        params = {"runId": target.id, "tokens": "true"}
        items: list[dict[str, Any]] = dep.api(SYSTEM).get("/v1/interrupts", params=params).json()["items"]
        return items

    item = wait_for(listed, 30, f"run {target.id} to park")[0]
    target.request_id, target.token = item["requestId"], item["resumeToken"]
    return target


def _gone(dep: Deployment, run_id: str) -> bool:
    return dep.api(SYSTEM).get(f"/v1/runs/{run_id}").status_code == 404


# --- the documented role table, as data (README "Who may do what") ------------------------------


def expected(key: Key, holder: Key | None, door: str) -> bool:
    """Whether ``key`` passes ``door`` of something ``holder`` started (None: a system caller, with
    no tenant): a key bound to a tenant reaches that tenant's only; a user what it owns, and for
    answers and listings also its tenant's runs no user owns."""
    tenant = holder.tenant if holder is not None else None
    owner = holder.owner if holder is not None and holder.role == "user" else None
    if door == "start":  # a key bound to a tenant starts in its own (the default for it)
        return key.tenant is None or tenant in (None, key.tenant)
    if key.tenant is not None and tenant != key.tenant:
        return False
    if key.role != "user":
        return True
    if door.startswith("session"):
        return owner == key.owner
    return owner == key.owner or (owner is None and door in ("answer", "restart", "list"))


Probe = Callable[[httpx.Client, Target], bool]
"""asks one door of a target; True when the door let the caller through"""


def _denied(response: httpx.Response) -> bool:
    """The answers a refusal gets: 401, 403, or 404 as for no such run or session (no oracle)."""
    if response.status_code in (401, 403):
        return True
    if response.status_code != 404:
        return False
    return response.json().get("error") in ("RunNotFound", "SessionNotFound", "InterruptNotFound")


def _reached(response: httpx.Response) -> bool:
    assert response.status_code < 500, response.text
    return not _denied(response)


def _answered(response: httpx.Response) -> bool:
    """An answer by token: refused reads as an unknown token (404), let through as an answer that
    does not fit (422: the interrupt stays open)."""
    assert response.status_code in (403, 404, 422), response.text
    return response.status_code == 422


def _stream_reached(api: httpx.Client, path: str) -> bool:
    with api.stream("GET", path) as response:
        if response.status_code != 200:
            response.read()
            return _reached(response)
        return True


def _paused_seen(api: httpx.Client, run_id: str) -> bool:
    """Whether the pause stream, read from the feed's start to its end, tells of ``run_id``."""
    with api.stream("GET", "/v1/interrupts/events", params={"after": "0"}) as response:
        if response.status_code != 200:
            response.read()
            return _reached(response)
        for line in response.iter_lines():
            if line in (": caught up", ": waiting"):
                return False
            if line.startswith("data: ") and json.loads(line[6:])["runId"] == run_id:
                return True
    return False


RUN_PROBES: dict[tuple[str, str], tuple[str, Probe]] = {
    ("POST", "/v1/runs"): ("start", lambda api, t: api.post("/v1/runs", json={
        "workflow": THREE, "input": {}, **({"tenant": t.holder.tenant} if t.holder.tenant else {})
    }).status_code == 201),
    ("GET", "/v1/runs/{run_id}"): ("read", lambda api, t: _reached(api.get(f"/v1/runs/{t.id}"))),
    ("GET", "/v1/runs"): ("read", lambda api, t: t.id in {
        r["runId"] for r in api.get("/v1/runs", params={"limit": 1000}).json()["items"]}),
    ("GET", "/v1/runs/{run_id}/events"): ("events", lambda api, t: _stream_reached(api, f"/v1/runs/{t.id}/events")),
    ("POST", "/v1/runs/{run_id}/fork"): ("fork", lambda api, t: _reached(
        api.post(f"/v1/runs/{t.id}/fork", json={"step": 0}))),
    ("GET", "/v1/interrupts"): ("list", lambda api, t: bool(
        api.get("/v1/interrupts", params={"runId": t.id}).json()["items"])),
    ("GET", "/v1/interrupts/events"): ("list", lambda api, t: _paused_seen(api, t.id)),
    ("GET", "/v1/interrupts/{request_id}"): ("list", lambda api, t: _reached(
        api.get(f"/v1/interrupts/{t.request_id}"))),
    # an answer that does not fit: 422 (the interrupt stays open) once the door lets the caller in
    ("POST", "/v1/resume"): ("answer", lambda api, t: _answered(
        api.post("/v1/resume", json={"token": t.token, "selected": "no-such-option"}))),
    ("POST", "/v1/resume-or-start"): ("restart", lambda api, t: _answered(
        api.post("/v1/resume-or-start", json={"token": t.token, "selected": "no-such-option"}))),
    ("POST", "/v1/interrupts/{request_id}/answer"): ("answer", lambda api, t: _answered(
        api.post(f"/v1/interrupts/{t.request_id}/answer", json={"runId": t.id, "selected": "no-such-option"}))),
    # the gate asks no contract: 422 once the door lets the caller in
    ("GET", "/v1/interrupts/{request_id}/form"): ("answer", lambda api, t: _reached(
        api.get(f"/v1/interrupts/{t.request_id}/form", params={"runId": t.id}))),
    ("GET", "/v1/interrupts/{request_id}/widget"): ("answer", lambda api, t: _reached(
        api.get(f"/v1/interrupts/{t.request_id}/widget", params={"runId": t.id}))),
    ("POST", "/v1/runs/{run_id}/cancel"): ("cancel", lambda api, t: _reached(
        api.post(f"/v1/runs/{t.id}/cancel", json={}))),
}
"""the run routes and how each is asked; cancel last (it ends the runs the others read)"""

SESSION_PROBES: dict[tuple[str, str], tuple[str, Probe]] = {
    ("POST", "/v1/sessions"): ("session-open", lambda api, t: api.post("/v1/sessions", json={
        "agent": ECHO, "owner": t.holder.owner, "tenant": t.holder.tenant}).status_code == 201),
    ("GET", "/v1/sessions/{session_id}"): ("session", lambda api, t: _reached(api.get(f"/v1/sessions/{t.id}"))),
    ("GET", "/v1/sessions/{session_id}/events"): ("session", lambda api, t: _reached(
        api.get(f"/v1/sessions/{t.id}/events"))),
    ("GET", "/v1/sessions/{session_id}/stream"): ("session", lambda api, t: _stream_reached(
        api, f"/v1/sessions/{t.id}/stream")),
    ("POST", "/v1/sessions/{session_id}/messages/{message_id}/edit"): ("session", lambda api, t: _reached(
        api.post(f"/v1/sessions/{t.id}/messages/no-such/edit", json={"content": "x"}))),
    ("POST", "/v1/sessions/{session_id}/switch"): ("session", lambda api, t: _reached(
        api.post(f"/v1/sessions/{t.id}/switch", json={"head": ""}))),
    ("POST", "/v1/sessions/{session_id}/resume"): ("session", lambda api, t: _reached(
        api.post(f"/v1/sessions/{t.id}/resume", json={"type": "interrupt.resume", "interrupt_id": "no-such"}))),
    ("POST", "/v1/sessions/{session_id}/tools/{tool_call_id}"): ("session", lambda api, t: _reached(
        api.post(f"/v1/sessions/{t.id}/tools/no-such", json={"result": 1}))),
    ("POST", "/v1/sessions/{session_id}/messages"): ("session", lambda api, t: _reached(
        api.post(f"/v1/sessions/{t.id}/messages", json={"content": "hi"}))),
    ("POST", "/v1/sessions/{session_id}/interrupts"): ("session", lambda api, t: _reached(
        api.post(f"/v1/sessions/{t.id}/interrupts", json={"reason": "stop"}))),
}
"""the session routes; the ones that park or change a session last"""

OUTSIDE: dict[tuple[str, str], str] = {
    ("GET", "/healthz"): "no key: says whether Redis answers, nothing of any run",
    ("GET", "/metrics"): "deployment counters: a metrics key or an unbound system key (auth-http's)",
    ("GET", "/v1/me"): "the key's own caller (role, owner, tenant), nothing of any run",
    ("GET", "/a/{link}"): "an answer link is a capability of its own (signed, one option, expiring)",
    ("POST", "/a/{link}"): "the same link's answer",
    ("POST", "/slack/interactions"): "Slack's signature is its key; it answers as the Slack user's mapped caller, "
    "through the answer route's check (tests/test_slack.py)",
}
"""routes that reach no run or session by id: outside the matrix, each with why"""


def test_every_route_of_the_openapi_document_is_in_the_matrix(dep: Deployment) -> None:
    """The matrix covers every operation the server's OpenAPI document lists (a new route fails here
    until it says which door it is)."""
    document = dep.api(SYSTEM).get("/openapi.json").json()
    operations = {(method.upper(), path) for path, item in document["paths"].items() for method in item}
    assert operations == set(RUN_PROBES) | set(SESSION_PROBES) | set(OUTSIDE)


def _run_targets(dep: Deployment, ttl_ms: int, *, park: bool = True) -> dict[str, Target]:
    """One run per holder: a user (ada, bob, eve), a machine bound to acme, a system caller with no
    tenant; waiting at the gate (``park``), else one that ends at once (its id soon free again)."""
    holders: dict[str, Key] = {"ada": ADA, "bob": BOB, "acme-machine": ACME_MACHINE, "eve": EVE, "none": SYSTEM}
    out = {}
    for name, holder in holders.items():
        run_id = _start(dep, holder, _unique(f"r-{name}"), ttl_ms, THREE if park else QUICK)
        out[name] = Target(run_id, holder)
    return {name: _parked(dep, target) for name, target in out.items()} if park else out


def _session_targets(dep: Deployment, ttl_ms: int) -> dict[str, Target]:
    out = {}
    for holder in (ADA, BOB, EVE):
        opened = dep.api(holder).post("/v1/sessions", json={"agent": ECHO, "sessionId": _unique(f"s-{holder.name}"),
                                                            "ttlMs": ttl_ms})
        assert opened.status_code == 201, opened.text
        out[holder.name] = Target(opened.json()["sessionId"], holder)
    return out


REOPENED_BY = {"ada": BOB, "bob": ADA, "acme-machine": BOB, "eve": ZED, "none": MACHINE}
"""after a target's id expired, who takes it again: someone else of its scope (a tenant's ids are
``<tenant>~<name>``, which no other tenant's key can take; an id of no tenant, a key of none)"""


def _reopen(dep: Deployment, runs: dict[str, Target], sessions: dict[str, Target]) -> None:
    """Once the targets' records and summaries are gone, their ids are taken again by someone else."""
    wait_for(lambda: all(_gone(dep, t.id) for t in runs.values()), 30, "the runs' summaries to expire")
    wait_for(lambda: all(dep.api(SYSTEM).get(f"/v1/sessions/{t.id}").status_code == 404 for t in sessions.values()),
             30, "the sessions to expire")
    for name, target in runs.items():
        target.holder = REOPENED_BY[name]
        _start(dep, target.holder, target.id, 60_000)
    for target in runs.values():
        _parked(dep, target)
    for name, target in sessions.items():
        target.holder = REOPENED_BY[name]
        opened = dep.api(target.holder).post("/v1/sessions", json={"agent": ECHO, "sessionId": target.id})
        assert opened.status_code == 201, opened.text


def _walk(dep: Deployment, probes: dict[tuple[str, str], tuple[str, Probe]], targets: dict[str, Target],
          time_label: str, cells: list[str], failures: list[str]) -> None:
    """Every probe on every target as every key; the targets side by side (one thread each: their
    cells touch nothing of each other's), each target's probes in order (cancel last)."""
    with ThreadPoolExecutor(len(targets)) as pool:
        for done in [pool.submit(_walk_one, dep, probes, name, t, time_label) for name, t in targets.items()]:
            seen, wrong = done.result()
            cells += seen
            failures += wrong


def _walk_one(dep: Deployment, probes: dict[tuple[str, str], tuple[str, Probe]], target_name: str,
              target: Target, time_label: str) -> tuple[list[str], list[str]]:
    cells: list[str] = []
    failures: list[str] = []
    with httpx.Client(base_url=dep.url, timeout=30) as http:
        for route, (door, probe) in probes.items():
            for key in MATRIX_KEYS:
                holder = None if target.holder is SYSTEM else target.holder
                want = expected(key, holder, door)
                http.headers["Authorization"] = f"Bearer {key.secret}"
                got = probe(http, target)
                cells.append(f"{route} {key.name} {target_name} {time_label}")
                if got != want:
                    failures.append(f"{route[0]} {route[1]} as {key.name} on {target_name}'s ({time_label}, held by "
                                    f"{target.holder.name}): {'reached' if got else 'refused'}, the table says "
                                    f"{'reach' if want else 'refuse'}")
    return cells, failures


@pytest.mark.timeout(300)  # 600 requests and two waits for expiry: ~15 s idle, more on a loaded machine
def test_the_authorization_matrix_holds_for_live_and_reopened_ids(dep: Deployment) -> None:
    """Every run and session route x every key class x targets held by the key itself, another owner
    of its tenant, another tenant and no tenant x (live; expired and taken again by someone else):
    each key reaches exactly what the role table says, by who holds the id now."""
    live_runs, live_sessions = _run_targets(dep, 60_000), _session_targets(dep, 60_000)
    old_runs, old_sessions = _run_targets(dep, 1000, park=False), _session_targets(dep, 1000)
    cells: list[str] = []
    failures: list[str] = []
    _walk(dep, RUN_PROBES, live_runs, "live", cells, failures)
    _walk(dep, SESSION_PROBES, live_sessions, "live", cells, failures)
    _reopen(dep, old_runs, old_sessions)
    _walk(dep, RUN_PROBES, old_runs, "reopened", cells, failures)
    _walk(dep, SESSION_PROBES, old_sessions, "reopened", cells, failures)
    assert len(cells) == (len(RUN_PROBES) * 5 + len(SESSION_PROBES) * 3) * len(MATRIX_KEYS) * 2
    assert not failures, f"{len(failures)} of {len(cells)} cells:\n" + "\n".join(failures)


# --- the side doors ----------------------------------------------------------------------------


def _head(api: httpx.Client, sid: str) -> str:
    body = api.get(f"/v1/sessions/{sid}").json()
    return next((m["content"] for m in body["messages"] if m["id"] == body["head"]), "")


def test_an_answered_question_stays_its_owners_after_her_session_expires_and_its_id_is_reopened(
    dep: Deployment,
) -> None:
    """Finding 1: ada answers her session's question; once the session expired, bob (same tenant)
    neither lists it among resolved interrupts (cursors walked to the end), nor reads it by request
    id, nor reaches her branch run after re-opening the session id himself."""
    ada, bob = dep.api(ADA), dep.api(BOB)
    # (3 s: long enough to answer on a loaded machine, short enough to wait for)
    opened = ada.post("/v1/sessions", json={"agent": ASKING, "sessionId": _unique("s-ssn"), "ttlMs": 3000})
    assert opened.status_code == 201
    sid = opened.json()["sessionId"]
    run_id = ada.post(f"/v1/sessions/{sid}/messages", json={"content": "What is your SSN"}).json()["runId"]
    wait_for(lambda: ada.get(f"/v1/sessions/{sid}").json()["parkedBy"], 20, "the question")
    request_id = dep.api(SYSTEM).get("/v1/interrupts", params={"runId": run_id}).json()["items"][0]["requestId"]
    answer = {"type": "interrupt.resume", "interrupt_id": request_id, "payload": "078-05-1120"}
    assert ada.post(f"/v1/sessions/{sid}/resume", json=answer).status_code == 200
    wait_for(lambda: ada.get(f"/v1/sessions/{sid}").status_code == 404, 20, "the session to expire")
    assert dep.api(SYSTEM).get(f"/v1/interrupts/{request_id}").status_code == 200  # (its summary is left)
    seen, cursor = [], None
    for _ in range(50):
        page = bob.get("/v1/interrupts", params={"status": "resolved", "limit": 1, **({"cursor": cursor} if cursor
                                                                                       else {})}).json()
        seen += page["items"]
        assert run_id not in str(page.get("nextCursor")) and request_id not in str(page.get("nextCursor"))
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert all(item["runId"] != run_id for item in seen)
    assert bob.get(f"/v1/interrupts/{request_id}").status_code == 404
    assert bob.post("/v1/sessions", json={"agent": ECHO, "sessionId": sid}).status_code == 201
    assert bob.get(f"/v1/runs/{run_id}").status_code == 404
    assert bob.get(f"/v1/interrupts/{request_id}").status_code == 404
    assert ada.get(f"/v1/runs/{run_id}").status_code == 200  # hers still, by the owner written on it


def test_a_tampered_or_foreign_cursor_is_refused(dep: Deployment) -> None:
    """Finding 10: cursors are opaque and signed: one changed in transit, or made up from ids, is a 422."""
    system = dep.api(SYSTEM)
    for _ in range(2):
        _start(dep, ADA, _unique("r-page"), 60_000)
    page = wait_for(lambda: (p := system.get("/v1/interrupts", params={"limit": 1}).json())["nextCursor"] and p,
                    30, "two pauses")
    cursor = page["nextCursor"]
    assert system.get("/v1/interrupts", params={"limit": 1, "cursor": cursor}).status_code == 200
    tampered = cursor[:-2] + ("A" if cursor[-2] != "A" else "B") + cursor[-1]
    assert system.get("/v1/interrupts", params={"limit": 1, "cursor": tampered}).status_code == 422
    made_up = "n.0000000000001:0000000000001:three:r-x:i1_x"
    assert system.get("/v1/interrupts", params={"limit": 1, "cursor": made_up}).status_code == 422


def test_a_session_stream_ends_with_its_session_and_never_shows_the_next_holder_of_its_id(dep: Deployment) -> None:
    """Finding 2: ada holds a stream on her session; it expires and bob (her tenant, so the same id)
    opens the same id and sends a card number: ada's stream ends, and shows nothing of bob's session."""
    ada, bob = dep.api(ADA), dep.api(BOB)
    opened = ada.post("/v1/sessions", json={"agent": ECHO, "sessionId": _unique("s-support"), "ttlMs": 1000})
    assert opened.status_code == 201
    sid = opened.json()["sessionId"]
    lines: list[str] = []
    ended = threading.Event()

    def hold() -> None:
        with httpx.stream("GET", f"{dep.url}/v1/sessions/{sid}/stream", timeout=30,
                          headers={"Authorization": f"Bearer {ADA.secret}"}) as response:
            for line in response.iter_lines():
                lines.append(line)
        ended.set()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    wait_for(lambda: any("session.opened" in line for line in lines), 60, "ada's stream to open")
    wait_for(lambda: ada.get(f"/v1/sessions/{sid}").status_code == 404, 20, "the session to expire")
    assert bob.post("/v1/sessions", json={"agent": ECHO, "sessionId": sid}).json()["sessionId"] == sid
    assert bob.post(f"/v1/sessions/{sid}/messages", json={"content": "card 4111 1111 1111 1111"}).status_code == 201
    wait_for(lambda: _head(bob, sid) == "you said card 4111 1111 1111 1111", 20, "bob's reply")
    assert ended.wait(20), "ada's stream outlived her session"
    assert not any("card 4111" in line or '"owner": "bob"' in line for line in lines), lines


def test_a_fork_past_an_answered_interrupt_asks_again_unless_the_caller_is_system(dep: Deployment) -> None:
    """Finding 3: a run passed its gate with a machine's answer; a fork of a later step by its owner
    (a user) or by a machine re-opens the gate, which asks again, with the fork's input laid over;
    a system caller's fork goes on from the step it names."""
    ada, machine, system = dep.api(ADA), dep.api(MACHINE), dep.api(SYSTEM)
    run_id = _start(dep, ADA, _unique("r-gate"), 60_000)
    gate = _parked(dep, Target(run_id, ADA))
    assert machine.post("/v1/resume", json={"token": gate.token, "selected": "red"}).status_code == 200
    wait_for(lambda: ada.get(f"/v1/runs/{run_id}").json()["status"] == "completed", 20, "the run to pass its gate")
    forked = ada.post(f"/v1/runs/{run_id}/fork", json={"step": 2, "input": {"x": 999}})
    assert forked.status_code == 201, forked.text
    assert forked.json()["forkedFrom"] == {"runId": run_id, "step": 1}
    again = forked.json()["runId"]
    waiting = wait_for(lambda: (r := ada.get(f"/v1/runs/{again}").json())["status"] == "waiting" and r, 20,
                       "the fork to ask again")
    assert waiting["node"] == "second" and waiting["data"]["x"] == 999
    for key in (MACHINE, ACME_MACHINE):  # a machine is no system caller: it re-opens the gate too
        by_machine = dep.api(key).post(f"/v1/runs/{run_id}/fork", json={"step": 2, "input": {"x": 7}})
        assert by_machine.status_code == 201, by_machine.text
        assert by_machine.json()["forkedFrom"] == {"runId": run_id, "step": 1}, key
    by_system = system.post(f"/v1/runs/{run_id}/fork", json={"step": 2})
    assert by_system.json()["forkedFrom"] == {"runId": run_id, "step": 2}
    done = by_system.json()["runId"]
    wait_for(lambda: system.get(f"/v1/runs/{done}").json()["status"] == "completed", 20, "the system's fork")


def test_a_fork_lays_input_over_a_run_only_for_a_caller_of_its_starters_rank(dep: Deployment) -> None:
    """Finding 3: a machine may fork a system caller's run of its tenant, but not lay input over it."""
    started = dep.api(SYSTEM).post("/v1/runs", json={"workflow": THREE, "input": {}, "runId": _unique("r-sys"),
                                                     "tenant": "acme"})
    assert started.status_code == 201
    run_id = started.json()["runId"]
    acme = dep.api(ACME_MACHINE)
    assert acme.post(f"/v1/runs/{run_id}/fork", json={"step": 0, "input": {"x": 5}}).status_code == 403
    assert acme.post(f"/v1/runs/{run_id}/fork", json={"step": 0}).status_code == 201


PAYMENT = "tests.flows_fork:payment"
"""step 0 waits on an approval in a run below it (``gate`` says where); step 1 charges"""


def _approval_below(dep: Deployment, run_id: str) -> dict[str, Any]:
    """The approval a payment run waits on in a run below it, with its token (read as system)."""
    def listed() -> list[dict[str, Any]]:
        items = dep.api(SYSTEM).get("/v1/interrupts", params={"runId": run_id, "tokens": "true"}).json()["items"]
        return [i for i in items if i["workflow"] == "fork_approval"]

    found: dict[str, Any] = wait_for(listed, 30, f"{run_id}'s approval to be asked")[0]
    assert found["runId"] != run_id
    return found


@pytest.mark.parametrize("key", [ADA, ACME_MACHINE], ids=lambda k: k.name)
def test_a_fork_past_an_approval_in_a_run_below_asks_it_again(dep: Deployment, key: Key) -> None:
    """Issue 33: an approval answered in a child, a grandchild, a fan-out's child or a use_first
    race's child (of the run or of its child) gates its root's step; a user's or a tenant machine's
    fork past it with new input re-opens that step (forkedFrom.step 0), which asks the approval
    again and charges nothing."""
    from tests.flows_fork import GATES

    api, system = dep.api(key), dep.api(SYSTEM)
    runs = {}
    for gate in GATES:  # all started at once: the worker runs them side by side
        started = api.post("/v1/runs", json={"workflow": PAYMENT, "runId": _unique(f"pay-{gate}"),
                                             "input": {"gate": gate, "to": "shop", "amount": 10}})
        assert started.status_code == 201, started.text
        runs[gate] = started.json()["runId"]
    for run_id in runs.values():
        answered = system.post("/v1/resume", json={"token": _approval_below(dep, run_id)["resumeToken"],
                                                    "selected": "yes"})
        assert answered.status_code == 200, answered.text
    forks = {}
    for gate, run_id in runs.items():
        done = wait_for(lambda r=run_id: (got := api.get(f"/v1/runs/{r}").json())["status"] == "completed" and got,
                        30, f"{run_id} to charge")
        assert done["output"]["charged"] == {"to": "shop", "amount": 10}
        forked = api.post(f"/v1/runs/{run_id}/fork", json={"step": 1, "input": {"to": "attacker", "amount": 999999}})
        assert forked.status_code == 201, (gate, forked.text)
        forks[gate] = forked.json()
    assert {g: f["forkedFrom"]["step"] for g, f in forks.items()} == dict.fromkeys(GATES, 0)
    for gate, forked in forks.items():
        new = forked["runId"]
        waiting = wait_for(lambda n=new: (r := api.get(f"/v1/runs/{n}").json())["status"] == "waiting" and r, 30,
                           f"the fork of {gate} to ask again")
        assert waiting["node"] == "gate" and "charged" not in (waiting["data"] or {}), (gate, waiting)
        assert _approval_below(dep, new)


def test_resume_or_start_lays_input_over_a_run_only_for_a_caller_of_its_starters_rank(dep: Deployment) -> None:
    """Issue 33: the fork's rule at the restart door too: a tenant's machine may start a system
    caller's expired run again as it was, but not with input or a workflow of its own (403,
    nothing started); the run it starts is still the system caller's (its input: 403 again)."""
    system, acme = dep.api(SYSTEM), dep.api(ACME_MACHINE)
    started = system.post("/v1/runs", json={"workflow": THREE, "input": {}, "runId": _unique("r-sys"),
                                            "tenant": "acme", "ttlMs": 1000})
    assert started.status_code == 201, started.text
    run_id = started.json()["runId"]
    gate = _parked(dep, Target(run_id, SYSTEM))
    wait_for(lambda: system.get(f"/v1/runs/{run_id}").json()["status"] == "expired", 30, "the gate to expire")
    before = {r["runId"] for r in system.get("/v1/runs", params={"limit": 1000}).json()["items"]}
    for overlay in ({"input": {"x": 5}}, {"workflow": THREE}, {"input": {}, "workflow": THREE}):
        refused = acme.post("/v1/resume-or-start", json={"token": gate.token, "selected": "red", **overlay})
        assert refused.status_code == 403, (overlay, refused.text)
    assert {r["runId"] for r in system.get("/v1/runs", params={"limit": 1000}).json()["items"]} == before
    again = acme.post("/v1/resume-or-start", json={"token": gate.token, "selected": "red"})
    assert again.status_code == 201 and again.json()["restartedFrom"] == run_id, again.text
    new = again.json()["runId"]
    assert acme.post(f"/v1/runs/{new}/fork", json={"step": 0, "input": {"x": 5}}).status_code == 403
    by_system = system.post("/v1/resume-or-start", json={"token": gate.token, "selected": "red", "input": {"x": 5}})
    assert by_system.status_code == 201, by_system.text


def test_another_tenants_run_or_session_reads_exactly_as_one_that_never_existed(dep: Deployment) -> None:
    """Low (no existence oracle): eve gets the same answer, word for word but the id she asked for,
    for ada's run and session as for ids nobody used."""
    eve = dep.api(EVE)
    run_id = _start(dep, ADA, _unique("r-oracle"), 60_000)
    sid = dep.api(ADA).post("/v1/sessions", json={"agent": ECHO, "sessionId": _unique("s-oracle")}).json()["sessionId"]
    for path, unused in ((f"/v1/runs/{run_id}", "/v1/runs/never-used"), (f"/v1/runs/{run_id}", "/v1/runs/acme~never"),
                         (f"/v1/sessions/{sid}", "/v1/sessions/never-used"),
                         (f"/v1/sessions/{sid}", "/v1/sessions/acme~never")):
        theirs, nothing = eve.get(path), eve.get(unused)
        named = (path.rsplit("/", 1)[1], unused.rsplit("/", 1)[1])
        assert (theirs.status_code, theirs.text.replace(*named)) == (nothing.status_code, nothing.text), path


# --- the same rules through the Python client -----------------------------------------------------


def test_resume_or_start_keeps_the_tenant_of_a_run_whose_records_are_gone(harness: Harness) -> None:
    """Finding 4: once the expired run's records are past their TTL and only its summary is left,
    the run started in its place is the old one's tenant's (read from the summary), not nobody's."""
    from dataclasses import replace

    from parkway import Parkway
    from parkway.adapters.limits import Limits
    from parkway.runtime.clock import now_ms
    from tests import flows_fork

    # records kept 0.1 s past their 1 s interrupt (the least grace), so they expire in about a second
    settings = replace(harness.settings, limits=Limits(expiry_grace_ms=100))
    with Parkway(settings) as pw:
        short = Harness(harness.kind, pw, settings, harness.connection)
        run_id = pw.start(flows_fork.three, {}, tenant="acme", ttl_ms=1000)
        short.run_jobs()
        token = short.interrupt_event(run_id)["resumeToken"]
        wait_for(lambda: (left := pw.store.get_run(run_id, now_ms())) is not None and not left.ref, 10,
                 "the run's records to expire (its summary stays)")
        started = pw.resume_or_start(token, selected="red", workflow=flows_fork.three, input={})
        assert started.outcome == "started" and (started.run_id or "").startswith("acme~")
        new = pw.store.get_run(started.run_id or "", now_ms())
        assert new is not None and new.tenant == "acme"

def test_a_lower_origin_cannot_take_the_interrupt_id_a_higher_one_will_raise(harness: Harness) -> None:
    """Finding 5: ada raises 'stop' first; the system's 'stop' is still raised (ids live in their
    origin's namespace), and ada cannot clear it, only her own."""
    from parkway.errors import SessionDenied
    from parkway.runtime.authority import Caller
    from tests import session_flows

    ada = Caller("user", "ada", "acme")
    sid = harness.pw.sessions.open(session_flows.echo, owner="ada", tenant="acme", caller=ada)
    mine = harness.pw.sessions.raise_interrupt(sid, "my stop", caller=ada, interrupt_id="stop")
    theirs = harness.pw.sessions.raise_interrupt(sid, "compliance stop", caller=Caller("system"), interrupt_id="stop")
    assert (mine, theirs) == ("frontend-stop", "stop")
    with pytest.raises(SessionDenied):
        harness.pw.sessions.resume_interrupt(sid, "stop", caller=ada)
    assert harness.pw.sessions.resume_interrupt(sid, mine, caller=ada).outcome != "unknown"
    assert [i.id for i in harness.pw.sessions.get(sid).open_interrupts] == ["stop"]


def test_a_machine_stop_parks_every_branch_so_editing_the_anchored_message_does_not_escape_it(
    harness: Harness,
) -> None:
    """Low: a system or machine raise defaults to session scope: editing the message it would have
    been anchored at opens no unparked sibling branch."""
    from parkway.errors import BranchParked
    from parkway.runtime.authority import Caller
    from tests import session_flows

    ada = Caller("user", "ada", "acme")
    sid = harness.pw.sessions.open(session_flows.echo, owner="ada", tenant="acme", caller=ada)
    sent = harness.pw.sessions.send(sid, "hi", caller=ada)
    harness.run_jobs()
    harness.pw.sessions.raise_interrupt(sid, "fraud review", caller=Caller("machine", tenant="acme"))
    with pytest.raises(BranchParked):
        harness.pw.sessions.edit(sid, sent.message_id, "hi again", caller=ada)


def test_a_run_stream_ends_when_its_id_is_taken_by_another_run(dep: Deployment) -> None:
    """Finding 2, for runs: ada's run expires unanswered; she follows it from after its last event
    (a reconnect past its end); its records and summary expire and bob (her tenant: the same id)
    starts a run under it: her stream ends, showing none of his."""
    ada = dep.api(ADA)
    run_id = _start(dep, ADA, _unique("r-held"), 1000)
    wait_for(lambda: ada.get(f"/v1/runs/{run_id}").json().get("status") == "expired", 30, "the run to expire")
    with ada.stream("GET", f"/v1/runs/{run_id}/events") as response:
        last = [line[4:] for line in response.iter_lines() if line.startswith("id: ")][-1]
    lines: list[str] = []
    ended = threading.Event()

    def hold() -> None:
        with httpx.stream("GET", f"{dep.url}/v1/runs/{run_id}/events", params={"after": last}, timeout=30,
                          headers={"Authorization": f"Bearer {ADA.secret}"}) as response:
            for line in response.iter_lines():
                lines.append(line)
        ended.set()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    wait_for(lambda: lines, 20, "ada's stream to open")
    wait_for(lambda: _gone(dep, run_id), 30, "the run's records and summary to expire")
    started = dep.api(BOB).post("/v1/runs", json={"workflow": THREE, "input": {"card": "card 4111"}, "runId": run_id})
    assert started.status_code == 201 and started.json()["runId"] == run_id, started.text
    assert ended.wait(20), "ada's stream outlived her run"
    assert not any("card 4111" in line or line.startswith("id: ") for line in lines), lines


def test_the_pause_feed_never_tells_the_next_holder_of_an_id_of_the_last_ones_pauses(dep: Deployment) -> None:
    """The pause feed (``GET /v1/interrupts/events``) read from its start: ada's run pauses, expires
    and is gone; bob (her tenant: the same id) starts a run under it that pauses. Bob is told of his
    pause only, not of the one ada's run made under the same id (the feed's entries outlive runs)."""
    from tests.test_live_feeds import paused_until_caught_up

    # another tenant's run waits meanwhile, so the feed is not dropped as idle when ada's run is gone
    _parked(dep, Target(_start(dep, EVE, _unique("r-keep"), 60_000), EVE))
    run_id = _start(dep, ADA, _unique("r-fed"), 1000)
    wait_for(lambda: dep.api(ADA).get(f"/v1/runs/{run_id}").json().get("status") == "expired", 30, "the run to expire")
    wait_for(lambda: _gone(dep, run_id), 30, "the run's records and summary to expire")
    assert _start(dep, BOB, run_id, 60_000) == run_id
    _parked(dep, Target(run_id, BOB))
    told = [e["runId"] for e in paused_until_caught_up(dep.url, BOB.secret, after="0")]
    assert told.count(run_id) == 1, told


# --- ids are scoped by tenant --------------------------------------------------------------------


def test_tenants_that_choose_the_same_run_id_each_get_a_run_of_their_own(dep: Deployment) -> None:
    """Squatting: ada (acme) and eve (other) both start a run they call ``order-…``: each gets her own
    (``acme~order-…``, ``other~order-…``), reads, lists and answers only it, and the other's reads
    exactly as a run nobody started; naming the other tenant's scope is refused alike whether or
    not a run is there."""
    ada, eve = dep.api(ADA), dep.api(EVE)
    name = _unique("order")
    ada_id, eve_id = _start(dep, ADA, name, 60_000), _start(dep, EVE, name, 60_000)
    assert (ada_id, eve_id) == (f"acme~{name}", f"other~{name}")
    ada_run, eve_run = _parked(dep, Target(ada_id, ADA)), _parked(dep, Target(eve_id, EVE))
    theirs, nothing = eve.get(f"/v1/runs/{ada_id}"), eve.get(f"/v1/runs/acme~{name}x")
    assert (theirs.status_code, theirs.json()["error"]) == (nothing.status_code, nothing.json()["error"]) == (
        404, "RunNotFound")
    assert [i["runId"] for i in eve.get("/v1/interrupts", params={"runId": eve_id}).json()["items"]] == [eve_id]
    assert ada_id not in eve.get("/v1/interrupts", params={"limit": 200}).text
    again = {"workflow": THREE, "input": {}}
    refusals = [eve.post("/v1/runs", json={**again, "runId": taken}) for taken in (ada_id, f"acme~{name}x")]
    # another tenant's scope: the same refusal whether or not a run is there
    assert [(r.status_code, r.json()["error"]) for r in refusals] == [(422, "InvalidId")] * 2
    assert refusals[0].json()["detail"] == refusals[1].json()["detail"].replace(f"{name}x", name)
    assert eve.post("/v1/resume", json={"token": ada_run.token, "selected": "red"}).status_code == 404
    assert eve.post("/v1/resume", json={"token": eve_run.token, "selected": "red"}).json()["outcome"] == "accepted"
    wait_for(lambda: eve.get(f"/v1/runs/{eve_id}").json()["status"] == "completed", 20, "eve's run to pass its gate")
    assert ada.get(f"/v1/runs/{ada_id}").json()["status"] == "waiting"
    assert ada.get(f"/v1/runs/{ada_id}").json()["input"] == {}


def test_tenants_that_choose_the_same_session_id_each_get_a_session_of_their_own(dep: Deployment) -> None:
    """Squatting, for sessions: ada and eve both open ``support-…``: each gets her own, and eve's
    messages reach neither ada's session nor her stream; ada's reads to eve as one never opened."""
    ada, eve = dep.api(ADA), dep.api(EVE)
    name = _unique("support")
    opened = [who.post("/v1/sessions", json={"agent": ECHO, "sessionId": name}) for who in (ada, eve)]
    assert [o.status_code for o in opened] == [201, 201], [o.text for o in opened]
    ada_sid, eve_sid = (o.json()["sessionId"] for o in opened)
    assert (ada_sid, eve_sid) == (f"acme~{name}", f"other~{name}")
    assert eve.post(f"/v1/sessions/{eve_sid}/messages", json={"content": "card 4111"}).status_code == 201
    assert ada.post(f"/v1/sessions/{ada_sid}/messages", json={"content": "hello"}).status_code == 201
    wait_for(lambda: _head(eve, eve_sid) == "you said card 4111", 20, "eve's reply")
    wait_for(lambda: _head(ada, ada_sid) == "you said hello", 20, "ada's reply")
    assert "card 4111" not in str(ada.get(f"/v1/sessions/{ada_sid}/events").json())  # (hex ids may hold 4111)
    theirs, nothing = eve.get(f"/v1/sessions/{ada_sid}"), eve.get(f"/v1/sessions/acme~{name}x")
    assert (theirs.status_code, theirs.json()["error"]) == (nothing.status_code, nothing.json()["error"])
    refused = eve.post("/v1/sessions", json={"agent": ECHO, "sessionId": ada_sid})
    assert refused.status_code == 422, refused.text


def test_within_a_tenant_a_taken_id_is_refused_without_saying_whose(dep: Deployment) -> None:
    """A tenant's ids are one namespace its keys share: bob starting a run (opening a session) under
    an id ada holds is refused exactly as when he holds it himself (the refusal says the id is in use,
    nothing of whose), while reading ada's answers 404 as a run (session) nobody started."""
    ada, bob = dep.api(ADA), dep.api(BOB)
    names = {who: _unique(f"order-{who.name}") for who in (ADA, BOB)}
    ids = {who: _start(dep, who, names[who], 60_000) for who in (ADA, BOB)}
    again = {"workflow": THREE, "input": {"x": 1}}
    runs = {who: bob.post("/v1/runs", json={**again, "runId": names[who]}) for who in (ADA, BOB)}
    assert [r.status_code for r in runs.values()] == [422, 422], [r.text for r in runs.values()]
    assert runs[ADA].json() == {**runs[BOB].json(), "detail": runs[BOB].json()["detail"].replace(ids[BOB], ids[ADA])}
    theirs, nothing = bob.get(f"/v1/runs/{ids[ADA]}"), bob.get(f"/v1/runs/{ids[ADA]}x")
    assert (theirs.status_code, theirs.text.replace(ids[ADA], "?")) == (404, nothing.text.replace(f"{ids[ADA]}x", "?"))
    sessions = {who: _unique(f"support-{who.name}") for who in (ADA, BOB)}
    for who, sid in sessions.items():
        assert dep.api(who).post("/v1/sessions", json={"agent": ECHO, "sessionId": sid}).status_code == 201
    opens = {who: bob.post("/v1/sessions", json={"agent": ECHO, "sessionId": sid}) for who, sid in sessions.items()}
    assert [o.status_code for o in opens.values()] == [409, 409], [o.text for o in opens.values()]
    held = {who: f"acme~{sid}" for who, sid in sessions.items()}
    assert opens[ADA].json() == {**opens[BOB].json(),
                                 "detail": opens[BOB].json()["detail"].replace(held[BOB], held[ADA])}
    assert bob.get(f"/v1/sessions/{held[ADA]}").status_code == 404
    assert ada.get(f"/v1/sessions/{held[ADA]}").status_code == 200


def test_the_python_client_scopes_a_tenants_run_and_session_ids_by_its_tenant(harness: Harness) -> None:
    """The library's doors scope the same way: a run or session of a tenant is ``<tenant>~<name>``
    (a fork's new run and a child run too, under the root's hash tag), a run of no tenant keeps its
    name, and an id in another scope than its run's tenant is refused."""
    from parkway.adapters.redis import keys
    from parkway.errors import ValidationError
    from tests import flows_fork, session_flows

    pw = harness.pw
    runs = [pw.start(flows_fork.three, {}, run_id="order-1", tenant=t) for t in ("acme", "other", None)]
    assert runs == ["acme~order-1", "other~order-1", "order-1"]
    assert pw.start(flows_fork.three, {}, run_id="acme~order-2", tenant="acme") == "acme~order-2"
    for scoped, tenant in (("acme~order-3", "other"), ("acme~order-3", None)):
        with pytest.raises(ValidationError):
            pw.start(flows_fork.three, {}, run_id=scoped, tenant=tenant)
    assert pw.start(flows_fork.three, {}, tenant="acme").startswith("acme~run_")
    tree = pw.start(flows_fork.tree_flow, {}, run_id="tree", tenant="acme")
    harness.run_jobs()
    assert [pw.get_run(r).tenant for r in runs] == ["acme", "other", None]

    def child_asked() -> Any:
        harness.run_jobs()  # again until the child has asked: once under load one burst left it unasked (not diagnosed)
        return pw.get_run(tree).interrupt

    child = wait_for(child_asked, 20, "the child's interrupt")
    assert child.run_id.startswith("acme~tree--")
    assert keys.run(child.run_id).startswith(keys.run(tree).removesuffix(":run"))  # one hash tag
    assert pw.fork("acme~order-1", step=0, new_run_id="copy") == "acme~copy"
    sessions = [pw.sessions.open(session_flows.echo, owner="ada", tenant=t, session_id="support-1")
                for t in ("acme", "other")]
    assert sessions == ["acme~support-1", "other~support-1"]


# --- a session's events belong to one incarnation ------------------------------------------------


def test_every_session_event_carries_the_incarnation_that_opened_it(dep: Deployment) -> None:
    """Each event of a session (opened, message, dispatch, reply, interrupt) names the incarnation
    its session.opened announced; the same id opened again after it expired is another."""
    ada, bob = dep.api(ADA), dep.api(BOB)
    opened = ada.post("/v1/sessions", json={"agent": ECHO, "sessionId": _unique("s-inc"), "ttlMs": 1000})
    sid = opened.json()["sessionId"]
    assert ada.post(f"/v1/sessions/{sid}/messages", json={"content": "hi"}).status_code == 201
    wait_for(lambda: _head(ada, sid) == "you said hi", 20, "the reply")
    assert ada.post(f"/v1/sessions/{sid}/interrupts", json={"reason": "wait"}).status_code == 201
    events = ada.get(f"/v1/sessions/{sid}/events").json()
    first = events[0]["incarnation"]
    assert events[0]["type"] == "session.opened" and len(events) >= 5
    assert {e["type"]: e.get("incarnation") for e in events} == {e["type"]: first for e in events}
    wait_for(lambda: ada.get(f"/v1/sessions/{sid}").status_code == 404, 20, "the session to expire")
    assert bob.post("/v1/sessions", json={"agent": ECHO, "sessionId": sid}).status_code == 201
    again = bob.get(f"/v1/sessions/{sid}/events").json()
    assert again[0]["incarnation"] != first and {e["incarnation"] for e in again} == {again[0]["incarnation"]}


def test_a_session_stream_ends_at_an_event_of_another_incarnation(dep: Deployment, redis_client: redis.Redis) -> None:
    """A stream follows the incarnation it opened on: an event stamped with another one in the
    session's stream (as a writer of an earlier or later holder of the id would leave) ends it
    unshown, though the session it asks about is still the same."""
    from parkway.adapters import codec
    from parkway.adapters.redis import keys

    ada = dep.api(ADA)
    sid = ada.post("/v1/sessions", json={"agent": ECHO, "sessionId": _unique("s-stamp")}).json()["sessionId"]
    lines: list[str] = []
    ended = threading.Event()

    def hold() -> None:
        with httpx.stream("GET", f"{dep.url}/v1/sessions/{sid}/stream", timeout=30,
                          headers={"Authorization": f"Bearer {ADA.secret}"}) as response:
            for line in response.iter_lines():
                lines.append(line)
        ended.set()

    threading.Thread(target=hold, daemon=True).start()
    wait_for(lambda: any("session.opened" in line for line in lines), 60, "ada's stream to open")
    blob = codec.encode({"message": {"content": "card 4111"}}, what="event")
    redis_client.xadd(keys.session_events(sid), {"t": "message.added", "d": blob, "i": "another"})
    assert ended.wait(20), "the stream went on past another incarnation's event"
    assert not any("card 4111" in line for line in lines), lines
    assert ada.get(f"/v1/sessions/{sid}").status_code == 200  # the session itself is still there
