"""Escalation: at expiry the reconciler asks the same question again, under the same token, of
another audience with a new TTL, a bounded number of times, then applies the policy's ``then``."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from parkway import ResumeOutcome, RunStatus, ValidationError
from parkway.adapters.redis import keys
from parkway.runtime import tokens
from parkway.runtime.clock import now_ms
from parkway.runtime.expiry import expiry_policy
from parkway.runtime.protocol import InterruptRequest
from parkway.runtime.store import Answer, IndexEntry, JournalEntry
from parkway.workers.reconciler import reconcile_once
from tests import flows_escalate as fe
from tests.conftest import Harness, all_at_once
from tests.flows import COLORS
from tests.readme import run_readme_example


def _events(harness: Harness, run_id: str, kind: str | None = None) -> list[Any]:
    found = harness.pw.store.read_events(run_id, "0", None, 1000)
    return [e for e in found if kind is None or e.type == kind]


def _past_deadline(harness: Harness, run_id: str) -> Any:
    """Wait out the interrupt's current TTL, then one reconciler pass; its report."""
    expires = harness.pw.get_run(run_id).expires_at
    assert expires is not None
    time.sleep(max(0.0, expires / 1000 - time.time()) + 0.05)
    report = reconcile_once(harness.pw.store, harness.pw.backend.dispatcher)
    harness.run_jobs()
    return report


def _settle(harness: Harness, run_id: str) -> None:
    deadline = time.time() + 10
    while harness.pw.get_run(run_id).status in (RunStatus.QUEUED, RunStatus.RUNNING):
        assert time.time() < deadline
        time.sleep(0.05)
        harness.run_jobs()


def _index_members(harness: Harness) -> int:
    """How many members all the listing indexes hold (workflows' and filters')."""
    client = harness.pw.store.client  # type: ignore[attr-defined]
    return sum(client.zcard(k) for k in client.keys(keys.PREFIX + ":ix:*"))


def _audiences(harness: Harness, audience: str) -> list[str]:
    return [i.run_id for i in harness.pw.list_interrupts(audience=audience).items]


TWO_STEPS = {"escalate": {"to": ["team:leads", "user:cto"], "ttl_ms": 2000, "then": "fail"}}


def test_a_two_step_escalation_moves_the_question_then_applies_then(harness: Harness) -> None:
    """team:ops -> team:leads -> user:cto, each a fresh interrupt event and an interrupt.expired
    saying the step, the audience and the new expiry; after the last, ``then`` ("fail") ends the run."""
    run_id = harness.start_and_run(fe.escalating, {"audience": "team:ops", "policy": TWO_STEPS, "ttl_ms": 2000})
    first = harness.interrupt_event(run_id)
    assert first["audience"] == "team:ops"
    assert _audiences(harness, "team:ops") == [run_id] and _audiences(harness, "team:leads") == []

    report = _past_deadline(harness, run_id)
    assert report.escalated == [run_id] or harness.kind == "embedded"  # (the embedded worker may be first)
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.WAITING and run.interrupt is not None
    assert run.interrupt.audience == "team:leads" and run.interrupt.request_id == first["requestId"]
    assert run.interrupt.expires_at > first["expiresAt"]
    assert _audiences(harness, "team:ops") == [] and _audiences(harness, "team:leads") == [run_id]
    expired = _events(harness, run_id, "interrupt.expired")
    assert [e.data["action"] for e in expired] == ["escalate"]
    assert expired[0].data["escalation"] == 1 and expired[0].data["audience"] == "team:leads"
    assert expired[0].data["from"] == "team:ops" and expired[0].data["newExpiresAt"] == run.interrupt.expires_at
    fresh = _events(harness, run_id, "interrupt")
    assert len(fresh) == 2 and fresh[-1].data["audience"] == "team:leads" and fresh[-1].data["escalation"] == 1
    assert fresh[-1].data["requestId"] == first["requestId"]

    _past_deadline(harness, run_id)
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.WAITING and run.interrupt is not None and run.interrupt.audience == "user:cto"
    assert _audiences(harness, "team:leads") == [] and _audiences(harness, "user:cto") == [run_id]

    _past_deadline(harness, run_id)
    _settle(harness, run_id)
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.FAILED, run
    actions = [e.data["action"] for e in _events(harness, run_id, "interrupt.expired")]
    assert actions == ["escalate", "escalate", "fail"]
    assert _audiences(harness, "user:cto") == [] and _index_members(harness) == 0
    assert harness.pw.resume(first["resumeToken"], selected="red").outcome is ResumeOutcome.EXPIRED


