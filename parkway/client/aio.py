"""``AsyncParkway``: the client's surface for asyncio applications.

Each call validates and commits exactly as :class:`parkway.Parkway` does (it
is that client underneath), run in a worker thread so the event loop never
blocks on Redis. ``stream`` reads the run's events in short blocking reads
from a thread as well, yielding between them, so a slow stream holds no lock
and cancelling the task that iterates it ends it.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal, TypeVar

from ..adapters.redis.formats import Decision as FormatDecision
from ..config import Settings
from ..runtime import features
from ..runtime.authority import Caller, Door, Origin
from ..runtime.deploy_check import DeployCheck
from ..runtime.listing import ListingQuery, RunsQuery
from ..runtime.protocol import (
    CancelResult,
    DeploymentStatus,
    Event,
    Interrupt,
    InterruptPage,
    ResumeOrStartResult,
    ResumeResult,
    Run,
    RunPage,
    check_event_id,
    check_id,
)
from ..runtime.store import RunRecord
from ..runtime.workflow import Workflow
from .sync import Parkway
from .views import ends_stream, read_window

T = TypeVar("T")


NOT_AWAITED = {
    "event": "turns a stored event into the client's, without I/O: ``stream`` yields them already",
    "list_watching": "the HTTP server's seam for its own asynchronous wait: ``list_interrupts`` waits here",
    "prepare_answer": "the sessions package's seam (an answer checked, committed by a session script)",
    "answer_committed": "the sessions package's seam (after a session script committed an answer)",
    "workflow_ref": "the sessions package's seam (a session's agent checked and referenced as start does)",
}
""":class:`parkway.Parkway`'s public methods AsyncParkway does not await, and why (the parity test
reads this table): seams between parkway's own layers, reached through ``AsyncParkway.sync``."""


