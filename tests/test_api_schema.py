"""Property-based requests generated from the OpenAPI document (Schemathesis) get no server error."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
import requests
import schemathesis
from hypothesis import HealthCheck, settings

from tests.conftest import SECRET
from tests.procs import Worker
from tests.test_api import KEY, Server


@pytest.fixture(scope="module")
def api_schema(request: pytest.FixtureRequest) -> Iterator[object]:
    redis_url = request.getfixturevalue("redis_url")
    with redis.Redis.from_url(redis_url) as client:
        client.flushdb()
    server = Server(redis_url)
    worker = Worker(redis_url, SECRET)
    try:
        yield schemathesis.openapi.from_url(server.url + "/openapi.json")
    finally:
        worker.stop()
        server.stop()


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.mark.timeout(360)  # every route's examples in one test: ~25 s on 2 quiet cores, past 120 s on busy ones
@schema.parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_request_the_schema_allows_gets_a_server_error(case: schemathesis.Case) -> None:
    """Whatever the documented routes are sent, with a valid key, nothing answers 5xx."""
    if case.query and isinstance(case.query.get("waitMs"), int):
        # a listing may wait up to 30 s for a pause that never comes here: keep the examples short
        case.query["waitMs"] = min(case.query["waitMs"], 200)
    headers = {"Authorization": f"Bearer {KEY}"}
    if case.operation.path in STREAMS:
        # an open event stream never ends by itself: the status it opens with is the answer here
        # (the streams' bodies are tested in test_api, test_live_feeds and the sessions' tests)
        with requests.request(**case.as_transport_kwargs(headers=headers), stream=True, timeout=20) as opened:
            status, text = opened.status_code, (opened.text[:300] if opened.status_code >= 500 else "")
    else:
        response = case.call(headers=headers, timeout=20)
        status, text = response.status_code, response.text[:300]
    assert status < 500, (case.method, case.formatted_path, case.body, text)


STREAMS = frozenset({"/v1/runs/{run_id}/events", "/v1/interrupts/events", "/v1/sessions/{session_id}/stream"})
"""the routes that answer with a server-sent event stream"""


def test_the_event_streams_named_here_are_in_the_document(api_schema: object) -> None:
    """Each route the fuzz opens as a stream is in the OpenAPI document (a renamed one would be fuzzed
    as a plain call and wait out its timeout on every example)."""
    paths = api_schema.raw_schema["paths"]  # type: ignore[attr-defined]
    assert STREAMS <= set(paths), STREAMS - set(paths)
