"""Sessions: durable trees of messages whose branches park on their own, answered by an agent.

The feature in one folder, reaching core only through the executor's extension point::

    rules.py    who may do what to a session, the client input's shape, the fold of its events
    store.py    its Redis keys' reads and its transitions (``lua/session_*.lua``), on a store's public seam
    client.py   ``pw.sessions`` (:class:`Sessions`): open, send, edit, switch, raise, resume, answer a tool
    branch.py   the branch run's observer (``parkway.runtime.observers``) and ``add_message``
    http.py     the ``/v1/sessions`` routes (mounted by ``parkway.api``)
    cli.py      ``parkway session ...``
"""

from __future__ import annotations

from .branch import BranchRuns, add_message
from .client import Cleared, Sent, SessionInterrupt, SessionMessage, Sessions, SessionView, as_caller
from .rules import rebuild

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