def test_the_same_token_answers_the_escalated_interrupt(harness: Harness) -> None:
    """After one escalation the token the first audience had still answers, once."""
    run_id = harness.start_and_run(fe.escalating, {"audience": "team:ops", "policy": TWO_STEPS})
    token = harness.interrupt_event(run_id)["resumeToken"]
    _past_deadline(harness, run_id)
    assert harness.pw.get_run(run_id).status is RunStatus.WAITING
    assert harness.pw.resume(token, selected="blue").outcome is ResumeOutcome.ACCEPTED
    harness.run_jobs()
    _settle(harness, run_id)
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.COMPLETED and run.output["picked"] == "blue"
    assert harness.pw.resume(token, selected="red").outcome is ResumeOutcome.ALREADY_RESOLVED
    assert _audiences(harness, "team:leads") == [] and _audiences(harness, "team:ops") == []



def test_an_escalation_keeps_the_runs_snapshots_as_long_as_the_run(harness: Harness) -> None:
    """A run paused at a later step keeps the data its steps started with (fork's snapshots); an
    escalation that asks again for longer than the first TTL and its grace keeps them as long."""
    policy = {"escalate": {"to": "team:leads", "ttl_ms": 300_000}}
    run_id = harness.start_and_run(fe.escalates_later, {"policy": policy})
    harness.run_jobs()
    client = harness.pw.store.client  # type: ignore[attr-defined]
    assert client.hexists(keys.snapshots(run_id), "1")
    _past_deadline(harness, run_id)
    assert harness.pw.get_run(run_id).status is RunStatus.WAITING
    assert client.pttl(keys.snapshots(run_id)) >= client.pttl(keys.run(run_id)) - 1000 > 300_000
    assert harness.pw.fork(run_id, step=1)


def test_a_child_runs_escalation_shows_on_its_parents_stream(harness: Harness) -> None:
    """A child run's escalated interrupt is announced on its parent's stream too, listed under the
    parent's run id with its new audience, and answered by the same token; outputs flow up."""
    parent = harness.start_and_run(fe.parent_of_escalating, {"policy": TWO_STEPS})
    token = harness.interrupt_event(parent)["resumeToken"]
    child = harness.pw.list_interrupts(run_id=parent).items[0].run_id
    assert child != parent
    _past_deadline(harness, child)
    (listed,) = harness.pw.list_interrupts(run_id=parent).items
    assert listed.audience == "team:leads" and listed.run_id == child
    asked = [e.data for e in _events(harness, parent, "interrupt")]
    assert [e.get("audience") for e in asked] == ["team:ops", "team:leads"] and asked[-1]["rootRunId"] == parent
    assert harness.pw.resume(token, selected="blue").outcome is ResumeOutcome.ACCEPTED
    harness.run_jobs()
    _settle(harness, child)
    _settle(harness, parent)
    harness.run_jobs()
    _settle(harness, parent)
    run = harness.pw.get_run(parent)
    assert run.status is RunStatus.COMPLETED and run.output["child_picked"] == "blue", run


def test_a_workflow_default_escalates_then_applies_its_then(harness: Harness) -> None:
    """Workflow(on_expire={"escalate": ...}) escalates its interrupts, then fails the run."""
    run_id = harness.start_and_run(fe.escalates_by_default)
    _past_deadline(harness, run_id)
    run = harness.pw.get_run(run_id)
    assert run.interrupt is not None and run.interrupt.audience == "team:leads"
    _past_deadline(harness, run_id)
    _settle(harness, run_id)
    assert harness.pw.get_run(run_id).status is RunStatus.FAILED


def _answer_read_now(harness: Harness, run_id: str, token: str) -> Callable[[], ResumeOutcome]:
    """Read the interrupt as a resume does (lookup), and return the commit of the answer "red"
    against what was read, to run later: the store's own resume, as ``Parkway.resume`` calls it."""
    store, token_hash = harness.pw.store, tokens.hash_token(token)
    read = store.lookup(run_id, token_hash, now_ms()).interrupt
    assert read is not None

    def commit() -> ResumeOutcome:
        answer = Answer(read, token_hash, None, JournalEntry("interrupt", "color", "red", "choice"),
                        {"requestId": read.request_id}, now_ms())
        done = store.resume(run_id, answer)
        if done.outcome is ResumeOutcome.ACCEPTED and not done.handed_off:
            harness.pw.backend.dispatcher.enqueue(run_id, done.step, done.fence)
        return done.outcome

    return commit


