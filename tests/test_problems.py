"""Every HTTP error is one shape: RFC 9457 problem details, against a real server process."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis

from tests.test_api import Server, _api, _token, _wait_status, close_api_clients, serving

PROBLEM = "application/problem+json"


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    redis_url = request.getfixturevalue("redis_url")
    with redis.Redis.from_url(redis_url) as client:
        client.flushdb()
    with serving(redis_url) as srv:
        yield srv
    close_api_clients()


def _is_problem(response: httpx.Response, status: int, kind: str) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text[:300])
    assert response.headers["content-type"].startswith(PROBLEM), response.headers["content-type"]
    body: dict[str, Any] = response.json()
    assert body["type"] == f"/problems/{kind}" and body["status"] == status, body
    assert body["title"] and body["detail"] and body["error"], body
    return body


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x1", path)


def test_every_route_of_the_openapi_document_answers_a_missing_or_wrong_key_with_a_problem(server: Server) -> None:
    """Each documented operation, called without a key and with an unknown one, is a 401 problem that says which,
    with a WWW-Authenticate challenge; the document declares the bearer scheme and the problem responses."""
    document = httpx.get(server.url + "/openapi.json", timeout=15).json()
    assert document["components"]["securitySchemes"]["HTTPBearer"] == {
        "type": "http", "scheme": "bearer", "description": "an API key: `Authorization: Bearer <key>`"}
    operations = [(method, path) for path, item in document["paths"].items() for method in item
                  if item[method].get("security")]
    open_ones = {(method, path) for path, item in document["paths"].items() for method in item} - set(operations)
    # the health check is public, an answer link is its own capability (its pages are HTML), and Slack signs
    # its own requests (tests/test_slack.py: a forged or missing signature is 401)
    assert open_ones == {("get", "/healthz"), ("get", "/a/{link}"), ("post", "/a/{link}"),
                         ("post", "/slack/interactions")}
    assert len(operations) >= 20
    with httpx.Client(base_url=server.url, timeout=15) as anonymous:
        for method, path in operations:
            assert "401" in document["paths"][path][method]["responses"], (method, path)
            for headers, words in (({}, "an API key is needed"), ({"Authorization": "Bearer nope"}, "not known")):
                response = anonymous.request(method.upper(), _concrete(path), headers=headers)
                body = _is_problem(response, 401, "unauthorized")
                assert words in body["detail"] and response.headers["www-authenticate"] == "Bearer", (method, path)


def test_refusals_of_every_kind_share_the_shape_and_say_their_outcome(server: Server) -> None:
    """A body that does not fit (each field in `errors`), an unknown run, an unknown route, an answer that does
    not fit, and a second answer (its outcome and ids kept) are all problems."""
    api = _api(server)
    bad = _is_problem(api.post("/v1/runs", json={"workflow": 7, "extra": 1}), 422, "invalid-request")
    assert {e["field"] for e in bad["errors"]} >= {"body.workflow", "body.extra"}
    _is_problem(api.get("/v1/runs/no_such_run"), 404, "run-not-found")
    _is_problem(api.get("/v1/no-such-route"), 404, "not-found")
    run_id = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}}).json()["runId"]
    _wait_status(api, run_id, "waiting")
    token, request_id = _token(api, run_id)
    refused = _is_problem(api.post("/v1/resume", json={"token": token, "selected": "green"}), 422, "invalid-answer")
    assert "green" in refused["detail"] and token not in str(refused)
    assert api.post("/v1/resume", json={"token": token, "selected": "red"}).status_code == 200
    again = _is_problem(api.post("/v1/resume", json={"token": token, "selected": "blue"}), 409, "already-resolved")
    assert again["outcome"] == "already_resolved" and again["runId"] == run_id and again["requestId"] == request_id


def test_a_session_resume_spelt_in_the_other_casing_names_the_field_it_expects(server: Server) -> None:
    """The seed's `interrupt.resume` input keeps its spec's names: `interruptId` is refused naming `interrupt_id`."""
    api = _api(server)
    body = {"type": "interrupt.resume", "interruptId": "i1", "payload": None}
    refused = _is_problem(api.post("/v1/sessions/s1/resume", json=body), 422, "invalid-request")
    assert refused["errors"] == [{"field": "body.interruptId",
                                  "message": "unknown field 'interruptId': this body spells it 'interrupt_id'"}]


def test_a_cancel_needs_no_body_and_a_second_one_answers_as_a_second_answer_does(server: Server) -> None:
    """`POST /v1/runs/{id}/cancel` without a body cancels; cancelling the finished run again is a 409 problem
    with the outcome `already_resolved`, as answering an answered interrupt is (the run's status with it)."""
    api = _api(server)
    run_id = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}}).json()["runId"]
    _wait_status(api, run_id, "waiting")
    first = api.post(f"/v1/runs/{run_id}/cancel")
    assert first.status_code == 200 and first.json()["outcome"] == "cancelled", first.text
    again = _is_problem(api.post(f"/v1/runs/{run_id}/cancel"), 409, "already-resolved")
    assert again["outcome"] == "already_resolved" and again["runId"] == run_id and again["status"] == 409
    assert again["detail"] == "this run had finished before: this call changed nothing"
    assert again["runStatus"] == "cancelled"


def _documented(document: dict[str, Any], method: str, path: str, status: int) -> dict[str, Any]:
    responses: dict[str, Any] = document["paths"][path][method]["responses"]
    assert str(status) in responses, (method, path, status, sorted(responses))
    said: dict[str, Any] = responses[str(status)]
    return said


