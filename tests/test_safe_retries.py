"""Retries that are safe when the outcome is unknown (issue 24): a caller whose resume or start got no
reply (a dropped connection, a replica shortfall) cannot tell whether it was taken, so it calls
again. Repeating the same call must then read as the first one did: a resume with the same token and
the same answer is ``accepted`` (another answer still reads ``already_resolved``), and a start with a
caller-chosen run id and the same input returns that run (another input is still refused)."""

from __future__ import annotations

import threading

import pytest

from parkway import Parkway, Settings
from parkway.runtime.errors import ValidationError
from parkway.runtime.protocol import ResumeOutcome
from parkway.runtime.store import Answer
from tests import flows
from tests.conftest import SECRET, Harness


def test_a_resume_repeated_with_the_same_answer_reads_accepted(harness: Harness) -> None:
    """The same token and answer again, from the same client or another one, reads ``accepted``; a
    different answer reads ``already_resolved``; the run takes the first answer once."""
    run_id = harness.start_and_run(flows.stepper, {"tag": "again"})
    token = harness.token(run_id)
    assert harness.pw.resume(token, selected="red").outcome is ResumeOutcome.ACCEPTED
    assert harness.pw.resume(token, selected="red").outcome is ResumeOutcome.ACCEPTED
    assert harness.pw.resume(token, selected="blue").outcome is ResumeOutcome.ALREADY_RESOLVED
    if harness.kind == "redis":
        with Parkway(harness.settings) as other:  # a client that never read the interrupt
            assert other.resume(token, selected="red").outcome is ResumeOutcome.ACCEPTED
            assert other.resume(token, selected="blue").outcome is ResumeOutcome.ALREADY_RESOLVED
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.output is not None and run.output["answer"] == "red"
    types = [e.type for e in harness.pw.stream(run_id, timeout=10)]
    assert types.count("interrupt.resumed") == 1, types
    # after the run moved on, the answer it took still reads accepted
    assert harness.pw.resume(token, selected="red").outcome is ResumeOutcome.ACCEPTED


def test_the_same_answer_from_another_responder_reads_already_resolved(harness: Harness) -> None:
    """Only one's own answer reads accepted again: ana's answer sent again by ana reads ``accepted``,
    the same choice sent by bob reads ``already_resolved`` (bob did not answer: ana did), and the
    interrupt keeps ana as its responder."""
    run_id = harness.start_and_run(flows.stepper, {"tag": "who"})
    token = harness.token(run_id)
    assert harness.pw.resume(token, selected="red", responder="ana").outcome is ResumeOutcome.ACCEPTED
    assert harness.pw.resume(token, selected="red", responder="bob").outcome is ResumeOutcome.ALREADY_RESOLVED
    assert harness.pw.resume(token, selected="red").outcome is ResumeOutcome.ALREADY_RESOLVED
    assert harness.pw.resume(token, selected="red", responder="ana").outcome is ResumeOutcome.ACCEPTED
    (ended,) = harness.pw.list_interrupts(run_id=run_id, status="resolved").items
    assert ended.lifecycle is not None and ended.lifecycle.responder == "ana"


def test_a_commit_whose_reply_was_lost_reads_accepted_when_sent_again(harness: Harness) -> None:
    """The store's resume sent twice with one prepared answer (the first reply lost): the second
    reads ``accepted`` and hands off no second job."""
    run_id = harness.start_and_run(flows.stepper, {"tag": "lost"})
    answer = harness.pw.prepare_answer(harness.token(run_id), selected="blue")
    assert isinstance(answer, Answer)
    first = harness.pw.store.resume(run_id, answer)
    again = harness.pw.store.resume(run_id, answer)
    assert first.outcome is again.outcome is ResumeOutcome.ACCEPTED
    assert again.handed_off and again.request_id == first.request_id
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.output is not None and run.output["answer"] == "blue"


def test_a_cancelled_interrupt_still_refuses_an_answer(harness: Harness) -> None:
    """Only one's own answer reads accepted again: an interrupt cancelled refuses any answer."""
    run_id = harness.start_and_run(flows.stepper, {"tag": "cancelled"})
    token = harness.token(run_id)
    assert harness.pw.cancel_interrupt(token).outcome is ResumeOutcome.ACCEPTED
    assert harness.pw.resume(token, selected="red").outcome is ResumeOutcome.ALREADY_RESOLVED


def test_a_start_repeated_with_the_same_input_returns_that_run(harness: Harness) -> None:
    """``start(run_id=...)`` again with the same workflow and input returns the run and starts
    nothing more; another input, workflow or owner is refused as before."""
    pw = harness.pw
    run_id = pw.start(flows.stepper, {"tag": "s1"}, run_id="order-17", tenant="acme")  # acme's order-17
    assert pw.start(flows.stepper, {"tag": "s1"}, run_id="order-17", tenant="acme") == run_id
    if harness.kind == "redis":
        with Parkway(Settings(redis_url=harness.settings.redis_url, secret=SECRET)) as other:
            assert other.start(flows.stepper, {"tag": "s1"}, run_id="order-17", tenant="acme") == run_id
    with pytest.raises(ValidationError, match="already exists"):
        pw.start(flows.stepper, {"tag": "s2"}, run_id="order-17", tenant="acme")
    with pytest.raises(ValidationError, match="already exists"):
        pw.start(flows.stepper, {"tag": "s1"}, run_id="order-17", tenant="acme", owner="bob")
    with pytest.raises(ValidationError, match="already exists"):
        pw.start(flows.contracted, {"tag": "s1"}, run_id="order-17", tenant="acme")
    harness.run_jobs()
    events = list(pw.stream(run_id, until="settled", timeout=10))
    assert [e.type for e in events].count("run.started") == 1
    assert [e.type for e in events].count("node.started") == 1
    assert len(pw.list_interrupts(run_id=run_id).items) == 1


def test_racing_starts_of_one_run_id_and_input_make_one_run(harness: Harness) -> None:
    """Eight threads (each with its own client on Redis) start the same id with the same input at
    once, as retries after a lost reply can: all get the one run, which starts once; a racing start
    with another input is refused."""
    if harness.kind != "redis":
        pytest.skip("one process's embedded store; the race needs clients of their own")
    clients = [Parkway(harness.settings) for _ in range(8)]
    barrier = threading.Barrier(9)
    got: list[str] = []
    refused: list[BaseException] = []

    def start(pw: Parkway, tag: str) -> None:
        barrier.wait()
        try:
            got.append(pw.start(flows.stepper, {"tag": tag}, run_id="race-1", tenant="acme"))
        except ValidationError as exc:
            refused.append(exc)

    other = Parkway(harness.settings)
    try:
        threads = [threading.Thread(target=start, args=(pw, "same")) for pw in clients]
        threads.append(threading.Thread(target=start, args=(other, "other")))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for pw in [*clients, other]:
            pw.close()
    run_id = "acme~race-1"
    run = harness.pw.get_run(run_id)
    # the other input wins the race or is refused; either way one run holds the id
    winner = run.input["tag"]
    assert got.count(run_id) == (8 if winner == "same" else 1) and len(got) + len(refused) == 9, (got, refused)
    harness.run_jobs()
    events = [e.type for e in harness.pw.stream(run_id, until="settled", timeout=10)]
    assert events.count("run.started") == 1 and events.count("node.started") == 1, events
