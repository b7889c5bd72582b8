"""The date/time interrupt kind (``parkway/runtime/kinds/date_time.py``): a moment between bounds in
a time zone, asked and answered from Python, the command line, the terminal prompt and HTTP; a
naive, unparseable or out-of-bounds answer is refused with a clear error and the interrupt stays
open. It has no options, so it takes no answer links."""

from __future__ import annotations

import io
from collections.abc import Iterator

import httpx
import pytest
import redis

from parkway import InvalidAnswer, Parkway, RunStatus, Settings, ValidationError
from parkway.cli.ask import ask
from parkway.runtime.answers import validate_answer
from parkway.runtime.protocol import InterruptRequest
from tests import flows_datetime
from tests.conftest import SECRET, Harness
from tests.test_api import KEY, serving
from tests.test_cli import in_process

PARIS_NOON = "2030-01-08T12:00:00+01:00"


@pytest.fixture
def harness(redis_client: redis.Redis, redis_url: str) -> Iterator[Harness]:
    settings = Settings(redis_url=redis_url, secret=SECRET)
    with Parkway(settings) as pw:
        yield Harness("redis", pw, settings, redis_client)


def _waiting(h: Harness) -> tuple[str, str]:
    run_id = h.start_and_run(flows_datetime.booking, {})
    return run_id, h.token(run_id)


def test_a_request_keeps_its_bounds_in_its_zone_and_refuses_a_bad_one() -> None:
    """The bounds are normalised to ISO strings in the request's zone (a wall time read in it); an
    unknown zone, an unreadable bound or bounds in the wrong order are refused when the request is made."""
    asked = InterruptRequest.model_validate(flows_datetime.ASKED)
    assert asked.spec == {"timezone": "Europe/Paris", "earliest": "2030-01-07T09:00:00+01:00",
                          "latest": "2030-01-11T18:00:00+01:00"}
    assert asked.public()["spec"] == asked.spec
    assert InterruptRequest.model_validate({"kind": "datetime"}).spec == {"timezone": "UTC"}
    unbounded = InterruptRequest.model_validate({"kind": "datetime"})
    with pytest.raises(InvalidAnswer, match="out of the range of dates"):  # UTC of year 1 less an hour
        validate_answer(unbounded, value="0001-01-01T00:00+01:00")
    for bad, why in (({"timezone": "Mars/Olympus"}, "unknown timezone"), ({"earliest": "soon"}, "earliest must be"),
                     ({"earliest": "2030-01-02T00:00Z", "latest": "2030-01-01T00:00Z"}, "is after latest"),
                     ({"options": [{"id": "a", "label": "A"}]}, "no options"),
                     ({"timezone": "Pacific/Kiritimati", "earliest": "0001-01-01T00:00Z"}, "earliest must be")):
        with pytest.raises(ValueError, match=why):
            InterruptRequest.model_validate({"kind": "datetime", **bad})


def test_python_answers_with_an_offset_or_a_zone_and_the_node_gets_it_in_the_requests_zone(
    harness: Harness,
) -> None:
    """resume(value=...) and resume_message (``value`` in its metadata) take an ISO string with an
    offset (or ``Z``) or a wall time with ``[zone]``; use_interrupt returns the moment as an ISO
    string in the request's zone."""
    run_id, token = _waiting(harness)
    assert harness.pw.resume(token, value="2030-01-08T11:00:00Z").accepted
    harness.run_jobs()
    assert harness.pw.get_run(run_id).output == {"at": PARIS_NOON}
    run_id, token = _waiting(harness)
    assert harness.pw.resume(token, value="2030-01-08T07:00[America/New_York]").accepted
    harness.run_jobs()
    assert harness.pw.get_run(run_id).output == {"at": "2030-01-08T13:00:00+01:00"}
    run_id, token = _waiting(harness)  # from a chat message's metadata, as `value`
    request_id = harness.pw.list_interrupts(run_id=run_id).items[0].request_id
    message = {"metadata": {"resume": {"token": token, "requestId": request_id, "value": "2030-01-08T12:00+01:00"}}}
    assert harness.pw.resume_message(message).accepted
    harness.run_jobs()
    assert harness.pw.get_run(run_id).output == {"at": PARIS_NOON}


@pytest.mark.parametrize(("answer", "why"), [
    ("2030-01-08T12:00", "has no offset or zone"),
    ("next tuesday", "is not an ISO 8601 date and time"),
    ("2030-01-12T10:00+01:00", "is after the latest allowed, 2030-01-11T18:00:00[+]01:00"),
    ("2030-01-07T08:59+01:00", "is before the earliest allowed, 2030-01-07T09:00:00[+]01:00"),
    (1893495600, "takes an ISO 8601 date and time"),
    ("0001-01-01T00:00+01:00", "before the earliest allowed"),
])
def test_a_naive_unparseable_or_out_of_bounds_answer_is_refused_and_the_token_still_works(
    harness: Harness, answer: object, why: str
) -> None:
    """Each bad answer raises InvalidAnswer saying why; the run keeps waiting and the same token then
    answers."""
    run_id, token = _waiting(harness)
    with pytest.raises(InvalidAnswer, match=why):
        harness.pw.resume(token, value=answer)
    with pytest.raises(InvalidAnswer, match="takes value=<an ISO 8601 date and time>, not selected"):
        harness.pw.resume(token, selected="2030-01-08T12:00+01:00")
    assert harness.pw.get_run(run_id).status is RunStatus.WAITING
    assert harness.pw.resume(token, value=PARIS_NOON).accepted


