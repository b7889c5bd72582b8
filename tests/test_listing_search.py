"""Listings by workflow prefix and question text (the inbox page's filters), on both deployments."""

from __future__ import annotations

import asyncio

import pytest

from parkway import AsyncParkway, ValidationError
from parkway.runtime.authority import Caller
from tests import flows
from tests.conftest import Harness


def test_a_listing_keeps_the_workflow_prefix_and_the_question_text_it_is_asked_for(harness: Harness) -> None:
    """``workflow_prefix`` and ``search`` (case ignored) filter before paging, with a caller too, and
    the awaited client passes them on; empty or over-long values are refused."""
    pw = harness.pw
    colors = pw.start(flows.one_choice, {}, tenant="acme")
    names = [pw.start(flows.two_questions, {}, tenant="acme") for _ in range(3)]
    harness.run_jobs()

    def listed(**filters: object) -> list[str]:
        return sorted(i.run_id for i in pw.list_interrupts(limit=2, **filters).items)  # type: ignore[arg-type]

    assert listed(workflow_prefix="one_") == [colors]
    assert listed(search="PICK A") == [colors]
    page = pw.list_interrupts(limit=2, search="your name", caller=Caller("machine", None, "acme"))
    assert len(page.items) == 2 and page.next_cursor is not None
    rest = pw.list_interrupts(limit=2, search="your name", cursor=page.next_cursor)
    assert sorted(i.run_id for i in page.items + rest.items) == sorted(names)
    assert listed(workflow_prefix="two_", search="color") == []
    awaited = asyncio.run(AsyncParkway(client=pw).list_interrupts(workflow_prefix="one_"))
    assert [i.run_id for i in awaited.items] == [colors]
    for bad in ({"search": ""}, {"workflow_prefix": "x" * 201}, {"search": "a\nb"}):
        with pytest.raises(ValidationError):
            pw.list_interrupts(**bad)  # type: ignore[arg-type]
