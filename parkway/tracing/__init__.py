"""Traces: OpenTelemetry spans of parkway's runs (the ``parkway[otel]`` extra), a feature package.

With ``opentelemetry-api`` importable, this feature gives the core a tracer
(``parkway.runtime.tracing``) and an observer of every attempt (``parkway.runtime.observers``); the
spans go to the tracer provider the process configured the usual way
(``opentelemetry.trace.set_tracer_provider``), none configured: the API's no-op tracer. Without it,
the feature gives nothing: one import check when the features are assembled, no work per call.
See ``otel`` for the spans, and ``http`` for the trace context of an HTTP caller.
"""
