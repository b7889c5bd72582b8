"""Interrupt telemetry through the HTTP API (a real uvicorn process and worker) and the CLI (a
real ``parkway`` process)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from parkway import Parkway, Settings
from tests import flows, readme
from tests.conftest import SECRET
from tests.procs import wait_for
from tests.readme import run_readme_example
from tests.test_api import Server, _api, _token, close_api_clients
from tests.test_cli import parkway


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    close_api_clients()


def test_http_reads_an_interrupt_and_lists_by_status(api_server: Server) -> None:
    """GET /v1/interrupts/{requestId} answers open and ended interrupts with their lifecycle (the
    responder is the caller's key name); ?status=resolved lists it; a bad status or id is a 422, an
    unknown interrupt a 404, no key a 401."""
    api = _api(api_server)
    run_id = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}}).json()["runId"]
    wait_for(lambda: api.get("/v1/interrupts", params={"runId": run_id}).json()["items"], 20, "the pause")
    token, request_id = _token(api, run_id)
    open_ = api.get(f"/v1/interrupts/{request_id}").json()
    assert open_["lifecycle"]["status"] == "pending" and open_["lifecycle"]["presentation"] == "static-options"
    assert api.post("/v1/resume", json={"token": token, "selected": "red"}).json()["outcome"] == "accepted"
    ended = api.get(f"/v1/interrupts/{request_id}").json()
    assert (ended["lifecycle"]["status"], ended["lifecycle"]["outcome"], ended["lifecycle"]["answer"]) == (
        "resolved", "resumed", "red")
    assert ended["lifecycle"]["waitMs"] >= 0 and ended["lifecycle"]["endedAt"] >= ended["createdAt"]
    listed = api.get("/v1/interrupts", params={"status": "resolved", "workflow": "one_choice"}).json()
    assert [i["requestId"] for i in listed["items"]] == [request_id]
    assert api.get("/v1/interrupts", params={"status": "done"}).status_code == 422
    assert api.get("/v1/interrupts/int_" + "ab" * 12).status_code == 422  # carries no run id
    assert api.get("/v1/interrupts/i9_abcde_run_missing").status_code == 404
    assert api.get("/v1/interrupts/int_" + "ab" * 12, params={"runId": "run_missing"}).status_code == 404
    assert api.get("/v1/interrupts/bad%20id").status_code == 422
    with httpx.Client(base_url=api_server.url, timeout=10) as anonymous:
        assert anonymous.get(f"/v1/interrupts/{request_id}").status_code == 401


def test_cli_shows_an_interrupt_and_lists_ended_ones(redis_client: redis.Redis, redis_url: str) -> None:
    """`parkway interrupt REQUEST` prints its JSON with the lifecycle (and a line in words on stderr);
    `parkway interrupts --status resolved` lists it; an unknown one exits 1 with a clear message."""
    with Parkway(Settings(redis_url=redis_url, secret=SECRET)) as pw:
        run_id = pw.start(flows.one_choice, {})
        from tests.conftest import Harness

        Harness("redis", pw, pw.settings, redis_client).run_jobs()
        item = pw.list_interrupts(run_id=run_id, include_tokens=True).items[0]
        assert item.resume_token and pw.resume(item.resume_token, selected="blue", responder="eve").accepted
    url = ["--redis-url", redis_url]
    shown = parkway("interrupt", item.request_id, *url)
    assert shown.returncode == 0, shown.stderr
    got = json.loads(shown.stdout)
    assert (got["lifecycle"]["outcome"], got["lifecycle"]["responder"]) == ("resumed", "eve")
    assert "resumed at" in shown.stderr and "by eve" in shown.stderr
    listed = parkway("interrupts", "--status", "resolved", *url)
    assert listed.returncode == 0 and item.request_id in listed.stdout and "resumed" in listed.stdout
    as_json = json.loads(parkway("interrupts", "--status", "resolved", "--json", *url).stdout)
    assert [i["requestId"] for i in as_json["items"]] == [item.request_id]
    missing = parkway("interrupt", "i9_abcde_run_missing", *url)
    assert missing.returncode == 1 and "no interrupt 'i9_abcde_run_missing'" in missing.stderr
    assert parkway("interrupts", "--status", "done", *url).returncode == 2


def test_the_readme_telemetry_example_runs_as_printed(tmp_path: Path) -> None:
    """The README's "Interrupt telemetry" example runs embedded and prints what the README says."""
    lines = run_readme_example("## Interrupt telemetry", tmp_path)
    section = readme.section("## Interrupt telemetry")[1]
    printed = section[section.index("prints\n\n```\n") + len("prints\n\n```\n"):]
    expected = printed[: printed.index("```")].splitlines()
    assert lines[0].startswith(expected[0].removesuffix("…")) and lines[1:] == expected[1:]