def _parked(harness: Harness) -> tuple[str, dict[str, Any], IndexEntry]:
    """A run of ``escalating`` parked for a minute, its interrupt event and its index entry."""
    run_id = harness.start_and_run(fe.escalating, {"audience": "team:ops", "policy": TWO_STEPS, "ttl_ms": 60_000})
    event = harness.interrupt_event(run_id)
    return run_id, event, IndexEntry(event["createdAt"], event["expiresAt"], "escalating", run_id)


def _answered_once(harness: Harness, run_id: str) -> None:
    harness.run_jobs()
    _settle(harness, run_id)
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.COMPLETED and run.output["picked"] == "red", run
    assert len(_events(harness, run_id, "interrupt.resumed")) == 1
    assert harness.pw.list_interrupts(audience="team:leads").items == ()
    assert _index_members(harness) == 0  # the escalated interrupt's members went with the answer


def test_an_answer_read_before_an_escalation_answers_the_escalated_one(harness: Harness) -> None:
    """An answer that read the interrupt before the reconciler escalated it, and commits after,
    answers the escalated interrupt: resume.lua says 'moved', the store reads it again and commits
    once (with the new audience's index member removed)."""
    run_id, event, entry = _parked(harness)
    commit = _answer_read_now(harness, run_id, event["resumeToken"])
    assert harness.pw.store.expire(entry, event["expiresAt"]).outcome == "escalated"
    assert commit() is ResumeOutcome.ACCEPTED
    _answered_once(harness, run_id)
    assert [e.data["action"] for e in _events(harness, run_id, "interrupt.expired")] == ["escalate"]


def test_an_answer_committed_first_leaves_nothing_to_escalate(harness: Harness) -> None:
    """The reconciler's pass after an answer finds nothing pending: no escalation, no event."""
    run_id, event, entry = _parked(harness)
    assert _answer_read_now(harness, run_id, event["resumeToken"])() is ResumeOutcome.ACCEPTED
    assert harness.pw.store.expire(entry, event["expiresAt"]).outcome == "gone"
    _answered_once(harness, run_id)
    assert _events(harness, run_id, "interrupt.expired") == []


def test_answers_racing_escalations_answer_exactly_once(harness: Harness) -> None:
    """Ten answers read before and ten reconciler passes, all at once: the answer taken once (those
    that commit after it read accepted: the same answer again), at most one escalation, the run
    completes once with the answer, no index keeps a member of it."""
    run_id, event, entry = _parked(harness)
    commits = [_answer_read_now(harness, run_id, event["resumeToken"]) for _ in range(10)]

    def one(i: int) -> str:
        if i % 2:
            return commits[i // 2]().value
        return harness.pw.store.expire(entry, event["expiresAt"]).outcome

    outcomes = all_at_once(one, 20)
    assert outcomes.count("accepted") >= 1, outcomes
    assert outcomes.count("escalated") <= 1, outcomes
    _answered_once(harness, run_id)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"escalate": {}}, "takes"),
        ({"escalate": {"to": []}}, "'to'"),
        ({"escalate": {"to": "team ops"}}, "audience"),
        ({"escalate": {"to": "a", "times": 0}}, "'times'"),
        ({"escalate": {"to": ["a", "b"], "times": 1}}, "'times'"),
        ({"escalate": {"to": "a", "times": 11}}, "'times'"),
        ({"escalate": {"to": "a", "ttl_ms": 5}}, "'ttl_ms'"),
        ({"escalate": {"to": "a", "then": {"escalate": {"to": "b"}}}}, "cannot escalate again"),
        ({"escalate": {"to": "a", "then": "later"}}, "on_expire must be"),
        ({"escalate": {"to": "a", "also": 1}}, "takes"),
    ],
)
def test_a_bad_escalation_is_refused_clearly(spec: Any, message: str) -> None:
    """Each malformed escalate spec raises ValidationError saying what is wrong."""
    with pytest.raises(ValidationError, match=message):
        expiry_policy(InterruptRequest.model_validate(COLORS), spec)


def test_times_repeats_the_last_audience() -> None:
    """times beyond the audiences given asks the last one again; then defaults to expire."""
    policy = expiry_policy(InterruptRequest.model_validate(COLORS), {"escalate": {"to": ["a", "b"], "times": 4}})
    assert policy == {"action": "escalate", "to": ["a", "b", "b", "b"], "ttl_ms": None, "then": {"action": "expire"}}


def test_the_readme_escalation_example_runs(tmp_path: Path) -> None:
    """The README's escalation example runs as printed (embedded) and prints what it says."""
    lines = run_readme_example("### Escalation", tmp_path)
    assert lines == ["[(True, 'team:leads')]", "accepted", "True", "escalate team:leads"]
