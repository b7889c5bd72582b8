"""The tracing extension point: what the store asks of a tracer when a run's trace must cross Redis.

A run's trace context travels with it (DESIGN invariant 16, "a pause is a span, not a gap"). The
store's transitions ask the process's :class:`Tracer` at three moments, and the executor's observers
(``runtime.observers``) do the rest (a span per attempt)::

    started(workflow, run_id)   a run is created (a start, a child, a fork, a session's branch):
                                the trace context it carries (W3C ``traceparent``), kept on its record
    current()                   a pause is committed: the context of the span that paused (the
                                attempt's), kept with the interrupt so the wait and the resume find it
    waited(interrupt, at, ...)  the pause ended (answered, cancelled, expired) at ``at``: the wait
                                from the pause to then, as one span

Every method is a no-op here; a feature (``parkway.tracing``) gives the real one
(``Feature.tracer``, found by ``features.tracer()``). A process whose features give none asks this
one: nothing is stored, nothing is emitted, and each question costs one call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (the features' list imports this module: ``import parkway`` stays light)
    from .store import InterruptRecord


class Tracer:
    """The no-op tracer (see the module's docstring); a feature overrides what it traces."""

    def started(self, workflow: str, run_id: str) -> str | None:
        """The trace context a run created now carries (None: none)."""
        return None

    def current(self) -> str | None:
        """The trace context of the span running now (None: none), kept with a pause."""
        return None

    def waited(self, interrupt: InterruptRecord, at: int, outcome: str, responder: str | None) -> None:
        """``interrupt``'s wait ended at ``at`` (ms) with ``outcome`` (``resumed``, ``cancelled``,
        ``expired``), answered by ``responder``."""


NO_TRACER = Tracer()
"""the tracer of a process whose features give none (``features.tracer``)"""
