"""What a caller may hold at once: long requests per key, per tenant and per process, and body sizes.

Waiting listings and event streams hold a slot each (:class:`Slots`), counted by the key and share
the caller's dependency recorded (``parkway.http.auth``); past a bound the request gets 429 with
``Retry-After`` (:class:`TooMany`). Bodies over ``MAX_BODY_BYTES`` get 413 (:class:`BodyLimit`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse

from ..problems import problem

MAX_STREAMS = 1000
"""event streams one API process holds open at once, one Redis connection each: well under Redis's
default ``maxclients`` (10,000), with room for workers and more API processes"""
MAX_STREAMS_PER_KEY = 100
"""event streams one API key may hold open at once in one process; more get 429"""
MAX_STREAMS_PER_TENANT = 250
"""event streams the keys of one kind (user, machine, system) bound to one tenant may hold open at
once in one process, together; more get 429 (a tenant with many keys cannot take all of
``MAX_STREAMS``). Each kind has its own share, so a tenant's users cannot starve its machine keys."""
MAX_WAITING_PER_KEY = 20
"""waiting listings (``waitMs``) one API key may have in flight at once; more get 429"""
RETRY_AFTER_S = 1
"""what a 429 tells the caller to wait before trying again"""
MAX_BODY_BYTES = 2 << 20
"""a request body larger than this is refused (413) before it is read whole: run input is at most
1 MiB encoded, an answer 64 KiB"""


class TooMany(Exception):
    """A key holds as many of a bounded resource as it may: 429 with ``Retry-After``."""

    def __init__(self, what: str, limit: int) -> None:
        super().__init__(what)
        self.what, self.limit = what, limit


async def too_many(request: Request, exc: Exception) -> JSONResponse:
    """The app's answer to :class:`TooMany`."""
    assert isinstance(exc, TooMany)
    return problem(429, "TooManyRequests", f"at most {exc.limit} {exc.what} at once",
                   headers={"Retry-After": str(RETRY_AFTER_S)})


class Slots:
    """At most ``limit`` of one kind of long request (waiting listings, event streams) per API key at
    once, ``per_tenant`` for the keys of one share (the keys of one kind bound to one tenant)
    together, and ``total`` in the process; ``slot(key, share)`` raises TooMany past any bound. (The
    event loop is one thread: no lock needed.)"""

    def __init__(self, what: str, limit: int, total: int | None = None, per_tenant: int | None = None) -> None:
        self.what, self.limit, self.total, self.per_tenant = what, limit, total, per_tenant
        self.in_use: dict[str, int] = {}
        self.tenants: dict[str, int] = {}

    @contextmanager
    def slot(self, key: str, share: str | None = None) -> Iterator[None]:
        if self.in_use.get(key, 0) >= self.limit:
            raise TooMany(f"{self.what} of this key", self.limit)
        counted = share is not None and self.per_tenant is not None
        if counted and self.tenants.get(share or "", 0) >= (self.per_tenant or 0):
            raise TooMany(f"{self.what} of the {share}", self.per_tenant or 0)
        if self.total is not None and sum(self.in_use.values()) >= self.total:
            raise TooMany(f"{self.what} of this server", self.total)
        _count(self.in_use, key, 1)
        if counted:
            _count(self.tenants, share or "", 1)
        try:
            yield
        finally:
            _count(self.in_use, key, -1)
            if counted:
                _count(self.tenants, share or "", -1)


def _count(counts: dict[str, int], name: str, by: int) -> None:
    """Add ``by`` to ``counts[name]``; a count that reaches 0 leaves the dict."""
    counts[name] = counts.get(name, 0) + by
    if not counts[name]:
        del counts[name]


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes with 413, by Content-Length or while they stream
    (a chunked body declares no length)."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await problem(413, "PayloadTooLarge", f"bodies are at most {self.limit} bytes")(scope, receive, send)
            return
        seen = 0

        async def limited() -> Any:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise HTTPException(413, f"bodies are at most {self.limit} bytes")
            return message

        await self.app(scope, limited, send)
