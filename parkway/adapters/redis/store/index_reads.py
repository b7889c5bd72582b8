"""The one read path of the lex indexes (a workflow's pending interrupts newest and expiring, the
filter indexes, the run index): ``page.lua``, a read-only function that reads each index in both its
forms, the single zset written before format 4 and its buckets (``ix_add`` in _common.lua), in one
call. A page is one consistent view: exact however buckets split or empty between two pages, as a
cursor is a member. Part of ``RedisStore``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..connection.connection import function_missing, run_commands
from ..connection.errors import translated
from ..scripts.reads import Page
from ..scripts.scripts import ScriptCall

Bound = bytes | str
"""a lex range bound as ZRANGEBYLEX takes it: ``-``, ``+``, ``[m``, ``(m``"""


@dataclass(frozen=True)
class IndexRead:
    """One read of one index: its members from ``low`` to ``high`` ascending (``asc``) or descending
    (``desc``), at most ``limit``; or how many it holds there (``count``)."""

    key: str
    what: Literal["asc", "desc", "count"]
    low: Bound = "-"
    high: Bound = "+"
    limit: int = 0


class IndexReads:
    """Reads of the lex indexes, whichever form holds their members (``RedisStore``'s)."""

    client: Any
    script_command: Any
    """a script call as a command among others (``RedisStore.script_command``)"""
    reload_scripts: Any
    """forget which functions this store had Redis load (``RedisStore.reload_scripts``)"""

    def read_indexes(self, reads: Sequence[IndexRead]) -> list[Any]:
        """Each read's members (a list, in its order) or count, in one round trip."""
        if not reads:
            return []
        with translated():
            return merged(reads, self.replies([self.index_command(reads)])[0])

    def index_command(self, reads: Sequence[IndexRead]) -> tuple[Any, ...]:
        """``reads`` as one command to send among others (``replies``); its reply is ``merged``. Sent as
        FCALL_RO (the function writes nothing): a replica could serve it, and a server's command stats
        count the listings' reads apart from the transitions'."""
        _, *called = self.script_command(ScriptCall.of(None, page_call(reads)))
        return ("FCALL_RO", *called)

    def replies(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """The replies of ``commands`` as Redis sends them, in one round trip (``run_commands``): sent
        again once, after loading ``page.lua`` again, when the server answers that a function is
        missing (it lost them since this store loaded them: nothing ran); the first error reply
        raises, as a pipeline's ``execute`` does."""
        replies = run_commands(self.client, commands) if commands else []
        if any(function_missing(reply) for reply in replies):
            self.reload_scripts()
            self.index_command([])  # loads the function again (the commands name it by its digest)
            replies = run_commands(self.client, commands)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return replies


def page_call(reads: Sequence[IndexRead]) -> Page:
    return Page(
        indexes=[r.key for r in reads],
        reads=[v for r in reads for v in (r.what, r.low, r.high, max(1, r.limit))],
    )


def merged(reads: Sequence[IndexRead], reply: Sequence[Any]) -> list[Any]:
    """``page.lua``'s reply as each read's answer: a count, or the members of both forms merged in the
    read's order, at most its limit (a member is in one form; the set only guards)."""
    out: list[Any] = []
    for read, got in zip(reads, reply, strict=True):
        if read.what == "count":
            out.append(int(got))
        else:
            old, bucketed = got
            members = sorted({*old, *bucketed}, reverse=read.what == "desc")
            out.append(members[: read.limit])
    return out