def test_a_date_takes_no_answer_links(harness: Harness) -> None:
    """answer_links refuses a datetime interrupt: a link answers one option, and a date has none."""
    _, token = _waiting(harness)
    with pytest.raises(ValidationError, match="answer links need a choice with options, not a datetime request"):
        harness.pw.answer_links(token, "https://example.test")


def test_the_command_line_answers_with_text_and_refuses_select(harness: Harness, redis_url: str) -> None:
    """`parkway resume TOKEN --text ISO` answers; --select is refused naming --text; a naive answer
    exits 1 with the kind's reason; `parkway interrupts` shows the zone and the bounds."""
    run_id, token = _waiting(harness)
    url = ["--redis-url", redis_url]
    listed = in_process("interrupts", *url)
    assert "a date and time in Europe/Paris" in listed.stdout and "until 2030-01-11T18:00:00+01:00" in listed.stdout
    refused = in_process("resume", token, "--select", "x", *url)
    assert refused.returncode == 1 and "a datetime question takes --text TEXT, not --select" in refused.stderr
    naive = in_process("resume", token, "--text", "2030-01-08T12:00", *url)
    assert naive.returncode == 1 and "has no offset or zone" in naive.stderr
    assert in_process("resume", token, "--text", "2030-01-08T12:00+01:00", *url).returncode == 0
    harness.run_jobs()
    assert harness.pw.get_run(run_id).output == {"at": PARIS_NOON}


def test_the_terminal_prompt_reads_a_wall_time_in_the_requests_zone() -> None:
    """At the terminal the prompt names the zone and the bounds; a wall time typed there is read in
    that zone, and an out-of-bounds one is asked again."""
    asked = InterruptRequest.model_validate(flows_datetime.ASKED)
    out = io.StringIO()
    answer = ask(asked, io.StringIO("2030-02-01T10:00\n2030-01-08T12:00\n"), out)
    assert answer == {"value": "2030-01-08T12:00[Europe/Paris]"}
    shown = out.getvalue()
    assert "a date and time in Europe/Paris" in shown and "from 2030-01-07T09:00:00+01:00" in shown
    assert "is after the latest allowed" in shown and "try again" in shown


def test_http_answers_by_token_and_by_request_id_and_describes_its_widget(
    harness: Harness, redis_url: str
) -> None:
    """POST /v1/resume and POST /v1/interrupts/{id}/answer take the ISO string as ``value`` (a naive
    one is a 422 that names why); GET /v1/interrupts/{id}/widget gives the page a datetime-local
    field with the bounds as wall times in the zone."""
    with serving(redis_url) as srv, httpx.Client(base_url=srv.url, timeout=15,
                                                 headers={"Authorization": f"Bearer {KEY}"}) as api:
        run_id, token = _waiting(harness)
        naive = api.post("/v1/resume", json={"token": token, "value": "2030-01-08T12:00"})
        assert naive.status_code == 422 and "has no offset or zone" in naive.text
        assert api.post("/v1/resume", json={"token": token, "value": "2030-01-08T11:00Z"}).status_code == 200
        harness.run_jobs()
        assert harness.pw.get_run(run_id).output == {"at": PARIS_NOON}

        run_id, token = _waiting(harness)
        request_id = harness.pw.list_interrupts(run_id=run_id).items[0].request_id
        widget = api.get(f"/v1/interrupts/{request_id}/widget").json()
        assert widget == {"kind": "datetime", "widget": {
            "control": "field", "input": "datetime-local", "label": "Date and time (Europe/Paris)",
            "suffix": "[Europe/Paris]", "answer": "value", "tag": "datetime", "min": "2030-01-07T09:00",
            "max": "2030-01-11T18:00",
            "hint": "from 2030-01-07T09:00:00+01:00 until 2030-01-11T18:00:00+01:00"}}
        late = api.post(f"/v1/interrupts/{request_id}/answer", json={"value": "2030-01-12T09:00[Europe/Paris]"})
        assert late.status_code == 422 and "after the latest allowed" in late.text
        assert api.post(f"/v1/interrupts/{request_id}/answer",
                        json={"value": "2030-01-08T12:00[Europe/Paris]"}).status_code == 200
        harness.run_jobs()
        assert harness.pw.get_run(run_id).output == {"at": PARIS_NOON}
