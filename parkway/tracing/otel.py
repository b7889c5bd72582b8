"""parkway's spans, on OpenTelemetry's API (imported here: importing this module is the check).

Spans, each with ``parkway.run_id``, ``parkway.workflow`` and ``parkway.node`` (a start: its
workflow only)::

    parkway.start <workflow>          a run started by a caller with no span of its own (PRODUCER,
                                      ended at once): its attempts are one trace all the same
    parkway.attempt <workflow>.<node> one attempt of a node (CONSUMER): ``parkway.step``,
                                      ``parkway.attempt`` (1, then each retry), ``parkway.replay``
                                      (its journal held records: a replay), ``parkway.outcome``; a
                                      replay after an answer is linked to the attempt that paused
    parkway.wait <workflow>.<node>    the wait for a person: from the pause (its start) to the
                                      answer, the cancel or the expiry (its end), a child of the
                                      attempt that paused: ``parkway.request_id``,
                                      ``parkway.outcome`` (resumed, cancelled, expired) and
                                      ``parkway.responder``

A run's attempts descend from the trace context it was started in (the caller's current span, an
HTTP request's ``traceparent``: ``parkway.tracing.http``), kept on its record in Redis; a child
run's from its parent's attempt. The tracer is the global provider's, asked for when it changes (a
provider set after parkway was imported is used too); while none is set nothing is stored, no span
is started and no attempt is observed: each question costs a look at the global provider.
"""

from __future__ import annotations

import re
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from ..runtime import journal
from ..runtime.hooks import NodeContext
from ..runtime.observers import Extension, RunObserver
from ..runtime.store import InterruptRecord, RunRecord, Store
from ..runtime.tracing import Tracer

_cached: tuple[object, trace.Tracer | None] = (None, None)
_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_FAILED = ("failed", "lost")
"""attempt outcomes whose span's status is an error"""


def _tracer() -> trace.Tracer | None:
    """The global provider's tracer for parkway, None while no provider is set."""
    global _cached
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):
        return None
    seen, tracer = _cached
    if seen is not provider or tracer is None:
        tracer = provider.get_tracer("parkway")
        _cached = (provider, tracer)
    return tracer


def traceparent(span: SpanContext) -> str:
    """A span's context as a W3C ``traceparent`` (how parkway keeps it in Redis)."""
    return f"00-{span.trace_id:032x}-{span.span_id:016x}-{int(span.trace_flags):02x}"


def span_context(text: str | None) -> SpanContext | None:
    """The span context a kept ``traceparent`` names (None: none, or not one)."""
    m = _TRACEPARENT.fullmatch(text or "")
    if m is None:
        return None
    found = SpanContext(int(m[1], 16), int(m[2], 16), is_remote=True, trace_flags=TraceFlags(int(m[3], 16)))
    return found if found.is_valid else None


def _under(parent: SpanContext | None) -> otel_context.Context | None:
    """The context whose span is ``parent`` (None: the current one)."""
    return trace.set_span_in_context(NonRecordingSpan(parent)) if parent is not None else None


class OtelTracer(Tracer):
    """The store's questions (``runtime.tracing``), answered from OpenTelemetry's current context."""

    def started(self, workflow: str, run_id: str) -> str | None:
        tracer = _tracer()
        if tracer is None:
            return None
        current = trace.get_current_span().get_span_context()
        if current.is_valid:  # the caller's span (an HTTP request's, a parent's attempt)
            return traceparent(current)
        span = tracer.start_span(f"parkway.start {workflow}", kind=SpanKind.PRODUCER,
                                  attributes={"parkway.run_id": run_id, "parkway.workflow": workflow})
        span.end()
        started = span.get_span_context()
        return traceparent(started) if started.is_valid else None

    def current(self) -> str | None:
        if _tracer() is None:
            return None
        current = trace.get_current_span().get_span_context()
        return traceparent(current) if current.is_valid else None

    def waited(self, interrupt: InterruptRecord, at: int, outcome: str, responder: str | None) -> None:
        paused, tracer = span_context(interrupt.trace), _tracer()
        if paused is None or tracer is None:  # paused untraced, or no provider now
            return
        attributes: dict[str, Any] = {
            "parkway.run_id": interrupt.run_id, "parkway.workflow": interrupt.workflow,
            "parkway.node": interrupt.node, "parkway.step": interrupt.step,
            "parkway.request_id": interrupt.request_id, "parkway.outcome": outcome,
        }
        if responder is not None:
            attributes["parkway.responder"] = responder
        span = tracer.start_span(f"parkway.wait {interrupt.workflow}.{interrupt.node}", context=_under(paused),
                                  start_time=interrupt.created_at * 1_000_000, attributes=attributes)
        span.end(end_time=max(at, interrupt.created_at) * 1_000_000)


class Attempts(Extension):
    """The feature's entry in the executor: every job's attempts are spans."""

    def observe(self, store: Store, run: RunRecord) -> RunObserver | None:
        tracer = _tracer()
        return AttemptSpans(tracer, run) if tracer is not None else None


class AttemptSpans(RunObserver):
    """One job's attempts as spans, each current while its node runs and its outcome commits (a
    child run started then, a span the node's code opens, descend from it)."""

    def __init__(self, tracer: trace.Tracer, run: RunRecord) -> None:
        self.tracer = tracer
        self.parent = _under(span_context(run.trace))
        self.paused = span_context(run.paused_trace)
        self.paused_step = run.step
        self.span: trace.Span | None = None
        self.token: object = None

    def before_attempt(self, ctx: NodeContext, data: dict[str, Any]) -> dict[str, Any]:
        retries = sum(1 for name in ctx.journal if name.startswith(journal.RETRY))
        links = [Link(self.paused)] if self.paused is not None and ctx.step == self.paused_step else []
        self.span = self.tracer.start_span(
            f"parkway.attempt {ctx.workflow}.{ctx.node}", context=self.parent, kind=SpanKind.CONSUMER, links=links,
            attributes={
                "parkway.run_id": ctx.run_id, "parkway.workflow": ctx.workflow, "parkway.node": ctx.node,
                "parkway.step": ctx.step, "parkway.attempt": 1 + retries, "parkway.replay": bool(ctx.journal),
            },
        )
        self.token = otel_context.attach(trace.set_span_in_context(self.span))
        return data

    def after_attempt(self, ctx: NodeContext, outcome: str) -> None:
        span, token, self.span, self.token = self.span, self.token, None, None
        if span is None:
            return
        span.set_attribute("parkway.outcome", outcome)
        if outcome in _FAILED:
            span.set_status(Status(StatusCode.ERROR))
        span.end()
        otel_context.detach(token)  # type: ignore[arg-type]
