"""Answers keep their shape at every door (issue 19, defects 6 and 7)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from parkway import Parkway, RunStatus, Settings
from tests import flows
from tests.conftest import SECRET, Harness
from tests.test_cli import _assert_one_error_line, parkway


@pytest.fixture
def live(redis_client: redis.Redis, redis_url: str) -> Iterator[Harness]:
    settings = Settings(redis_url=redis_url, secret=SECRET)
    with Parkway(settings) as client:
        yield Harness("redis", client, settings, redis_client)


def test_resume_select_on_a_text_question_is_refused_and_the_token_still_works(live: Harness, redis_url: str) -> None:
    """`parkway resume <text token> --select foo` exits 1 naming --text and records nothing (before
    the fix it recorded "foo" as the text); --text then answers it."""
    url = ["--redis-url", redis_url]
    pw = live.pw
    run_id = live.start_and_run(flows.two_questions)
    token = live.token(run_id)
    refused = parkway("resume", token, "--select", "foo", *url)
    _assert_one_error_line(refused, r"a text question takes --text TEXT, not --select")
    assert pw.get_run(run_id).status is RunStatus.WAITING
    assert parkway("resume", token, "--text", "Ada", *url).returncode == 0


def test_an_interrupt_event_without_options_streams_them_as_an_empty_list(harness: Harness) -> None:
    """stream() gives a text question's request ``options: []``, a list as for a choice's (before
    the fix: an empty tuple)."""
    run_id = harness.start_and_run(flows.two_questions)
    [event] = [e for e in harness.pw.stream(run_id, until="settled", timeout=10) if e.type == "interrupt"]
    assert event.data["input"]["options"] == [] and isinstance(event.data["input"]["options"], list)
