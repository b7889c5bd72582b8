"""The trace context of an HTTP caller (``parkway serve``): a request's ``traceparent`` header
(read by the process's propagator, W3C's by default) is current while the request is served, so a
run it starts carries it and the run's attempts are in the caller's trace. A request that already
has a span (an instrumented app) is left to it. Without OpenTelemetry's API the app gets nothing."""

from __future__ import annotations

from typing import Any

_HEADERS = (b"traceparent", b"tracestate")


class TraceContext:
    """ASGI middleware: a request's trace context made current while it is served."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from opentelemetry import context, propagate, trace

        carrier = {k.decode(): v.decode("latin-1") for k, v in scope.get("headers", ()) if k in _HEADERS}
        if scope["type"] != "http" or not carrier or trace.get_current_span().get_span_context().is_valid:
            await self.app(scope, receive, send)
            return
        token = context.attach(propagate.extract(carrier))
        try:
            await self.app(scope, receive, send)
        finally:
            context.detach(token)


def install(app: Any) -> None:
    """Add the middleware to ``app`` when OpenTelemetry's API is importable."""
    try:
        import opentelemetry.propagate  # noqa: F401
    except ImportError:
        return
    app.add_middleware(TraceContext)
