"""Workflows for the expiry tests whose interrupts expire together, whenever they were parked."""

from __future__ import annotations

import time
from typing import Any

from parkway import InterruptCancelled, Workflow, use_interrupt
from tests.flows import COLORS

until = Workflow("until", on_expire=None)


@until.node(start=True)
def ask_until(data: dict[str, Any]) -> dict[str, Any]:
    """Asks with a TTL that ends at ``data["deadline"]`` (epoch ms; at least 1 s from the pause),
    under the expiry policy ``data["policy"]``."""
    ttl_ms = max(1000, int(data["deadline"] - time.time() * 1000))
    try:
        picked = use_interrupt(COLORS, id="color", ttl_ms=ttl_ms, on_expire=data.get("policy"))
    except InterruptCancelled as exc:
        return {"picked": None, "cancelled": exc.reason}
    return {"picked": picked}
