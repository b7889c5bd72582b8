"""What camelCase means for parkway's bodies and events, and the seed's names it leaves alone (the
README's HTTP section, "One dialect"): shared by tests/test_casing.py and tests/test_session_names.py."""

from __future__ import annotations

import re
from typing import Any

CAMEL = re.compile(r"[a-z][a-zA-Z0-9]*")
ID_MAPS = ("liveRuns", "problems")
"""members whose keys are ids or field paths, not names (a session's live runs, a contract answer's misfits)"""
SEED_SHAPES = ("interrupt", "interrupt.resume", "interrupt.resumed")
"""the seed protocol's shapes (action, client input, trigger), whose ``interrupt_id`` keeps the spec's
spelling wherever one travels: a branch run's input holds the triggers it was dispatched for"""


def not_camel(value: Any, where: str = "") -> list[str]:
    """Where ``value`` has a key that is not camelCase (the seed's shapes may say ``interrupt_id``)."""
    out: list[str] = []
    if isinstance(value, dict):
        seed = value.get("type") in SEED_SHAPES
        for key, inner in value.items():
            if not CAMEL.fullmatch(str(key)) and not (seed and key == "interrupt_id"):
                out.append(f"{where}.{key}")
            if key in ID_MAPS and isinstance(inner, dict):
                out += [bad for named in inner.values() for bad in not_camel(named, f"{where}.{key}.*")]
            else:
                out += not_camel(inner, f"{where}.{key}")
    elif isinstance(value, list):
        for n, inner in enumerate(value):
            out += not_camel(inner, f"{where}[{n}]")
    return out
