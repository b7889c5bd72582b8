"""One check each, which removed would let an answer or an authority go astray (issue 19's list of
mutations no test caught): each test here fails when its check is taken out."""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from parkway import Caller, Parkway, RunStatus
from parkway.adapters.redis.store.store import RedisStore, ScriptCall
from parkway.errors import MalformedResume
from parkway.runtime import tokens
from parkway.runtime.clock import now_ms
from tests import flows_fork, flows_guards
from tests import session_flows as sf
from tests.conftest import Harness, all_at_once
from tests.procs import free_port, wait_for

ADA = Caller("user", "ada", "acme")
SYSTEM = Caller("system")


# --- replay: the kind of a record decides, not only its name ---------------------------------


def test_a_deploy_swapping_an_unkeyed_node_state_for_an_unkeyed_model_call_is_nondeterministic(
    harness: Harness,
) -> None:
    """At the same position, with equal (empty) names, a model call where a node state was recorded
    is refused on replay: the record's kind differs."""
    run_id = harness.start_and_run(flows_guards.counting)
    assert harness.pw.check_deploy(run_id, flows_guards.counting).outcome == "consistent"
    report = harness.pw.check_deploy(run_id, flows_guards.modelling)
    assert report.outcome == "nondeterministic", report
    assert "state" in report.detail and "model" in report.detail


# --- tokens: a signature with padding is not a signature --------------------------------------


def test_a_token_with_a_trailing_padding_character_is_malformed(harness: Harness) -> None:
    """``<token>=`` decodes to the same signature bytes, but is not the token: it is refused as
    malformed (422 over HTTP), and the interrupt stays open for the real one."""
    run_id = harness.start_and_run(flows_guards.counting)
    token = harness.token(run_id)
    with pytest.raises(MalformedResume):
        tokens.parse(token + "=")
    with pytest.raises(MalformedResume):
        harness.pw.resume(token + "=", value="yes")
    assert harness.pw.resume(token, value="yes").accepted


# --- sessions: a follow-on waits while its branch is parked -----------------------------------


@pytest.fixture
def raiser(harness: Harness) -> Iterator[None]:
    """The self-parking tool raises its interrupts with the harness's client."""
    sf.raiser["pw"] = harness.pw
    sf.follow_ons.clear()
    yield
    sf.raiser.clear()


def test_plain_code_after_a_tool_call_on_a_branch_parked_during_the_call_waits_for_the_resume(
    harness: Harness, raiser: None
) -> None:
    """The branch is parked while the tool runs: its result is kept, the run is held, and the plain
    code after the call runs only after the interrupt is cleared."""
    sid = harness.pw.sessions.open(sf.self_parking, owner="ada", tenant="acme")
    sent = harness.pw.sessions.send(sid, "branch:mid-call", caller=ADA)
    harness.run_jobs()
    assert harness.pw.get_run(sent.run_id).status is RunStatus.WAITING
    assert sf.follow_ons == []
    assert harness.pw.sessions.resume_interrupt(sid, "mid-call", None).outcome == "resumed"
    harness.run_jobs()
    assert sf.follow_ons == ["parked"]


def test_a_model_call_on_a_branch_parked_after_its_run_began_waits_for_the_resume(
    harness: Harness, raiser: None
) -> None:
    """A branch parked after its run began (by the node's own code, just before it calls a model) is
    held at the call every time: the model is not called until the interrupt is cleared, then once."""
    path = tempfile.mkdtemp(prefix="pw-session-")
    sid = harness.pw.sessions.open(sf.parks_then_calls, owner="ada", tenant="acme")
    sent = harness.pw.sessions.send(sid, path, caller=ADA)
    harness.run_jobs()
    assert harness.pw.get_run(sent.run_id).status is RunStatus.WAITING
    assert _calls(path) == 0
    assert harness.pw.sessions.resume_interrupt(sid, "stop", None, caller=SYSTEM).outcome == "resumed"
    harness.run_jobs()
    assert _calls(path) == 1
    assert harness.pw.get_run(sent.run_id).status is RunStatus.COMPLETED


def _calls(path: str) -> int:
    """How many times the counting model was called (its marks in ``path``)."""
    marks = Path(path) / "model-calls"
    return len(marks.read_text()) if marks.exists() else 0


# --- sessions: what a clearing wakes -----------------------------------------------------------


def test_clearing_one_of_two_interrupts_leaves_the_held_run_held(harness: Harness, raiser: None) -> None:
    """A run held by two interrupts is not woken (its fence does not move) when one is cleared."""
    sid = harness.pw.sessions.open(sf.self_parking, owner="ada", tenant="acme")
    sent = harness.pw.sessions.send(sid, "branch:one,two", caller=ADA)
    harness.run_jobs()
    held = harness.pw.store.get_run(sent.run_id, now_ms())
    assert held is not None and held.status is RunStatus.WAITING
    assert harness.pw.sessions.resume_interrupt(sid, "one", None).outcome == "still_parked"
    harness.run_jobs()
    after = harness.pw.store.get_run(sent.run_id, now_ms())
    assert after is not None and (after.status, after.fence) == (RunStatus.WAITING, held.fence)
    assert harness.pw.sessions.resume_interrupt(sid, "two", None).outcome == "resumed"


