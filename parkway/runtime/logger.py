"""parkway's logger: quiet unless someone configured structlog.

A library should say nothing on an application's stdout by default. Until
structlog is configured (by the application, by ``parkway.logs.configure``
as the CLI and workers do, or by ``structlog.testing.capture_logs``),
parkway's log lines go to stderr, warnings and errors only. Once it is
configured, every line goes through that configuration.

structlog is imported at the first line (or level check), not with this module: ``import
structlog`` imports rich when it is installed, about a tenth of a second that a command which logs
nothing (``parkway interrupts``) should not pay. A configuration can wait for that moment too
(:func:`configure_at_first_line`).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from typing import Any

_fallbacks: dict[int, Any] = {}
_DROPPED: list[Any] = []
"""what a filtering bound logger class (``structlog.make_filtering_bound_logger``) has for each
level below its own: one function, shared by all such classes (found at the first line)"""
_waiting: list[Callable[[], None]] = []
_applying = threading.Lock()
"""a configuration to apply before the first line (:func:`configure_at_first_line`), at most one"""


def configure_at_first_line(configure: Callable[[], None] | None) -> None:
    """Have ``configure`` (which configures structlog) run just before parkway first logs a line or
    checks a level, in place of any waiting before; None: forget the waiting one (a configuration
    applied now replaces it)."""
    _waiting.clear()
    if configure is not None:
        _waiting.append(configure)


def _structlog() -> Any:
    """structlog, imported now if not yet, with the waiting configuration applied first."""
    if _waiting:
        with _applying:  # one thread applies it; the others wait for it, then log through it
            if _waiting:
                _waiting.pop()()
    import structlog

    if not _DROPPED:
        _DROPPED.append(structlog.make_filtering_bound_logger(logging.CRITICAL).debug)
    return structlog


def _fallback(structlog: Any) -> Any:
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


def _dropped(*args: Any, **kwargs: Any) -> None:
    """A log call at a level the configured logger drops."""


class _Logger:
    """Looks up, at each call, whether structlog is configured (a cheap flag), and whether the
    configured logger drops the call's level: it then returns without building a logger (a bound
    logger per call costs a worker about 8 µs, several times per job, for lines nobody sees)."""

    def __getattr__(self, name: str) -> Any:
        structlog = _structlog()
        if structlog.is_configured():
            if getattr(structlog.get_config()["wrapper_class"], name, None) is _DROPPED[0]:
                return _dropped
            return getattr(structlog.get_logger("parkway"), name)
        return getattr(_fallback(structlog), name)


def get_logger() -> Any:
    return _Logger()
