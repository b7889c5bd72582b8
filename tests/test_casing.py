"""One dialect: camelCase in every body and event, checked from the OpenAPI document route by route
and against a real server, worker and Redis; the names the seed's protocol fixes are listed here and
in the README; the CLI's ``--json`` prints what the API answers, nulls included."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis
from pydantic.alias_generators import to_camel, to_snake

from tests.casing import CAMEL, not_camel
from tests.procs import wait_for
from tests.readme import section
from tests.test_api import USER_KEY, Server, _api, _sse, _wait_status, close_api_clients, serving
from tests.test_cli import in_process
from tests.test_problems import _is_problem

SEED_PROPERTIES = {("ResumeInput", "interrupt_id")}
"""the property names of the OpenAPI document that are not camelCase: the seed's ``interrupt.resume``
input, as its spec spells it (README, HTTP: "One dialect")"""
# (what a session's policy and node code are shown, and records stored under the old names: in
# test_session_names.py, whose tests run their jobs in this process, which the server's worker here would race)


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    redis_url = request.getfixturevalue("redis_url")
    with redis.Redis.from_url(redis_url) as client:
        client.flushdb()
    with serving(redis_url) as srv:
        yield srv
    close_api_clients()


@pytest.fixture(scope="module")
def document(server: Server) -> dict[str, Any]:
    body: dict[str, Any] = httpx.get(server.url + "/openapi.json", timeout=15).json()
    return body


# --- the document ------------------------------------------------------------------------------


def _properties(node: Any, owner: str) -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for name in node.get("properties") or {}:
            yield owner, name
        for inner in node.values():
            yield from _properties(inner, owner)
    elif isinstance(node, list):
        for inner in node:
            yield from _properties(inner, owner)


def test_every_property_and_query_parameter_of_the_openapi_document_is_camel_case_but_the_seeds(
    document: dict[str, Any],
) -> None:
    """Each property of each schema (components and inline ones) and each query parameter is camelCase,
    but the seed's names listed in SEED_PROPERTIES, which the README's HTTP section names."""
    found = {p for name, schema in document["components"]["schemas"].items() for p in _properties(schema, name)}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            found |= set(_properties(operation, f"{method} {path}"))
            found |= {(f"{method} {path}", p["name"]) for p in operation.get("parameters", []) if p["in"] == "query"}
    assert len(found) > 100
    assert {(owner, name) for owner, name in found if not CAMEL.fullmatch(name)} == SEED_PROPERTIES
    dialect = section("**One dialect.**")[1].split("\n\n")[0]
    assert all(f"`{name}`" in dialect for _, name in SEED_PROPERTIES), dialect


def _resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """A schema with its ``$ref`` followed (``X | None``: X)."""
    if "$ref" in schema:
        return _resolve(document, document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]])
    for choice in schema.get("anyOf", []):
        if choice.get("type") != "null":
            return _resolve(document, choice)
    return schema


def _example(schema: dict[str, Any]) -> Any:
    """A value of the schema's type, inside its bounds, for a body that is wrong in its casing only."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    return {"string": "x1", "integer": 60_000, "number": 1, "boolean": False, "object": {}, "array": []}.get(
        schema.get("type", ""), "x1"
    )


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x1", path)


def test_every_route_refuses_a_member_in_the_other_casing_naming_the_one_it_expects(
    server: Server, document: dict[str, Any]
) -> None:
    """For each route with a JSON body and each of its members of more than one word, a body that
    spells it in the other casing (``run_id`` for ``runId``; ``interruptId`` for the seed's
    ``interrupt_id``) is a 422 problem whose ``errors`` name the member the body expects, and only that."""
    api = _api(server)
    tried: dict[str, list[str]] = {}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            content = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if content is None:
                continue
            schema = _resolve(document, content["schema"])
            members = schema.get("properties", {})
            required = {name: _example(_resolve(document, members[name])) for name in schema.get("required", [])}
            route = f"{method.upper()} {path}"
            tried[route] = []
            for name in (n for n in members if to_snake(n) != n or "_" in n):  # more than one word
                other = to_snake(name) if to_snake(name) != name else to_camel(name)
                body = {**{k: v for k, v in required.items() if k != name}, other: _example(_resolve(document,
                                                                                                   members[name]))}
                refused = _is_problem(api.request(method.upper(), _concrete(path), json=body), 422, "invalid-request")
                said = f"unknown field {other!r}: this body spells it {name!r}"
                expected = {"field": f"body.{other}", "message": said}
                assert refused["errors"] == [expected], (route, body, refused)
                tried[route].append(name)
    spelt = {route: names for route, names in tried.items() if names}
    assert spelt == {
        "POST /v1/runs": ["runId", "ttlMs"], "POST /v1/runs/{run_id}/fork": ["runId"],
        "POST /v1/interrupts/{request_id}/answer": ["runId"], "POST /v1/resume": ["requestId"],
        "POST /v1/resume-or-start": ["requestId"], "POST /v1/sessions": ["sessionId", "ttlMs"],
        "POST /v1/sessions/{session_id}/interrupts": ["interruptId"],
        "POST /v1/sessions/{session_id}/resume": ["interrupt_id"],
    }
    # the others have one-word members only: nothing to spell otherwise
    assert set(tried) - set(spelt) == {
        "POST /v1/runs/{run_id}/cancel", "POST /v1/sessions/{session_id}/messages",
        "POST /v1/sessions/{session_id}/messages/{message_id}/edit", "POST /v1/sessions/{session_id}/switch",
        "POST /v1/sessions/{session_id}/tools/{tool_call_id}",
    }


