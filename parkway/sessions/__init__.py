"""Sessions: durable trees of messages whose branches park on their own, answered by an agent.

The feature in one folder, reaching core only through its extension points (``parkway.runtime.features``)::

    rules.py    who may do what to a session, the client input's shape, the fold of its events
    store.py    its Redis keys' reads and its transitions (``lua/session_*.lua``), on a store's public seam
    client.py   ``pw.sessions`` (:class:`Sessions`): open, send, edit, switch, raise, resume, answer a tool
    aio.py      ``pw.sessions`` on ``AsyncParkway``: the same, awaited
    feature.py  the feature as the core meets it (``parkway.runtime.features``), listed by ``parkway.extensions``
    branch.py   the branch run's observer (``parkway.runtime.observers``) and ``add_message``
    http.py     the ``/v1/sessions`` router (included by ``parkway.http.app``)
    cli.py      ``parkway session ...``
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .branch import BranchRuns, add_message
    from .client import Sessions, as_caller
    from .rules import rebuild
    from .views import Cleared, Sent, SessionInterrupt, SessionMessage, SessionView

_HOMES = {
    "BranchRuns": "branch",
    "add_message": "branch",
    "Cleared": "views",
    "Sent": "views",
    "SessionInterrupt": "views",
    "SessionMessage": "views",
    "SessionView": "views",
    "Sessions": "client",
    "as_caller": "client",
    "rebuild": "rules",
}
"""where each public name lives: imported when first asked for, so ``parkway --help`` (which
imports ``sessions.cli``) loads none of the client's dependencies"""

__all__ = [
    "BranchRuns",
    "Cleared",
    "Sent",
    "SessionInterrupt",
    "SessionMessage",
    "SessionView",
    "Sessions",
    "add_message",
    "as_caller",
    "rebuild",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
