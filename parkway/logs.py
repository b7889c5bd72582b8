"""structlog setup: JSON lines when not on a terminal, readable lines on one."""

from __future__ import annotations

import functools
import logging
import sys
from typing import TextIO

from .runtime.logger import configure_at_first_line


def configure(
    level: str = "INFO", *, json: bool | None = None, file: TextIO | None = None, at_first_line: bool = False
) -> None:
    """Configure structlog for parkway's processes (CLI, workers).

    Per-job context (run_id, node, step, request_id) is bound with
    ``structlog.contextvars`` by the executor and merged into every line.

    ``at_first_line``: configure when parkway first logs a line instead of now, so a process that
    logs none never imports structlog (nor rich, which structlog imports when it is installed): the
    CLI's commands that run no code of the application's. Configuring now replaces a
    configuration still waiting.
    """
    if at_first_line:
        configure_at_first_line(functools.partial(configure, level, json=json, file=file))
        return
    configure_at_first_line(None)
    import structlog

    if json is None:
        json = not sys.stderr.isatty()
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=file or sys.stderr),
        cache_logger_on_first_use=False,
    )
