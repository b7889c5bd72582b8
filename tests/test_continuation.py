"""Background continuation and what an interrupt event tells a client about how to show it."""

from __future__ import annotations

from parkway import RunStatus
from tests import flows
from tests.conftest import Harness


def test_complete_response_ends_delivery_while_the_run_goes_on(harness: Harness) -> None:
    """A stream ends at the delivered `done`; the run still pauses, is resumed, and completes, and a
    stream re-attached after the delivered event sees run.completed and the final done; the
    delivered `done` is sent once although the node replays."""
    run_id = harness.start_and_run(flows.delivering)
    delivered = list(harness.pw.stream(run_id, timeout=10))
    assert delivered[-1].type == "done" and delivered[-1].data["status"] == "delivered"
    assert [e.type for e in delivered].count("data") == 1
    assert harness.pw.get_run(run_id).status is RunStatus.WAITING  # execution went on to the pause
    assert harness.pw.resume(harness.token(run_id), selected="blue").accepted
    harness.run_jobs()
    rest = list(harness.pw.stream(run_id, after=delivered[-1].id, timeout=10))
    types = [e.type for e in rest]
    assert types[-2:] == ["run.completed", "done"] and rest[-1].data["status"] == "completed"
    assert "data" not in types and types.count("done") == 1  # neither emitted again on replay
    assert harness.pw.get_run(run_id).output == {"after": "blue", "wrapped": True}


def test_a_stream_reattaches_from_its_middle_event(harness: Harness) -> None:
    """stream(after=an event in the middle) yields exactly the events after it."""
    run_id = harness.start_and_run(flows.one_choice)
    assert harness.pw.resume(harness.token(run_id), selected="red").accepted
    harness.run_jobs()
    everything = list(harness.pw.stream(run_id, timeout=10))
    middle = len(everything) // 2
    again = list(harness.pw.stream(run_id, after=everything[middle].id, timeout=10))
    assert [e.id for e in again] == [e.id for e in everything[middle + 1 :]]


def test_interrupt_events_say_how_to_present_them(harness: Harness) -> None:
    """Static options, a dynamic picker, free text and a contract are told apart, with the number
    of options the server embedded (0 for a picker)."""
    seen = {}
    for flow, data in ((flows.one_choice, {}), (flows.two_questions, {}), (flows.contracted, {"team": "x"})):
        run_id = harness.start_and_run(flow, data)
        event = harness.interrupt_event(run_id)
        seen[event["presentation"]] = event["optionCount"]
    run_id = harness.start_and_run(flows.kinds)
    assert harness.pw.resume(harness.token(run_id), selected="product").accepted
    harness.run_jobs()
    picker = [e.data for e in harness.pw.store.read_events(run_id, "0", None, 100) if e.type == "interrupt"][-1]
    seen[picker["presentation"]] = picker["optionCount"]
    assert seen == {"static-options": 2, "freeform": 0, "contract": 0, "dynamic-picker": 0}


def test_an_interrupt_event_without_options_streams_them_as_an_empty_list(harness: Harness) -> None:
    """stream() gives a text question's request ``options: []``, a list as for a choice's (before
    the fix: an empty tuple)."""
    run_id = harness.start_and_run(flows.two_questions)
    [event] = [e for e in harness.pw.stream(run_id, until="settled", timeout=10) if e.type == "interrupt"]
    assert event.data["input"]["options"] == [] and isinstance(event.data["input"]["options"], list)
