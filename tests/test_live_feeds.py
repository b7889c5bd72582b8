"""The pause feed over server-sent events (``GET /v1/interrupts/events``), which the inbox page
follows: each pause a key may list, as it happens or from a position, and nothing of another
tenant's runs. Against a real server process, worker and Redis."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import redis

from tests.test_api import KEY, USER_KEY, _wait_status, serving


def paused_until_caught_up(url: str, key: str, **params: str) -> list[dict[str, str]]:
    """The ``interrupt.paused`` events a stream sends up to its ``: caught up`` comment."""
    out: list[dict[str, str]] = []
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.stream("GET", f"{url}/v1/interrupts/events", params=params, headers=headers, timeout=15) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        event = None
        for line in response.iter_lines():
            if line in (": caught up", ": waiting"):
                return out
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "interrupt.paused":
                out.append(json.loads(line[6:]))
    return out


def _frames(response: httpx.Response) -> Iterator[tuple[str, str]]:
    event = ""
    for line in response.iter_lines():
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            yield event, line[6:]


def test_the_pause_stream_sends_the_pauses_a_key_may_list(redis_url: str, redis_client: redis.Redis) -> None:
    """From the feed's start (``after=0``) a machine key sees every pause, a user key of tenant acme
    only acme's (its tenant's unowned runs: its inbox), never another tenant's; a stream opened
    without a position sends the pauses that come after it."""
    with serving(redis_url) as srv, httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {KEY}"},
                                                 timeout=15) as api:
        other = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}, "tenant": "other"})
        acme = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}, "tenant": "acme"})
        other_id, acme_id = other.json()["runId"], acme.json()["runId"]
        _wait_status(api, other_id, "waiting")
        _wait_status(api, acme_id, "waiting")
        seen = paused_until_caught_up(srv.url, KEY, after="0")
        assert {(e["runId"], e["workflow"]) for e in seen} == {(other_id, "one_choice"), (acme_id, "one_choice")}
        assert [e["runId"] for e in paused_until_caught_up(srv.url, USER_KEY, after="0")] == [acme_id]
        with httpx.stream("GET", f"{srv.url}/v1/interrupts/events", headers={"Authorization": f"Bearer {USER_KEY}"},
                          timeout=15) as live:
            later = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}, "tenant": "acme"})
            event, data = next(_frames(live))
        assert (event, json.loads(data)["runId"]) == ("interrupt.paused", later.json()["runId"])
        assert httpx.get(f"{srv.url}/v1/interrupts/events", timeout=5).status_code == 401
