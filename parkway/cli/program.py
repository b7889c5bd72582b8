"""The ``parkway`` command: its parser, built from the table of commands, and ``main``.

A command's module (``runs``, ``interrupts``, ``operations``, ``demo``) holds each command's
arguments beside its function; ``COMMANDS`` names them in the order ``parkway --help`` lists them.
A feature adds its commands through ``FEATURES`` (sessions: ``parkway session``).
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import NoReturn

from ..runtime.errors import ParkwayError, StoreUnavailable
from ..runtime.logger import configure_at_first_line
from ..sessions import cli as session_cli
from .common import open_client, settings_of, without_password
from .demo import add_demo
from .interrupts import add_interrupt, add_interrupts, add_resume
from .operations import add_check_deploy, add_failover, add_reconcile, add_serve, add_status, add_worker
from .parsing import Parser, Subcommands, subcommand
from .runs import add_cancel, add_events, add_fork, add_run, add_runs, add_show
from .upgrade import add_upgrade

COMMANDS: tuple[Callable[[Subcommands], None], ...] = (
    add_worker,
    add_run,
    add_runs,
    add_interrupts,
    add_interrupt,
    add_resume,
    add_show,
    add_events,
    add_cancel,
    add_fork,
    add_check_deploy,
    add_serve,
    add_reconcile,
    add_status,
    add_upgrade,
    add_failover,
    add_demo,
)
"""each command's builder (its arguments, beside its function in its group's module), in the order
`parkway --help` lists them"""

FEATURES = (session_cli.add,)
"""each feature's commands: ``add(sub, subcommand, open_client)`` registers them with the CLI's own
subcommand builder and client, so a feature needs nothing else of the CLI"""


MAIN_EPILOG = """\
Every command but `run` and `demo` needs a Redis: set PARKWAY_REDIS_URL (or pass --redis-url).
Workers and clients must share PARKWAY_SECRET (32+ characters): resume tokens are signed with it.
JSON output is camelCase, times in epoch milliseconds. `parkway COMMAND --help` says more.
A Redis that does not answer when a command starts is an error at once (exit 1, naming the URL);
once it answered, a command waits out an outage for up to 15 s. A closed stdout (`parkway runs | head`)
ends a command quietly with exit status 141, as SIGPIPE ends other Unix tools."""


def parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="parkway",
        description="Durable human-in-the-loop workflows on Redis.",
        epilog=MAIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-v", "--verbose", action="store_true",
                   help="log at INFO (default WARNING); also accepted after the command")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", help="what to do (one of these):")
    for add in COMMANDS:
        add(sub)
    for feature in FEATURES:
        feature(sub, subcommand, open_client)
    return p


def _unknown_options(p: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str]) -> NoReturn:
    """Refuse what the command did not recognise in that command's own usage, naming the nearest
    option to each mistyped one."""
    action = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    command: argparse.ArgumentParser = action.choices[args.command]
    known = [option for a in command._actions for option in a.option_strings]
    hints = []
    for word in extra:
        near = difflib.get_close_matches(word.split("=")[0], known, n=1) if word.startswith("-") else []
        if near:
            hints.append(f"did you mean {near[0]}?")
    command.error(f"unrecognized arguments: {' '.join(extra)}" + (f" ({'; '.join(hints)})" if hints else ""))


def _extend_path(dirs: Sequence[str] | None) -> None:
    """Put the workflow directories first on the import path, as ``rq worker --path`` does
    (the ``parkway`` script, unlike ``python -m``, does not have the working directory there)."""
    for directory in reversed([os.path.abspath(d) for d in (dirs or ["."])]):
        if directory in sys.path:
            sys.path.remove(directory)
        sys.path.insert(0, directory)


FIRST_ANSWER_S = 1.0
"""how long a command waits for a Redis that has not answered it yet: one that is down when the
command starts is reported at once, not retried (``until_first_answer``); once Redis answered, a
command rides out an outage like any client (up to ``GIVE_UP_S``)"""


PIPE_CLOSED = 141
"""the exit status when stdout's reader went away (``parkway runs | head``): 128 + SIGPIPE, what
other Unix tools, ended by that signal, exit with"""


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        return _stdout_closed()


def _stdout_closed() -> int:
    """End quietly: stdout goes to /dev/null from here on, so the interpreter's last flush of what is
    still buffered fails no more than the write that found the pipe closed."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is no file (called in-process): nothing to flush at exit
        pass
    return PIPE_CLOSED


def _impatient(args: argparse.Namespace) -> AbstractContextManager[None]:
    """For a command that talks to Redis: ``until_first_answer(FIRST_ANSWER_S)``."""
    if not hasattr(args, "redis_url"):  # the demo: its Redis is in-process
        return nullcontext()
    from ..adapters.redis.connection.connection import until_first_answer

    return until_first_answer(FIRST_ANSWER_S)


def _tried(args: argparse.Namespace) -> str:
    """The Redis a command was pointed at, without passwords, for its error when Redis does not answer."""
    try:
        settings = settings_of(args)
    except ParkwayError:
        return "Redis"
    urls = settings.shards or ((settings.redis_url,) if settings.redis_url else ())
    return ", ".join(without_password(url) for url in urls) or "Redis"


def _main(argv: Sequence[str] | None) -> int:
    p = parser()
    args, extra = p.parse_known_args(argv)
    if extra:
        _unknown_options(p, args, extra)
    from ..logs import configure as configure_logs

    # a command that runs none of the application's code configures structlog at its first line:
    # one that logs none (a listing) never imports structlog, nor rich through it (issue 23)
    configure_logs("INFO" if args.verbose else "WARNING", at_first_line=not getattr(args, "runs_code", True))
    _extend_path(getattr(args, "path", None))
    try:
        with _impatient(args):
            status = int(args.fn(args))
        sys.stdout.flush()  # here, not at exit: a reader gone away is then seen by main
        return status
    except StoreUnavailable as exc:
        print(f"parkway: error: {exc} (tried {_tried(args)})", file=sys.stderr)
        return 1
    except ParkwayError as exc:
        print(f"parkway: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:  # called in-process, the command's configuration does not outlive it unused
        configure_at_first_line(None)