def test_a_global_clear_gives_its_trigger_to_the_active_branch_not_to_a_held_run_on_an_abandoned_one(
    harness: Harness, raiser: None
) -> None:
    """Two branches' runs held, the abandoned one's by an interrupt anchored on it and then by a
    global one: clearing the global interrupt wakes both, and only the run on the active path gets
    its interrupt.resumed trigger."""
    sid = harness.pw.sessions.open(sf.self_parking, owner="ada", tenant="acme")
    one = harness.pw.sessions.send(sid, "branch:mine", caller=ADA)
    harness.run_jobs()
    two = harness.pw.sessions.edit(sid, one.message_id, "global:stop", caller=ADA)  # the head
    harness.run_jobs()
    assert harness.pw.sessions.resume_interrupt(sid, "mine", None).outcome == "cleared"
    assert {harness.pw.get_run(s.run_id).status for s in (one, two)} == {RunStatus.WAITING}
    cleared = harness.pw.sessions.resume_interrupt(sid, "stop", {"go": 1}, caller=SYSTEM)
    assert (cleared.outcome, cleared.run_id) == ("resumed", two.run_id)
    given = {s.run_id: _triggers(harness, s.run_id) for s in (one, two)}
    assert given == {one.run_id: [], two.run_id: ["stop"]}


def test_a_global_clear_leaves_a_held_run_held_while_its_own_branchs_interrupt_parks_it(
    harness: Harness, raiser: None
) -> None:
    """A run on an abandoned branch held by an interrupt anchored on its branch and by a global one
    stays held (its fence unmoved) when the global one is cleared, though nothing parks the active
    path any more; it is woken when its own branch's interrupt clears, with no trigger."""
    sid = harness.pw.sessions.open(sf.self_parking, owner="ada", tenant="acme")
    one = harness.pw.sessions.send(sid, "branch:mine", caller=ADA)
    harness.run_jobs()
    two = harness.pw.sessions.edit(sid, one.message_id, "global:stop", caller=ADA)  # the head
    harness.run_jobs()
    held = harness.pw.store.get_run(one.run_id, now_ms())
    assert held is not None and held.status is RunStatus.WAITING
    cleared = harness.pw.sessions.resume_interrupt(sid, "stop", {"go": 1}, caller=SYSTEM)
    assert (cleared.outcome, cleared.run_id) == ("resumed", two.run_id)
    harness.run_jobs()
    after = harness.pw.store.get_run(one.run_id, now_ms())
    assert after is not None and (after.status, after.fence) == (RunStatus.WAITING, held.fence)
    assert harness.pw.sessions.resume_interrupt(sid, "mine", None).outcome == "cleared"
    woken = harness.pw.store.get_run(one.run_id, now_ms())
    assert woken is not None and woken.fence > held.fence and _triggers(harness, one.run_id) == []


def test_a_global_clear_with_no_run_at_the_head_dispatches_one_and_gives_a_run_elsewhere_nothing(
    harness: Harness,
) -> None:
    """A global interrupt cleared while the head (a finished turn's reply) has no live run dispatches
    a run there for its trigger; the live run of another branch, waiting on its own question, is
    handed nothing (no interrupt.resumed in its journal or on its stream)."""
    sid = harness.pw.sessions.open(sf.busy, owner="ada", tenant="acme")
    done = harness.pw.sessions.send(sid, "hello", caller=ADA)
    harness.run_jobs()
    reply = harness.pw.sessions.get(sid).head
    asking = harness.pw.sessions.edit(sid, done.message_id, "?which", caller=ADA)
    harness.run_jobs()
    assert harness.pw.get_run(asking.run_id).status is RunStatus.WAITING
    harness.pw.sessions.switch(sid, reply, caller=ADA)
    stop = harness.pw.sessions.raise_interrupt(sid, "stop", caller=SYSTEM, scope="session")
    cleared = harness.pw.sessions.resume_interrupt(sid, stop, {"go": 1}, caller=SYSTEM)
    assert cleared.outcome == "dispatched" and cleared.run_id != asking.run_id
    assert _triggers(harness, asking.run_id) == []
    assert "interrupt.resumed" not in [e.type for e in harness.pw.store.read_events(asking.run_id, "0", None, 1000)]


def _triggers(h: Harness, run_id: str) -> list[str]:
    """The ids of the interrupt.resumed triggers delivered into the run's current activation."""
    run = h.pw.store.get_run(run_id, now_ms())
    assert run is not None
    journal, _ = h.pw.store.read_activation(run_id, run.step)
    return [e.value["interrupt_id"] for f, e in sorted(journal.items()) if f.startswith("g:")]


# --- sessions: a kept answer goes only to its own branch ----------------------------------------


