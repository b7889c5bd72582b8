"""Every HTTP error is one shape: RFC 9457 problem details, against a real server process."""

from __future__ import annotations

import re
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
    # the health check is public, and an answer link is its own capability (its pages are HTML)
    assert open_ones == {("get", "/healthz"), ("get", "/a/{link}"), ("post", "/a/{link}")}
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