def test_every_route_refuses_a_query_parameter_in_the_other_casing_naming_the_one_it_expects(
    server: Server, document: dict[str, Any]
) -> None:
    """For each GET route and each of its query parameters of more than one word, the parameter spelt
    in the other casing (``?run_id=`` for ``?runId=``) is a 422 problem naming the one the route
    expects, instead of being ignored (a filter silently dropped widens what a listing returns)."""
    api = _api(server)
    tried = []
    for path, item in document["paths"].items():
        operation = item.get("get")
        if operation is None:
            continue
        for parameter in (p for p in operation.get("parameters", []) if p["in"] == "query"):
            name = parameter["name"]
            if to_snake(name) == name:
                continue  # one word: nothing to spell otherwise
            other = to_snake(name)
            response = api.get(_concrete(path), params={other: "1"})
            refused = _is_problem(response, 422, "invalid-request")
            said = f"unknown query parameter {other!r}: this route spells it {name!r}"
            assert refused["errors"] == [{"field": f"query.{other}", "message": said}], (path, refused)
            tried.append(f"{path}?{name}")
    assert {"/v1/interrupts?runId", "/v1/interrupts?waitMs", "/v1/runs?workflowPrefix"} <= set(tried), tried


# --- what the API answers and streams ------------------------------------------------------------


def _run_events(server: Server, run_id: str) -> list[tuple[str, dict[str, Any]]]:
    """A finished run's events, read over its event stream through ``done``."""
    return [(kind, {k: v for k, v in data.items() if k != "_id"}) for kind, data in _sse(server, run_id,
                                                                                           stop_at="done")]


def _head(api: httpx.Client, sid: str, start: str) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        body: dict[str, Any] = api.get(f"/v1/sessions/{sid}").json()
        head = next((m for m in body["messages"] if m["id"] == body["head"]), None)
        return body if head and head["content"].startswith(start) else None

    found: dict[str, Any] = wait_for(reached, 30, f"the head to start {start!r}")
    return found


def test_a_session_whose_policy_holds_tool_calls_speaks_camel_case_in_every_body_and_event(server: Server) -> None:
    """A session run through decide(): an approval, a deferred tool answered over HTTP, then a caller's
    interrupt cleared with no run at the head (a run dispatched for its trigger). The session's body,
    its events, the listings and each branch run's body and streamed events have camelCase keys only
    (the seed's shapes keep ``interrupt_id``); each message names its run as ``runId``, each tool
    message its call as ``toolCallId``."""
    ana, machine = _api(server, USER_KEY), _api(server)
    seen: list[tuple[str, Any]] = []
    sid = ana.post("/v1/sessions", json={"agent": "tests.session_flows:noted_mail"}).json()["sessionId"]
    sent = ana.post(f"/v1/sessions/{sid}/messages", json={"content": "mail bob"})
    assert sent.status_code == 201, sent.text
    parked = wait_for(lambda: ana.get(f"/v1/sessions/{sid}").json()["parkedBy"], 30, "the approval")
    listing = machine.get("/v1/interrupts", params={"session": sid}).json()
    assert [i["request"]["meta"]["toolCallId"] for i in listing["items"]] == ["mail"]
    seen += [("approval listing", listing), ("parked session", ana.get(f"/v1/sessions/{sid}").json())]
    resume = {"type": "interrupt.resume", "interrupt_id": parked[0], "payload": {"approved": True}}
    assert ana.post(f"/v1/sessions/{sid}/resume", json=resume).json()["outcome"] == "resumed"

    def deferred() -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = machine.get("/v1/interrupts", params={"session": sid}).json()["items"]
        return [i for i in items if (i["request"].get("payload") or {}).get("toolCallId") == "lk"]

    held = wait_for(deferred, 30, "the deferred lookup")
    assert held[0]["request"]["payload"] == {"tool": "lookup", "arguments": {"q": "bob"}, "toolCallId": "lk"}
    seen.append(("deferred listing", held))
    answered = ana.post(f"/v1/sessions/{sid}/tools/lk", json={"result": "bob@example.com"})
    assert answered.status_code == 200, answered.text
    seen.append(("tool answer", answered.json()))
    _head(ana, sid, "done: sent, found bob@example.com")
    first = wait_for(lambda: [e["runId"] for e in ana.get(f"/v1/sessions/{sid}/events").json()
                              if e["type"] == "run.dispatched"], 30, "the first run")[0]
    # its records are read before the next transition: a session keeps only a small record of an
    # ended branch run it was not handed triggers for
    seen += [("first run events", _run_events(server, first)), ("first run", ana.get(f"/v1/runs/{first}").json())]
    wait_for(lambda: not ana.get(f"/v1/sessions/{sid}").json()["liveRuns"], 30, "the branch run to end")
    raised = machine.post(f"/v1/sessions/{sid}/interrupts", json={"reason": "audit", "scope": "branch"})
    cleared = machine.post(f"/v1/sessions/{sid}/resume", json={"type": "interrupt.resume",
                                                                "interrupt_id": raised.json()["interruptId"],
                                                                "payload": {"ok": True}})
    assert cleared.json()["outcome"] == "dispatched", cleared.text
    view = _head(ana, sid, "resumed")
    events = ana.get(f"/v1/sessions/{sid}/events", params={"limit": 1000}).json()
    runs = [e["runId"] for e in events if e["type"] == "run.dispatched"]
    assert runs[0] == first and len(runs) == 2
    streamed = _run_events(server, runs[1])
    seen += [("session", view), ("session events", events), ("second run", ana.get(f"/v1/runs/{runs[1]}").json()),
             ("second run events", streamed)]
    seen.append(("ended interrupts", machine.get("/v1/interrupts", params={"status": "resolved", "runId": runs[0]})
                 .json()))
    assert {where: bad for where, value in seen if (bad := not_camel(value))} == {}
    assert all(m["runId"] in runs for m in view["messages"])
    added = [e for e in events if e["type"] == "message.added"]
    assert all(e["runId"] in runs and "run" not in e for e in added)
    assert sorted(e["toolCallId"] for e in added if e["role"] == "tool") == ["lk", "mail"]
    assert dict(streamed)["run.started"]["input"]["trigger"]["interrupt_id"] == raised.json()["interruptId"]


