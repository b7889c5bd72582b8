"""Typed interrupt contracts: the request is checked before the pause, the answer before the token is spent."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pydantic import BaseModel

from parkway import Contract, InvalidAnswer, ResumeOutcome, RunStatus, WorkflowError
from tests import flows
from tests.conftest import SECRET, Closing, Harness
from tests.procs import ROOT


def test_a_contract_answer_that_violates_the_response_model_is_refused_then_a_valid_one_is_accepted(
    harness: Harness,
) -> None:
    """An answer that does not fit the response model raises InvalidAnswer and the interrupt stays
    open with the same token; a valid one is accepted and the node gets the validated model."""
    run_id = harness.start_and_run(flows.contracted, {"team": "ops"})
    token = harness.token(run_id)
    for bad in ({"job_id": "nope"}, {}, {"job_id": 7}, "job-1", ["job-1"]):
        with pytest.raises(InvalidAnswer, match="pick-job"):
            harness.pw.resume(token, value=bad)
    with pytest.raises(InvalidAnswer, match="value"):
        harness.pw.resume(token, selected="job-1")
    assert harness.pw.get_run(run_id).status is RunStatus.WAITING
    assert harness.pw.resume(token, value={"job_id": "job-42", "note": "tonight"}).accepted
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.COMPLETED and run.output["job"] == "job-42" and run.output["note"] == "tonight"
    assert harness.pw.resume(token, value={"job_id": "job-1"}).outcome is ResumeOutcome.ALREADY_RESOLVED


def test_events_and_listings_carry_the_schema_id_and_version_but_not_where_the_contract_lives(
    harness: Harness,
) -> None:
    """The interrupt event and the listing say schemaId, schemaVersion and the validated request;
    the contract's import path stays server-side."""
    run_id = harness.start_and_run(flows.contracted, {"team": "ops"})
    event = harness.interrupt_event(run_id)
    public = event["input"]
    assert (public["kind"], public["schemaId"], public["schemaVersion"]) == ("contract", "pick-job", 2)
    assert public["payload"] == {"team": "ops", "limit": 5}
    assert "contractRef" not in json.dumps(event)
    listed = harness.pw.list_interrupts(run_id=run_id).items[0].request
    assert (listed.kind, listed.schema_id, listed.schema_version) == ("contract", "pick-job", 2)


def test_resume_message_with_value_answers_a_contract(harness: Harness) -> None:
    """metadata.resume = {token, requestId, value} answers a contract interrupt (the seed's shape)."""
    run_id = harness.start_and_run(flows.contracted, {"team": "ops"})
    item = harness.pw.list_interrupts(run_id=run_id, include_tokens=True).items[0]
    message = {"metadata": {"resume": {"token": item.resume_token, "requestId": item.request_id,
                                       "value": {"job_id": "job-9"}}}}
    assert harness.pw.resume_message(message).accepted
    harness.run_jobs()
    assert harness.pw.get_run(run_id).output["job"] == "job-9"


def test_a_request_that_violates_the_request_model_fails_the_node_before_pausing(harness: Harness) -> None:
    """A request that does not fit the contract's request model fails the run; nothing is listed."""
    run_id = harness.start_and_run(flows.contracted, {"team": ["not", "a", "string"]})
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.FAILED and run.error is not None and "pick-job" in run.error.message
    assert harness.pw.list_interrupts(run_id=run_id).items == ()


def test_contracts_are_checked_when_defined() -> None:
    """A contract needs pydantic models, a schema id and a version >= 1."""

    class M(BaseModel):
        x: int

    with pytest.raises(WorkflowError):
        Contract("c", version=0, request=M, response=M)
    with pytest.raises(WorkflowError):
        Contract("c", version=1, request=dict, response=M)  # type: ignore[arg-type]
    with pytest.raises(WorkflowError):
        Contract("", version=1, request=M, response=M)
    assert Contract("c", version=1, request=M, response=M).schema_id == "c"


def test_the_cli_value_option_answers_a_contract(redis_url: str, redis_client: object, closing: Closing) -> None:
    """`parkway resume TOKEN --value JSON` carries a contract answer; a bad one exits 1 with one line."""
    from parkway import Parkway, Settings

    settings = Settings(redis_url=redis_url, secret=SECRET)
    pw = closing(Parkway(settings))
    from tests.conftest import Harness as H

    harness = H("redis", pw, settings, redis_client)  # type: ignore[arg-type]
    run_id = harness.start_and_run(flows.contracted, {"team": "ops"})
    token = harness.token(run_id)
    env = {"PARKWAY_REDIS_URL": redis_url, "PARKWAY_SECRET": SECRET, "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}

    def cli(value: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "parkway.cli", "resume", token, "--value", value], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=60)

    bad = cli('{"job_id": "x"}')
    assert bad.returncode == 1 and "pick-job" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    good = cli('{"job_id": "job-5"}')
    assert good.returncode == 0, good.stderr
    harness.run_jobs()
    assert pw.get_run(run_id).output["job"] == "job-5"
