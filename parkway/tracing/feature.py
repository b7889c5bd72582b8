"""The tracing feature as the core meets it (``parkway.runtime.features``): its tracer and its
observer of attempts when OpenTelemetry's API is importable; nothing otherwise (the one check is
the import, made once when the features are assembled)."""

from __future__ import annotations

from ..runtime.features import Feature


def _feature() -> Feature:
    try:
        from . import otel
    except ImportError:  # no opentelemetry-api: parkway runs untraced, at no cost
        return Feature("tracing")
    return Feature("tracing", extension=otel.Attempts(), tracer=otel.OtelTracer())


TRACING = _feature()
