"""The parser's parts every command uses: its parser class, a subcommand with the options commands
share (``subcommand``), and the argument types that turn bad input into a usage error."""

from __future__ import annotations

import argparse
import difflib
import re
from typing import Any, NoReturn, TypeAlias

Subcommands: TypeAlias = "argparse._SubParsersAction[Parser]"  # what add_subparsers() returns


REDIS_REQUIRED = ("the Redis parkway runs on (required; default $PARKWAY_REDIS_URL; with $PARKWAY_SHARDS every "
                  "shard, and this URL, if given, must be one of them)")


class Parser(argparse.ArgumentParser):
    """argparse's parser, which also suggests the nearest command to a mistyped one."""

    def error(self, message: str) -> NoReturn:
        typo = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if typo:
            choices = re.findall(r"'([^']*)'", typo.group(2))
            near = difflib.get_close_matches(typo.group(1), choices, n=1)
            if near:
                message += f"; did you mean {near[0]!r}?"
        super().error(message)


def subcommand(
    sub: Subcommands,
    name: str,
    help_: str,
    fn: Any,
    epilog: str,
    *,
    redis: str | None = REDIS_REQUIRED,
    imports: bool = False,
    aliases: tuple[str, ...] = (),
) -> argparse.ArgumentParser:
    """A subcommand with the options commands share: -v after the command, --redis-url in the
    command's own words (none for the demo), and where workflows are imported from."""
    c = sub.add_parser(
        name, help=help_, description=help_, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter,
        aliases=list(aliases),
    )
    c.set_defaults(fn=fn, runs_code=imports)
    # SUPPRESS: given after the command it sets verbose; absent, it leaves the one before the command alone
    c.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                   help="log at INFO (default WARNING); also accepted before the command")
    if redis is not None:
        c.add_argument("--redis-url", metavar="URL", help=redis)
        c.add_argument("--redis-sentinels", metavar="HOST:PORT,...",
                       help="instead of --redis-url: Redis under Sentinel, these sentinels (with --redis-master; "
                            "default $PARKWAY_REDIS_SENTINELS)")
        c.add_argument("--redis-master", metavar="NAME",
                       help="the master's name the sentinels know (default $PARKWAY_REDIS_MASTER)")
    if imports:
        c.add_argument(
            "--path",
            action="append",
            metavar="DIR",
            help="where to import workflow modules from, before the rest of the Python path "
            "(repeatable; default: the working directory)",
        )
        c.add_argument(
            "--workflows",
            metavar="MODULES",
            help="comma-separated modules workflows may be imported from (default $PARKWAY_WORKFLOWS; "
            "unset: the application's own code, never the standard library or installed packages)",
        )
    return c


def integer(low: int, high: int | None = None) -> Any:
    """An argparse type: an integer from ``low`` (to ``high``); anything else is a usage error (exit 2)
    that names the flag."""
    span = f"from {low:,} to {high:,}" if high is not None else f"of at least {low:,}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be an integer {span}, got {text!r}")
        return value

    parse.__name__ = "integer"
    return parse


_AGE = re.compile(r"([0-9]{1,9})([smhd]?)")


_AGE_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def age(text: str) -> int:
    """An age as --older-than / --newer-than take it (``90``, ``90s``, ``15m``, ``2h``, ``7d``), in seconds."""
    m = _AGE.fullmatch(text.strip())
    if m is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not an age such as 90s, 15m, 2h or 7d")
    return int(m.group(1)) * _AGE_UNITS[m.group(2)]
