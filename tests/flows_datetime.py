"""A workflow that asks for a date and time (``tests.flows_datetime:NAME``)."""

from __future__ import annotations

from typing import Any

from parkway import Workflow, use_interrupt

ASKED = {"kind": "datetime", "question": "When shall we call?", "timezone": "Europe/Paris",
         "earliest": "2030-01-07T09:00", "latest": "2030-01-11T18:00:00+01:00"}
"""Monday 9:00 to Friday 18:00 of a week in Paris (the earliest bound a wall time, read in the zone)"""

booking = Workflow("book_call")


@booking.node(start=True)
def book(data: dict[str, Any]) -> dict[str, Any]:
    return {"at": use_interrupt(ASKED, id="when")}
