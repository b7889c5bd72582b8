"""Code versions: each pause records the workflow's version; a resume into another one is logged,
and one the code does not declare it replays is refused before the token is spent."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from structlog.testing import capture_logs

from parkway import ResumeOutcome, RunStatus, VersionNotReplayed, Workflow, WorkflowError
from parkway.runtime import tokens
from parkway.runtime.clock import now_ms
from parkway.runtime.store import Answer, JournalEntry
from tests import flows_model
from tests.conftest import Harness


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    yield
    flows_model.versioned.version, flows_model.versioned.replays = "v1", None


def _deploy(version: str, replays: tuple[str, ...] | None = None) -> None:
    """What a deploy of new code does to the workflow (in this process, where the workers run too)."""
    flows_model.versioned.version, flows_model.versioned.replays = version, replays


def test_a_pause_records_the_declared_version_or_a_digest_of_the_node(harness: Harness) -> None:
    """The interrupt (listing, get_run) carries the declared version; without one, code-<digest>,
    the same for the same code and different for another node's."""
    run_id = harness.start_and_run(flows_model.versioned)
    assert harness.pw.list_interrupts(run_id=run_id).items[0].version == "v1"
    interrupt = harness.pw.get_run(run_id).interrupt
    assert interrupt is not None and interrupt.version == "v1"
    other = harness.start_and_run(flows_model.unversioned)
    digest = harness.pw.list_interrupts(run_id=other).items[0].version
    assert digest is not None and digest.startswith("code-")
    assert digest == flows_model.unversioned.version_of("ask_unversioned")
    assert digest != flows_model.calls_then_asks.version_of("call_then_ask")


def test_a_resume_into_another_version_is_logged_with_both(harness: Harness) -> None:
    """Paused under v1, resumed with v2 deployed (no replays list): accepted, and version_mismatch is
    logged with recorded v1 and current v2 (by the resume, and by the replay)."""
    run_id = harness.start_and_run(flows_model.versioned)
    _deploy("v2")
    with capture_logs() as logs:
        assert harness.pw.resume(harness.token(run_id), selected="red").accepted
        harness.run_jobs()
        harness.pw.wait(run_id, timeout=10)
    assert harness.pw.get_run(run_id).status is RunStatus.COMPLETED
    seen = [(e["at"], e["recorded"], e["current"]) for e in logs if e["event"] == "version_mismatch"]
    assert ("resume", "v1", "v2") in seen and ("replay", "v1", "v2") in seen, logs


def test_a_version_the_code_does_not_replay_is_refused_before_the_token_is_spent(harness: Harness) -> None:
    """v3 declares replays=("v2",): the v1 pause's resume raises VersionNotReplayed naming both, the
    interrupt stays open; with replays=("v1",) the same token is accepted."""
    run_id = harness.start_and_run(flows_model.versioned)
    token = harness.token(run_id)
    _deploy("v3", ("v2",))
    with pytest.raises(VersionNotReplayed, match="'v1'.*'v3'"):
        harness.pw.resume(token, selected="red")
    assert harness.pw.get_run(run_id).status is RunStatus.WAITING
    _deploy("v3", ("v2", "v1"))
    assert harness.pw.resume(token, selected="red").accepted
    harness.run_jobs()
    harness.pw.wait(run_id, timeout=10)
    assert harness.pw.get_run(run_id).status is RunStatus.COMPLETED


def test_a_worker_gives_back_an_activation_of_a_version_it_does_not_replay(harness: Harness) -> None:
    """An answer committed past the client's check (here: straight into the store) reaches a worker
    whose code does not replay v1: the run is given back queued, saying why, with its answer; a worker
    that replays v1 completes it."""
    run_id = harness.start_and_run(flows_model.versioned)
    token = harness.token(run_id)
    record = harness.pw.store.lookup(run_id, tokens.hash_token(token), now_ms()).interrupt
    assert record is not None
    entry = JournalEntry("interrupt", "color", "blue", "choice")
    commit = harness.pw.store.resume(run_id, Answer(record, tokens.hash_token(token), None, entry, {}, now_ms()))
    _deploy("v3", ())
    if not commit.handed_off:
        harness.pw.backend.dispatcher.enqueue(run_id, commit.step, commit.fence)
    harness.run_jobs()
    assert harness.pw.get_run(run_id).status is RunStatus.QUEUED
    deferred = [e for e in harness.pw.store.read_events(run_id, "0", None, 100) if e.type == "node.deferred"]
    assert deferred and "replays" in deferred[-1].data["reason"]
    assert harness.pw.resume(token, selected="red").outcome is ResumeOutcome.ALREADY_RESOLVED
    _deploy("v1")
    from parkway.workers.reconciler import reconcile_once

    reconcile_once(harness.pw.store, harness.pw.backend.dispatcher, outbox_age_ms=0)
    harness.run_jobs()
    harness.pw.wait(run_id, timeout=10)
    assert harness.pw.get_run(run_id).output == {"color": "blue"}


def test_versions_are_checked_when_the_workflow_is_defined() -> None:
    """A version or a replays entry that is not 1-64 of A-Z a-z 0-9 . _ - is a WorkflowError."""
    assert Workflow("w_versions", version="2024.06-rc_1", replays=["1.0"]).replays == ("1.0",)
    for bad in ({"version": "has space"}, {"version": ""}, {"replays": ("ok", "no/slash")}):
        with pytest.raises(WorkflowError):
            Workflow("w_bad", **bad)  # type: ignore[arg-type]
