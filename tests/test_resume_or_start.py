"""resume_or_start: answer while the interrupt can be answered; start the run again once it expired."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from parkway import AsyncParkway, Parkway, RunStatus, Settings, ValidationError
from parkway.adapters.redis import keys
from parkway.workers.reconciler import reconcile_once
from tests import flows
from tests.conftest import SECRET, Harness
from tests.procs import wait_for
from tests.test_api import KEY, Server
from tests.test_cli import _env
from tests.test_cli import parkway as cli


def _expired(harness: Harness) -> tuple[str, str]:
    """A run of flows.expiring whose 1 s interrupt expired (recorded by a reconciler pass); its token."""
    run_id = harness.start_and_run(flows.expiring, {"policy": None, "note": "first"})
    event = harness.interrupt_event(run_id)
    time.sleep(max(0.0, event["expiresAt"] / 1000 - time.time()) + 0.1)
    reconcile_once(harness.pw.store, harness.pw.backend.dispatcher)
    harness.pw.wait(run_id, timeout=10)
    assert harness.pw.get_run(run_id).status is RunStatus.EXPIRED
    return run_id, event["resumeToken"]


def _types(harness: Harness, run_id: str) -> list[str]:
    return [e.type for e in harness.pw.store.read_events(run_id, "0", None, 1000)]


def test_an_answerable_interrupt_is_resumed(harness: Harness) -> None:
    """While the token answers, resume_or_start is resume: outcome resumed, the run goes on."""
    run_id = harness.start_and_run(flows.one_choice)
    result = harness.pw.resume_or_start(harness.token(run_id), selected="red")
    assert (result.outcome, result.run_id, result.restarted_from) == ("resumed", run_id, None)
    harness.run_jobs()
    assert harness.pw.get_run(run_id).status is RunStatus.COMPLETED


def test_an_expired_interrupt_starts_a_new_run_that_says_it_was_restarted(harness: Harness) -> None:
    """The answer gets expired: a new run of the same workflow starts from the same input; its
    run.started carries restartedFrom, it asks again (nothing was resumed), the old run stays expired."""
    old, token = _expired(harness)
    result = harness.pw.resume_or_start(token, selected="blue")
    assert result.outcome == "started" and result.started and result.restarted_from == old
    assert result.run_id is not None and result.run_id != old
    harness.run_jobs()
    started = harness.pw.store.read_events(result.run_id, "0", None, 10)[0]
    assert started.type == "run.started" and started.data["restartedFrom"] == old
    assert started.data["input"] == {"policy": None, "note": "first"}
    assert harness.pw.get_run(result.run_id).input == {"policy": None, "note": "first"}
    types = _types(harness, result.run_id)  # (its own 1 s question may be over already)
    assert "interrupt" in types and "interrupt.resumed" not in types
    assert harness.pw.get_run(old).status is RunStatus.EXPIRED
    # the same expired token again starts another run: the application decides; given input replaces
    again = harness.pw.resume_or_start(token, selected="blue", input={"note": "second"})
    assert again.started and again.run_id not in (old, result.run_id)
    assert harness.pw.get_run(again.run_id or "").input == {"note": "second"}


def test_when_only_the_summary_is_left_workflow_and_input_are_needed(harness: Harness) -> None:
    """Past the records' TTL the summary does not know the workflow or input: a clear error, then a
    start with both given."""
    old, token = _expired(harness)
    client = harness.pw.store.client  # type: ignore[attr-defined]
    client.delete(keys.run(old), keys.events(old))  # what the TTL does (the interrupt lives in the run hash)
    with pytest.raises(ValidationError, match="pass workflow= and input="):
        harness.pw.resume_or_start(token, selected="blue")
    result = harness.pw.resume_or_start(token, selected="blue", workflow=flows.expiring, input={"policy": None})
    assert result.started and result.restarted_from == old


def test_a_resolved_token_starts_nothing(harness: Harness) -> None:
    """already_resolved is passed through: no run starts; the same answer again reads resumed (a
    retry), and starts nothing either."""
    run_id = harness.start_and_run(flows.one_choice)
    token = harness.token(run_id)
    assert harness.pw.resume(token, selected="red").accepted
    result = harness.pw.resume_or_start(token, selected="blue")
    assert (result.outcome, result.run_id) == ("already_resolved", run_id)
    result = harness.pw.resume_or_start(token, selected="red")
    assert (result.outcome, result.run_id) == ("resumed", run_id)


def test_async_parkway_mirrors_it(harness: Harness) -> None:
    """AsyncParkway.resume_or_start starts the expired run again, as the client does."""
    old, token = _expired(harness)
    result = asyncio.run(AsyncParkway(client=harness.pw).resume_or_start(token, selected="red"))
    assert result.started and result.restarted_from == old


def test_the_cli_and_the_http_api_start_an_expired_run_again(api_server: Server, redis_url: str) -> None:
    """`parkway resume TOKEN --select ID --or-start` and POST /v1/resume-or-start (201) each start a
    new run in place of one whose interrupt expired; an answerable one is resumed (200)."""
    with Parkway(Settings(redis_url=redis_url, secret=SECRET)) as pw:
        old = pw.start(flows.expiring, {"policy": None})
        asked = next(e for e in pw.stream(old, until="settled", timeout=20) if e.type == "interrupt")
        token = asked.data["resumeToken"]
        wait_for(lambda: pw.get_run(old).status is RunStatus.EXPIRED and pw.lookup(token), 20, "the expiry")
        done = cli("resume", token, "--select", "red", "--or-start", "--input", '{"policy": null, "n": 1}',
                   env=_env(PARKWAY_REDIS_URL=redis_url))
        assert done.returncode == 0, done.stderr
        printed = json.loads(done.stdout)
        assert printed["outcome"] == "started" and printed["restartedFrom"] == old
        assert pw.get_run(printed["runId"]).input == {"policy": None, "n": 1}
        with httpx.Client(base_url=api_server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=15) as api:
            reply = api.post("/v1/resume-or-start", json={"token": token, "selected": "red"})
            assert reply.status_code == 201 and reply.json()["restartedFrom"] == old, reply.text
            fresh = pw.start(flows.one_choice)
            pw.wait(fresh, timeout=20)
            answer = pw.list_interrupts(run_id=fresh, include_tokens=True).items[0].resume_token
            reply = api.post("/v1/resume-or-start", json={"token": answer, "selected": "red"})
            assert reply.status_code == 200 and reply.json()["outcome"] == "resumed", reply.text
