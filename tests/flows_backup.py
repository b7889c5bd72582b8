"""Workflows for the backup-and-restore test; module-level so worker processes import them as
``tests.flows_backup:NAME``. Each node writes what it does to a file named by ``PARKWAY_LEDGER``
(one per world: the live server's workers and the restored server's keep separate files), a
witness outside Redis that a restore cannot roll back."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from parkway import Workflow, use_interrupt
from tests.flows import COLORS

ledgered = Workflow("ledgered")


def note(data: dict[str, Any], what: str) -> None:
    """Append ``<tag> <what>`` to the ledger file: one write of one short line, O_APPEND, so lines
    from several worker processes never interleave."""
    fd = os.open(os.environ["PARKWAY_LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{data['tag']} {what}\n".encode())
    finally:
        os.close(fd)


@ledgered.node(start=True)
def ask_then_record(data: dict[str, Any]) -> dict[str, Any]:
    note(data, "asked")  # every attempt: the first, and the replay after the answer
    color = use_interrupt(COLORS, id="color", ttl_ms=600_000)
    note(data, f"answered {color}")  # only the attempt that has the answer
    return {"color": color}


busy = Workflow("busy")


@busy.node(start=True)
def hold_the_worker(data: dict[str, Any]) -> dict[str, Any]:
    """Keeps its worker busy while the file ``data["gate"]`` exists (a gate outside Redis, which a
    restore does not bring back)."""
    note(data, "began")
    while Path(data["gate"]).exists():
        time.sleep(0.02)
    note(data, "passed")
    return {}