def test_a_kept_answer_is_delivered_on_the_switch_back_to_its_branch_not_to_a_third_one(harness: Harness) -> None:
    """An answer kept for an abandoned branch stays kept when the head moves to another branch, and
    is delivered on the switch back to its own."""
    sid = harness.pw.sessions.open(sf.asking, owner="ada", tenant="acme")
    one = harness.pw.sessions.send(sid, "one", caller=ADA)
    harness.run_jobs()
    [asked] = harness.pw.sessions.get(sid).open_interrupts
    two = harness.pw.sessions.edit(sid, one.message_id, "two", caller=ADA)
    three = harness.pw.sessions.edit(sid, one.message_id, "three", caller=ADA)
    harness.run_jobs()
    harness.pw.sessions.switch(sid, two.message_id, caller=ADA)
    assert harness.pw.sessions.resume_interrupt(sid, asked.id, "ACC-1", caller=ADA).outcome == "cleared"
    harness.pw.sessions.switch(sid, three.message_id, caller=ADA)
    assert harness.pw.get_run(one.run_id).status is RunStatus.WAITING  # still kept
    harness.pw.sessions.switch(sid, one.message_id, caller=ADA)  # delivered
    harness.run_jobs()
    assert harness.pw.get_run(one.run_id).status is RunStatus.COMPLETED


# --- use_first: the racing child is its tree's tenant's ------------------------------------------


def test_the_child_use_first_races_belongs_to_its_parents_tenant(harness: Harness) -> None:
    """A root run started for a tenant: the child its use_first races is that tenant's too."""
    parent = harness.pw.start(flows_fork.racer, {"child": "asking"}, tenant="acme")
    harness.run_jobs()
    started = [e for e in harness.pw.stream(parent, until="settled", timeout=10) if e.type == "child.started"]
    child = started[0].data["childRunId"]
    record = harness.pw.store.get_run(child, now_ms())
    assert record is not None and record.tenant == "acme", record


# --- answer links: one answer, whatever races it ----------------------------------------------


def _slow_resume(call: ScriptCall, run: Callable[[], Any]) -> Any:
    """A resume that reaches the store late (a slow link's POST): racing posts all find the question open."""
    if call.name == "resume":
        time.sleep(0.3)
    return run()


@contextmanager
def _serving(pw: Parkway) -> Iterator[str]:
    """The HTTP app for ``pw`` served by uvicorn on a thread of this process (so the test can slow
    the client's scripts); its base URL."""
    import uvicorn

    from parkway.http.app import create_app

    server = uvicorn.Server(uvicorn.Config(create_app(pw), host="127.0.0.1", port=free_port(), log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, 20, "the server to start")
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(10)


def test_racing_posts_of_one_answer_link_record_one_answer(harness: Harness) -> None:
    """Concurrent POSTs of one link all find the question open, and their answers reach the store
    late (a slow link): the answer is recorded once, and each is told it is recorded (200: the same
    answer again is a retry, not another answer); another option's link then gets 409."""
    from tests import flows

    run_id = harness.start_and_run(flows.one_choice)
    store = harness.pw.store
    assert isinstance(store, RedisStore)

    with _serving(harness.pw) as base:
        links = harness.pw.answer_links(harness.token(run_id), base)
        url = links["red"]
        barrier = threading.Barrier(4)
        codes: list[int] = []

        def post() -> None:
            with httpx.Client(timeout=15) as browser:
                barrier.wait()
                codes.append(browser.post(url).status_code)

        with store.around_scripts(_slow_resume):
            threads = [threading.Thread(target=post) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        with httpx.Client(timeout=15) as browser:
            assert browser.post(links["blue"]).status_code == 409
    assert codes == [200, 200, 200, 200], codes
    harness.run_jobs()
    assert [e.type for e in harness.pw.stream(run_id, timeout=10)].count("interrupt.resumed") == 1


def test_racing_posts_of_two_options_links_thank_only_the_recorded_answer(harness: Harness) -> None:
    """Links for two options of one question POSTed at once, all finding it open (a slow link): the
    posts of one option are thanked, those of the other are told it was already answered (409),
    never "recorded", and the run got the thanked option."""
    from tests import flows

    run_id = harness.start_and_run(flows.one_choice)
    store = harness.pw.store
    assert isinstance(store, RedisStore)

    with _serving(harness.pw) as base:
        links = harness.pw.answer_links(harness.token(run_id), base)

        def post(i: int) -> tuple[str, int, str]:
            option = ("red", "blue")[i % 2]
            with httpx.Client(timeout=15) as browser:
                reply = browser.post(links[option])
            return option, reply.status_code, reply.text

        with store.around_scripts(_slow_resume):
            replies = all_at_once(post, 4)
    thanked = {option for option, code, text in replies if code == 200}
    assert len(thanked) == 1, replies
    assert all("is recorded" in text for _, code, text in replies if code == 200)
    for option, code, text in replies:
        if option not in thanked:
            assert code == 409 and "already answered" in text and "recorded" not in text, (option, code)
    harness.run_jobs()
    assert harness.pw.get_run(run_id).output["painted"] == thanked.pop()