def test_an_ordinary_run_with_an_interrupt_speaks_camel_case_in_every_body_and_event(server: Server) -> None:
    """A run that asks, is answered by request id and completes: its body, its interrupt (listed,
    read, ended) and every event of its stream have camelCase keys only."""
    api = _api(server)
    run_id = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}}).json()["runId"]
    waiting = _wait_status(api, run_id, "waiting")
    listing = api.get("/v1/interrupts", params={"runId": run_id, "tokens": "true"}).json()
    request_id = listing["items"][0]["requestId"]
    answered = api.post(f"/v1/interrupts/{request_id}/answer", json={"selected": "red"})
    assert answered.status_code == 200, answered.text
    seen = {
        "waiting run": waiting, "listing": listing, "answer": answered.json(),
        "completed run": _wait_status(api, run_id, "completed"),
        "ended interrupt": api.get(f"/v1/interrupts/{request_id}").json(),
        "events": _run_events(server, run_id),
    }
    assert [kind for kind, _ in seen["events"]][-1] == "done" and "interrupt.resumed" in dict(seen["events"])
    assert {where: bad for where, value in seen.items() if (bad := not_camel(value))} == {}


# --- the CLI prints what the API answers ---------------------------------------------------------


def _shape(value: Any, where: str = "") -> set[tuple[str, bool]]:
    """Every key path of ``value``, each with whether its value is null."""
    out: set[tuple[str, bool]] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            out.add((f"{where}.{key}", inner is None))
            out |= _shape(inner, f"{where}.{key}")
    elif isinstance(value, list):
        for inner in value:
            out |= _shape(inner, f"{where}[]")
    return out


def test_the_cli_json_and_the_http_body_show_the_same_fields_and_nulls(server: Server, redis_url: str) -> None:
    """`parkway show RUN`, `parkway interrupt REQUEST`, `interrupts --json` and `runs --json` print
    the fields the HTTP API answers for the same run and interrupt, each null where the API's is:
    before the answer and after it."""
    api = _api(server)
    run_id = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}}).json()["runId"]
    _wait_status(api, run_id, "waiting")
    url = ["--redis-url", redis_url]
    for moment in ("waiting", "completed"):
        request_id = api.get("/v1/interrupts", params={"runId": run_id, "status": "pending" if moment == "waiting"
                                                      else "resolved"}).json()["items"][0]["requestId"]
        pairs = {
            "show": (in_process("show", run_id, *url), api.get(f"/v1/runs/{run_id}")),
            "interrupt": (in_process("interrupt", request_id, *url), api.get(f"/v1/interrupts/{request_id}")),
            "runs": (in_process("runs", "--json", *url), api.get("/v1/runs")),
        }
        if moment == "waiting":
            pairs["interrupts"] = (in_process("interrupts", "--json", *url), api.get("/v1/interrupts"))
        for name, (cli, http) in pairs.items():
            assert cli.returncode == 0 and http.status_code == 200, (name, cli.stderr, http.text)
            printed = json.loads(cli.stdout)
            assert _shape(printed) == _shape(http.json()), (moment, name, _shape(printed) ^ _shape(http.json()))
        if moment == "waiting":
            assert api.post(f"/v1/interrupts/{request_id}/answer", json={"selected": "red"}).status_code == 200
            _wait_status(api, run_id, "completed")