def test_each_route_documents_the_error_statuses_it_answers_in_real_calls(server: Server, redis_url: str) -> None:
    """Each status a route answers in these real calls (a table of its refusals, the session resume's
    409 and an answer link's 409 among them) is in the route's own `responses` in the OpenAPI document,
    a problem with the problem model where the body is one; a route lists no status it cannot answer."""
    from parkway import Parkway, Settings
    from tests.conftest import SECRET
    from tests.procs import wait_for
    from tests.test_api import USER_KEY

    api, ana = _api(server), _api(server, USER_KEY)
    document = httpx.get(server.url + "/openapi.json", timeout=15).json()
    run_id = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}}).json()["runId"]
    _wait_status(api, run_id, "waiting")
    token, request_id = _token(api, run_id)
    with Parkway(Settings(redis_url=redis_url, secret=SECRET)) as pw:
        link = pw.answer_links(token, server.url, responder="ana@example.com")["red"].rpartition(server.url)[2]
    assert httpx.post(server.url + link, timeout=15).status_code == 200
    sid = ana.post("/v1/sessions", json={"agent": "tests.session_flows:mail"}).json()["sessionId"]
    assert ana.post(f"/v1/sessions/{sid}/messages", json={"content": "mail bob"}).status_code == 201
    parked = wait_for(lambda: ana.get(f"/v1/sessions/{sid}").json()["parkedBy"], 20, "the session's approval")
    clear = {"type": "interrupt.resume", "interrupt_id": parked[0], "payload": {"approved": True}}
    assert ana.post(f"/v1/sessions/{sid}/resume", json=clear).status_code == 200
    cancelled = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}}).json()["runId"]
    _wait_status(api, cancelled, "waiting")
    assert api.post(f"/v1/runs/{cancelled}/cancel").status_code == 200
    brief = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {"ttl_ms": 1000}}).json()["runId"]
    _wait_status(api, brief, "waiting")
    late_token, late_request = _token(api, brief)
    wait_for(lambda: api.get(f"/v1/interrupts/{late_request}", params={"runId": brief}).json()["expiresAt"]
             < time.time() * 1000 - 100, 10, "the interrupt's expiry")

    with httpx.Client(base_url=server.url, timeout=15) as anonymous:
        calls = [  # (method, documented path, status expected, the response)
            ("get", "/v1/me", 401, anonymous.get("/v1/me")),
            ("get", "/metrics", 403, api.get("/metrics")),
            ("post", "/v1/runs", 413, api.post("/v1/runs", content=b"x" * (3 << 20),
                                               headers={"content-type": "application/json"})),
            ("post", "/v1/runs", 422, api.post("/v1/runs", json={"workflow": 7})),
            ("get", "/v1/runs/{run_id}", 404, api.get("/v1/runs/no_such_run")),
            ("get", "/v1/interrupts", 403, ana.get("/v1/interrupts", params={"tokens": "true"})),
            ("post", "/v1/runs/{run_id}/cancel", 409, api.post(f"/v1/runs/{cancelled}/cancel")),
            ("post", "/v1/resume", 409, api.post("/v1/resume", json={"token": token, "selected": "red"})),
            ("post", "/v1/resume", 410, api.post("/v1/resume", json={"token": late_token, "selected": "red"})),
            ("post", "/v1/interrupts/{request_id}/answer", 409,
             api.post(f"/v1/interrupts/{request_id}/answer", json={"runId": run_id, "selected": "red"})),
            ("post", "/v1/sessions/{session_id}/resume", 409, ana.post(f"/v1/sessions/{sid}/resume", json=clear)),
            ("post", "/v1/sessions/{session_id}/resume", 404,
             ana.post(f"/v1/sessions/{sid}/resume", json={**clear, "interrupt_id": "nope"})),
            ("post", "/a/{link}", 409, anonymous.post(link)),
            ("get", "/a/{link}", 404, anonymous.get("/a/not-a-link")),
        ]
    for method, path, status, response in calls:
        assert response.status_code == status, (method, path, response.status_code, response.text[:300])
        said = _documented(document, method, path, status)
        if response.headers["content-type"].startswith(PROBLEM):
            assert said["content"][PROBLEM]["schema"] == {"$ref": "#/components/schemas/Problem"}, (method, path)
    problem = document["components"]["schemas"]["Problem"]
    assert {"type", "title", "status", "detail", "error"} <= set(problem["required"])
    # a route lists its own statuses, not every route's: who-am-I reads no record, takes no body, waits for nothing
    me = document["paths"]["/v1/me"]["get"]["responses"]
    assert not {"404", "409", "410", "413", "429", "503"} & set(me), sorted(me)
    assert not {"409", "410"} & set(document["paths"]["/v1/runs/{run_id}"]["get"]["responses"])
    assert "401" not in document["paths"]["/healthz"]["get"]["responses"]


def test_every_route_called_with_stand_in_ids_answers_a_status_its_document_lists(server: Server) -> None:
    """Each documented operation, called with ids that name nothing, with an empty body (a POST), by a
    machine key and by a user's, answers a status its own `responses` list (the lists are each route's
    own: none may leave out what the route answers)."""
    from tests.test_api import USER_KEY

    document = httpx.get(server.url + "/openapi.json", timeout=15).json()
    unlisted = []
    for key in (None, USER_KEY):
        api = _api(server) if key is None else _api(server, key)
        for path, item in document["paths"].items():
            for method in item:
                if path == "/v1/interrupts/events":
                    continue  # it opens (an open stream never ends); the others refuse an id naming nothing
                kwargs: dict[str, Any] = {"json": {}} if method == "post" else {}
                status = api.request(method.upper(), _concrete(path), **kwargs).status_code
                if str(status) not in item[method]["responses"]:
                    unlisted.append((method, path, key is not None, status))
    assert unlisted == []