class AsyncParkway:
    """The asyncio twin of :class:`parkway.Parkway`: the same methods, with the same signatures,
    awaited (a test holds them equal; the exceptions are in ``NOT_AWAITED``).

    >>> async with AsyncParkway() as pw:
    ...     run_id = await pw.start("myapp.flows:approval", {"title": "Q3"})
    ...     async for event in pw.stream(run_id, until="settled"):
    ...         print(event.type)
    """

    def __init__(self, settings: Settings | None = None, *, client: Parkway | None = None) -> None:
        self.sync = client or Parkway(settings)
        self.settings = self.sync.settings

    @property
    def sessions(self) -> Any:
        """Sessions, awaited (a :class:`parkway.sessions.aio.AsyncSessions`: the ``sessions``
        feature's part of this client, ``parkway.runtime.features``)."""
        return features.facet("sessions", self, awaited=True)

    async def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def start(
        self,
        workflow: Workflow | str,
        input: Mapping[str, Any] | None = None,
        *,
        run_id: str | None = None,
        ttl_ms: int | None = None,
        tenant: str | None = None,
        owner: str | None = None,
        origin: Origin = "system",
    ) -> str:
        """As :meth:`parkway.Parkway.start`."""
        result: str = await self._call(
            self.sync.start, workflow, input, run_id=run_id, ttl_ms=ttl_ms, tenant=tenant, owner=owner, origin=origin
        )
        return result

    async def fork(
        self,
        run_id: str,
        *,
        step: int,
        new_run_id: str | None = None,
        input: Mapping[str, Any] | None = None,
    ) -> str:
        """As :meth:`parkway.Parkway.fork`."""
        result: str = await self._call(self.sync.fork, run_id, step=step, new_run_id=new_run_id, input=input)
        return result

    async def gated_step(self, run_id: str, step: int) -> int:
        """As :meth:`parkway.Parkway.gated_step`."""
        result: int = await self._call(self.sync.gated_step, run_id, step)
        return result

    async def get_run(self, run_id: str) -> Run:
        """As :meth:`parkway.Parkway.get_run`."""
        result: Run = await self._call(self.sync.get_run, run_id)
        return result

    async def wait(self, run_id: str, *, timeout: float = 30.0) -> Run:
        """As :meth:`parkway.Parkway.wait`; the wait holds a worker thread, not the event loop."""
        result: Run = await self._call(self.sync.wait, run_id, timeout=timeout)
        return result

    async def resume(
        self,
        token: str,
        *,
        selected: Any = None,
        value: Any = None,
        request_id: str | None = None,
        responder: str | None = None,
    ) -> ResumeResult:
        """As :meth:`parkway.Parkway.resume`."""
        result: ResumeResult = await self._call(
            self.sync.resume, token, selected=selected, value=value, request_id=request_id, responder=responder
        )
        return result

    async def resume_or_start(
        self,
        token: str,
        *,
        selected: Any = None,
        value: Any = None,
        request_id: str | None = None,
        responder: str | None = None,
        input: Mapping[str, Any] | None = None,
        workflow: Workflow | str | None = None,
        tenant: str | None = None,
    ) -> ResumeOrStartResult:
        """As :meth:`parkway.Parkway.resume_or_start`."""
        result: ResumeOrStartResult = await self._call(
            self.sync.resume_or_start,
            token,
            selected=selected,
            value=value,
            request_id=request_id,
            responder=responder,
            input=input,
            workflow=workflow,
            tenant=tenant,
        )
        return result

    async def resume_message(self, message: Mapping[str, Any], *, responder: str | None = None) -> ResumeResult:
        """As :meth:`parkway.Parkway.resume_message`."""
        result: ResumeResult = await self._call(self.sync.resume_message, message, responder=responder)
        return result

    async def cancel_interrupt(
        self,
        token: str,
        *,
        reason: str | None = None,
        responder: str | None = None,
        request_id: str | None = None,
    ) -> ResumeResult:
        """As :meth:`parkway.Parkway.cancel_interrupt`."""
        result: ResumeResult = await self._call(
            self.sync.cancel_interrupt, token, reason=reason, responder=responder, request_id=request_id
        )
        return result

    async def cancel(self, run_id: str, *, reason: str | None = None, responder: str | None = None) -> CancelResult:
        """As :meth:`parkway.Parkway.cancel`."""
        result: CancelResult = await self._call(self.sync.cancel, run_id, reason=reason, responder=responder)
        return result

    async def list_interrupts(
        self, query: ListingQuery | None = None, /, *, caller: Caller | None = None, **keywords: Any
    ) -> InterruptPage:
        """As :meth:`parkway.Parkway.list_interrupts` (a :class:`ListingQuery`, or its fields as
        keywords); a wait (``wait_ms``) holds a worker thread, not the event loop, and runs its
        course even if the awaiting task is cancelled."""
        result: InterruptPage = await self._call(self.sync.list_interrupts, query, caller=caller, **keywords)
        return result

    async def list_runs(
        self, query: RunsQuery | None = None, /, *, caller: Caller | None = None, **keywords: Any
    ) -> RunPage:
        """As :meth:`parkway.Parkway.list_runs` (a :class:`RunsQuery`, or its fields as keywords)."""
        result: RunPage = await self._call(self.sync.list_runs, query, caller=caller, **keywords)
        return result

    async def check_run(self, run_id: str, caller: Caller, door: Door = "read") -> RunRecord | None:
        """As :meth:`parkway.Parkway.check_run`."""
        result: RunRecord | None = await self._call(self.sync.check_run, run_id, caller, door)
        return result

    async def get_interrupt(self, request_id: str, *, run_id: str | None = None) -> Interrupt:
        """As :meth:`parkway.Parkway.get_interrupt`."""
        result: Interrupt = await self._call(self.sync.get_interrupt, request_id, run_id=run_id)
        return result

    async def lookup(self, token: str) -> Interrupt | ResumeResult:
        """As :meth:`parkway.Parkway.lookup`."""
        result: Interrupt | ResumeResult = await self._call(self.sync.lookup, token)
        return result

    async def answer_links(
        self, token: str, base_url: str, *, responder: str | None = None, ttl_ms: int | None = None
    ) -> dict[str, str]:
        """As :meth:`parkway.Parkway.answer_links`."""
        result: dict[str, str] = await self._call(
            self.sync.answer_links, token, base_url, responder=responder, ttl_ms=ttl_ms
        )
        return result

    async def check_deploy(self, run_id: str, against: Workflow | str) -> DeployCheck:
        """As :meth:`parkway.Parkway.check_deploy`."""
        result: DeployCheck = await self._call(self.sync.check_deploy, run_id, against)
        return result

    async def replay(self, run_id: str, against: Workflow | str) -> DeployCheck:
        """Deprecated: :meth:`check_deploy` (as :meth:`parkway.Parkway.replay`)."""
        warnings.warn("AsyncParkway.replay is AsyncParkway.check_deploy", DeprecationWarning, stacklevel=2)
        return await self.check_deploy(run_id, against)

    async def status(self) -> DeploymentStatus:
        """As :meth:`parkway.Parkway.status`."""
        result: DeploymentStatus = await self._call(self.sync.status)
        return result

    async def formats(self) -> FormatDecision:
        """As :meth:`parkway.Parkway.formats`."""
        result: FormatDecision = await self._call(self.sync.formats)
        return result

    async def announce_formats(self, role: str) -> None:
        """As :meth:`parkway.Parkway.announce_formats`."""
        await self._call(self.sync.announce_formats, role)

    async def drain(self, timeout: float = 60.0) -> None:
        """As :meth:`parkway.Parkway.drain` (embedded only), waiting in a worker thread."""
        await self._call(self.sync.drain, timeout)

    async def stream(
        self,
        run_id: str,
        *,
        after: str = "0",
        until: Literal["done", "settled"] = "done",
        timeout: float | None = None,
    ) -> AsyncIterator[Event]:
        """The run's events from ``after``, as :meth:`parkway.Parkway.stream` yields them."""
        check_id(run_id, "run id")
        check_event_id(after)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            block = read_window(run_id, deadline, timeout)
            for stored in await self._call(self.sync.store.read_events, run_id, after, block, 100):
                after = stored.id
                yield self.sync.event(run_id, stored)
                if ends_stream(stored.type, until):
                    return

    async def close(self) -> None:
        """As :meth:`parkway.Parkway.close`."""
        await self._call(self.sync.close)

    async def __aenter__(self) -> AsyncParkway:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
