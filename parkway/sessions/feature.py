"""The sessions feature as the core meets it (``parkway.runtime.features``): the branch runs'
observer in the executor, ``pw.sessions`` on the client and on its asyncio twin. Listed at the top
(``parkway/extensions.py``); the client's parts are imported when first asked for."""

from __future__ import annotations

from typing import Any

from ..runtime.features import Feature
from .branch import BranchRuns


def _client(pw: Any) -> Any:
    from .client import Sessions

    return Sessions(pw)


def _aclient(apw: Any) -> Any:
    from .aio import AsyncSessions

    return AsyncSessions(apw.sync.sessions)


SESSIONS = Feature("sessions", BranchRuns(), _client, _aclient)
