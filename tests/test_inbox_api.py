"""The API the inbox page stands on: answering by request id as the caller (no token in the
browser), a contract's answer form and its per-field errors, and the listing's workflow prefix and
question search (validated and bounded). One server and worker for the module."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
import redis

from tests.test_api import KEY, USER_KEY, Server, serving
from tests.test_inbox_page import start


@pytest.fixture(scope="module")
def deployment(redis_url: str) -> Iterator[Server]:
    redis.Redis.from_url(redis_url).flushdb()
    with serving(redis_url) as srv:
        yield srv


@pytest.fixture
def api(deployment: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=deployment.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=15) as client:
        yield client


@pytest.fixture
def tenant() -> str:
    return "t" + uuid.uuid4().hex[:10]


def _pending(api: httpx.Client, run_id: str) -> dict[str, object]:
    items: list[dict[str, object]] = api.get("/v1/interrupts", params={"runId": run_id}).json()["items"]
    assert len(items) == 1
    return items[0]


def test_an_answer_by_request_id_is_recorded_once_with_the_callers_responder(
    api: httpx.Client, tenant: str
) -> None:
    """The first answer is accepted as the key's caller; a second gets 409 and the interrupt's
    lifecycle names the first responder and answer."""
    run_id = start(api, "tests.flows:one_choice", {}, tenant)
    request_id = _pending(api, run_id)["requestId"]
    first = api.post(f"/v1/interrupts/{request_id}/answer", json={"selected": "red"})
    assert first.status_code == 200 and first.json()["outcome"] == "accepted"
    second = api.post(f"/v1/interrupts/{request_id}/answer", json={"selected": "blue"})
    assert second.status_code == 409 and second.json()["outcome"] == "already_resolved"
    life = api.get(f"/v1/interrupts/{request_id}").json()["lifecycle"]
    assert (life["responder"], life["answer"]) == ("machine", "red")


def test_a_contract_answer_that_does_not_fit_names_its_fields_and_leaves_it_open(
    api: httpx.Client, tenant: str
) -> None:
    """The form route gives the response model's JSON Schema; a wrong job id gets 422 with a
    problem under ``job_id`` only, and the interrupt stays open."""
    run_id = start(api, "tests.flows:contracted", {"team": "ops"}, tenant)
    request_id = _pending(api, run_id)["requestId"]
    form = api.get(f"/v1/interrupts/{request_id}/form").json()
    assert form["schemaId"] == "pick-job" and form["schema"]["required"] == ["job_id"]
    assert form["schema"]["properties"]["job_id"]["pattern"] == "^job-[0-9]+$"
    refused = api.post(f"/v1/interrupts/{request_id}/answer", json={"value": {"job_id": "x", "note": "ok"}})
    assert refused.status_code == 422 and list(refused.json()["problems"]) == ["job_id"]
    assert api.get(f"/v1/runs/{run_id}").json()["status"] == "waiting"
    assert api.post(f"/v1/interrupts/{request_id}/answer", json={"value": {"job_id": "job-1"}}).status_code == 200


def test_a_user_answers_only_what_it_may_and_a_plain_question_has_no_form(
    deployment: Server, api: httpx.Client, tenant: str
) -> None:
    """Another tenant's interrupt answers a user key as no interrupt (404, nothing recorded); a
    question without a contract has no form (422)."""
    run_id = start(api, "tests.flows:one_choice", {}, tenant)
    request_id = _pending(api, run_id)["requestId"]
    with httpx.Client(base_url=deployment.url, headers={"Authorization": f"Bearer {USER_KEY}"}, timeout=15) as ana:
        refused = ana.post(f"/v1/interrupts/{request_id}/answer", json={"selected": "red"})
        assert refused.status_code == 404 and refused.json()["outcome"] == "unknown"
        assert ana.get(f"/v1/interrupts/{request_id}/form").status_code == 404
    assert api.get(f"/v1/interrupts/{request_id}/form").status_code == 422
    assert _pending(api, run_id)["requestId"] == request_id  # still open


def test_the_listing_filters_by_workflow_prefix_and_question_text(api: httpx.Client, tenant: str) -> None:
    """``workflowPrefix`` keeps workflows whose name starts with it, ``q`` questions holding the
    text (case ignored); both are bounded (1-200 characters, else 422)."""
    colors = start(api, "tests.flows:one_choice", {}, tenant)
    name = start(api, "tests.flows:two_questions", {}, tenant)

    def listed(**params: str) -> set[str]:
        page = api.get("/v1/interrupts", params={"tenant": tenant, **params})
        assert page.status_code == 200, page.text
        return {item["runId"] for item in page.json()["items"]}

    assert listed() == {colors, name}
    assert listed(workflowPrefix="one_") == {colors}
    assert listed(q="YOUR NAME") == {name}
    assert listed(workflowPrefix="one_", q="your name") == set()
    for bad in ({"q": "x" * 201}, {"workflowPrefix": ""}, {"q": ""}):
        assert api.get("/v1/interrupts", params=bad).status_code == 422
