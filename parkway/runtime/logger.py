"""parkway's logger: quiet unless someone configured structlog.

A library should say nothing on an application's stdout by default. Until
structlog is configured (by the application, by ``parkway.logs.configure``
as the CLI and workers do, or by ``structlog.testing.capture_logs``),
parkway's log lines go to stderr, warnings and errors only. Once it is
configured, every line goes through that configuration.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

_fallbacks: dict[int, Any] = {}


def _fallback() -> Any:
    stream = sys.stderr
    logger = _fallbacks.get(id(stream))
    if logger is None:
        logger = structlog.wrap_logger(
            structlog.PrintLogger(stream),
            processors=[
                structlog.contextvars.merge_contextvars,
                structlog.processors.add_log_level,
                structlog.dev.ConsoleRenderer(colors=False),
            ],
            wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        )
        _fallbacks.clear()  # one stream at a time (tests swap sys.stderr)
        _fallbacks[id(stream)] = logger
    return logger


_DROPPED = structlog.make_filtering_bound_logger(logging.CRITICAL).debug
"""what a filtering bound logger class (``structlog.make_filtering_bound_logger``) has for each
level below its own: one function, shared by all such classes"""


def _dropped(*args: Any, **kwargs: Any) -> None:
    """A log call at a level the configured logger drops."""


class _Logger:
    """Looks up, at each call, whether structlog is configured (a cheap flag), and whether the
    configured logger drops the call's level: it then returns without building a logger (a bound
    logger per call costs a worker about 8 µs, several times per job, for lines nobody sees)."""

    def __getattr__(self, name: str) -> Any:
        if structlog.is_configured():
            if getattr(structlog.get_config()["wrapper_class"], name, None) is _DROPPED:
                return _dropped
            return getattr(structlog.get_logger("parkway"), name)
        return getattr(_fallback(), name)


def get_logger() -> Any:
    return _Logger()
