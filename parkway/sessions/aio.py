"""``pw.sessions`` on :class:`parkway.AsyncParkway`: each of :class:`parkway.sessions.Sessions`'s
operations, awaited (run in a worker thread)."""

from __future__ import annotations

import asyncio
from typing import Any

from ..runtime.protocol import ResumeResult
from ..runtime.store import StoredEvent
from ..runtime.workflow import Workflow
from .client import Sessions
from .views import Cleared, Sent, SessionView


class AsyncSessions:
    """``pw.sessions`` awaited: each method is :class:`parkway.sessions.Sessions`'s, with the same
    arguments (``caller=`` included), run in a worker thread."""

    def __init__(self, sync: Sessions) -> None:
        self.sync = sync

    async def open(self, agent: Workflow | str, **kwargs: Any) -> str:
        result: str = await asyncio.to_thread(self.sync.open, agent, **kwargs)
        return result

    async def send(self, session_id: str, content: str, **kwargs: Any) -> Sent:
        return await asyncio.to_thread(self.sync.send, session_id, content, **kwargs)

    async def edit(self, session_id: str, message_id: str, content: str, **kwargs: Any) -> Sent:
        return await asyncio.to_thread(self.sync.edit, session_id, message_id, content, **kwargs)

    async def switch(self, session_id: str, head: str, **kwargs: Any) -> SessionView:
        return await asyncio.to_thread(self.sync.switch, session_id, head, **kwargs)

    async def get(self, session_id: str, **kwargs: Any) -> SessionView:
        return await asyncio.to_thread(self.sync.get, session_id, **kwargs)

    async def events(self, session_id: str, **kwargs: Any) -> list[StoredEvent]:
        return await asyncio.to_thread(self.sync.events, session_id, **kwargs)

    async def raise_interrupt(self, session_id: str, reason: str, payload: Any = None, **kwargs: Any) -> str:
        result: str = await asyncio.to_thread(self.sync.raise_interrupt, session_id, reason, payload, **kwargs)
        return result

    async def resume_interrupt(self, session_id: str, interrupt_id: str, payload: Any = None, **kwargs: Any) -> Cleared:
        return await asyncio.to_thread(self.sync.resume_interrupt, session_id, interrupt_id, payload, **kwargs)

    async def resume(self, session_id: str, resume_input: Any, **kwargs: Any) -> Cleared:
        return await asyncio.to_thread(self.sync.resume, session_id, resume_input, **kwargs)

    async def answer_tool(self, session_id: str, tool_call_id: str, result: Any = None, **kwargs: Any) -> ResumeResult:
        return await asyncio.to_thread(self.sync.answer_tool, session_id, tool_call_id, result, **kwargs)
