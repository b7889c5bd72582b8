"""Which stored format a process creates records in: the readers' announcements (invariant 15).

Every process with a store (a worker, ``parkway serve``, a client that writes) announces the stored
formats it reads in ``keys.readers()`` (a hash: process id -> ``<lapse ms> <formats> <role>``),
refreshed every ``REFRESH_S`` by a daemon thread off the hot path; an announcement lapses
``ANNOUNCE_TTL_MS`` after its last refresh, and a process that stops cleanly takes its own away.
A process creates records in the newest format *every* live reader reads (``decide``): while one
live process reads only format 1, every writer writes format 1; once the last of those is gone
(stopped, or its announcement lapsed), the writers switch at their next refresh. An announcement
and the read a decision is made from are each one Redis command, so a decision read after an
announcement completed counts it.

A process of a version before formats (fb3799e and earlier) announces nothing. Its *workers* are
seen in RQ's worker registry (``seen``: the names of the workers on the queue): a registered worker
that has not announced is counted as a reader of format 1 only, until RQ's registry drops it. Its
clients and servers are not seen at all: stop them, or upgrade them, before the workers (the
rolling upgrade's order, docs/guides/upgrading.md). A record keeps the format it was created in, so
an old process started *after* the switch meets format-2 records: this code's successors refuse
them (``FormatTooNew``), but a version before formats could misread them; roll back only before the
switch (``parkway upgrade --check`` says whether it happened).
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...runtime.clock import now_ms
from . import keys, layout
from .connection.connection import SOCKET_TIMEOUT_S, one_bound
from .connection.errors import translated

ANNOUNCE_TTL_MS = 30_000
"""how long an announcement stands without a refresh (a process that died stops counting then)"""
REFRESH_S = 5.0
"""how often a process refreshes its announcement and its decision (well inside the TTL)"""
PRUNE_AFTER_MS = 3_600_000
"""how long after it lapsed an announcement is removed from the hash (process ids are never reused)"""


@dataclass(frozen=True)
class Reader:
    """A live process as the writers count it: its id, the formats it reads, its role (worker,
    server, client; ``rq-worker`` for a worker seen only in RQ's registry), when it lapses (None for
    one seen in the registry)."""

    process: str
    reads: tuple[int, ...]
    role: str
    lapses_at: int | None = None

    @property
    def announced(self) -> bool:
        return self.lapses_at is not None


@dataclass(frozen=True)
class Decision:
    """The format the writers create records in now, and why: the live readers, and those the
    switch to the newest format waits on (each reads no newer one)."""

    writes: int
    newest: int
    readers: tuple[Reader, ...]

    @property
    def waiting_on(self) -> tuple[Reader, ...]:
        return tuple(r for r in self.readers if self.newest not in r.reads)

    @property
    def mixed(self) -> bool:
        """Whether some live process reads other formats than this code does (an older version)."""
        return any(r.reads != layout.READS_FORMATS for r in self.readers)

    def reason(self) -> str:
        if self.writes == self.newest:
            return f"every live process ({len(self.readers)}) reads format {self.newest}"
        names = ", ".join(f"{r.process} ({r.role})" for r in self.waiting_on)
        return f"format {self.newest} waits on {len(self.waiting_on)} process(es) that read no newer than " \
               f"{self.writes}: {names}"


def decide(readers: Sequence[Reader], newest: int = layout.NEWEST_FORMAT) -> Decision:
    """The newest format up to ``newest`` that every reader reads (``newest`` with no reader)."""
    writes = newest
    while writes > layout.FIRST_FORMAT and any(writes not in r.reads for r in readers):
        writes -= 1
    return Decision(writes, newest, tuple(readers))


def announcement(reads: Iterable[int], role: str, lapses_at: int) -> str:
    """An announcement's value: ``<lapse ms> <formats, comma-separated> <role>``."""
    return f"{lapses_at} {','.join(str(f) for f in sorted(reads))} {role}"


def parse(process: str, value: str) -> Reader:
    """A reader from its announcement (a value that cannot be read counts as format 1 only)."""
    lapse, _, rest = value.partition(" ")
    formats, _, role = rest.partition(" ")
    try:
        return Reader(process, tuple(int(f) for f in formats.split(",")), role or "?", int(lapse))
    except ValueError:
        return Reader(process, (layout.FIRST_FORMAT,), role or "?", int(lapse) if lapse.isdigit() else 0)


def live_readers(announced: Mapping[Any, Any], now: int, seen: Iterable[str] = ()) -> list[Reader]:
    """The live readers from the hash (``HGETALL``) at ``now``, and the processes ``seen`` elsewhere
    (RQ's workers) that did not announce, as readers of format 1 only."""
    out = [parse(_s(k), _s(v)) for k, v in announced.items()]
    live = [r for r in out if r.lapses_at is not None and r.lapses_at > now]
    named = {r.process for r in out}
    return live + [Reader(name, (layout.FIRST_FORMAT,), "rq-worker") for name in seen if name not in named]


def read_decision(client: Any, now: int | None = None, seen: Iterable[str] = ()) -> Decision:
    """The decision from Redis now (one ``HGETALL``): what ``parkway status`` and ``upgrade --check`` show."""
    with translated():
        announced = client.hgetall(keys.readers())
    return decide(live_readers(announced, now_ms() if now is None else now, seen))


def gates_of(store: Any) -> list[FormatGate]:
    """The gates of ``store`` (a ``RedisStore``), or of a sharded store's shards that this process has
    reached (a shard that was down when it started has none yet, and is not asked)."""
    shards = vars(store).get("stores") or [store]
    return [gate for s in shards if s is not None and isinstance(gate := vars(s).get("formats"), FormatGate)]


def deployment_decision(gates: Iterable[FormatGate], now: int | None = None) -> Decision:
    """The decision over every shard (its gate: its client, RQ's workers there): the readers of all,
    the format every writer may write (the lowest of the shards')."""
    readers: list[Reader] = []
    for gate in gates:
        readers += read_decision(gate.client, now, gate.seen()).readers
    return decide(readers)


def _log() -> Any:
    """The logger, imported when first needed (a listing command that reads must not load structlog)."""
    from ...runtime.logger import get_logger

    return get_logger()


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class FormatGate:
    """This process's announcement and the format its store creates records in (``writes``)."""

    def __init__(self, client: Any, role: str = "client", reads: tuple[int, ...] = layout.READS_FORMATS) -> None:
        self.client = client
        self.role = role
        self.reads = reads
        self.process = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.seen: Callable[[], Iterable[str]] = tuple
        """the names of processes seen elsewhere that may not announce (RQ's workers: set by the backend)"""
        self._decision: Decision | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def writes(self) -> int:
        """The format to create a record in: the last decision (the first call makes one, a round
        trip; a thread refreshes it every ``REFRESH_S`` from then on)."""
        decision = self._decision
        if decision is None:
            decision = self.refresh()
            self._start()
        return decision.writes

    def known(self) -> int:
        """``writes`` without a round trip: the last decision's format, or ``FIRST_FORMAT`` before the
        first, which the refreshing thread (started here) makes within ``REFRESH_S``. For a choice
        that may wait for a decision (a resume that would begin its attempt: format 3) on a path
        that must not pay for one."""
        decision = self._decision
        if decision is None:
            self._start()
            return layout.FIRST_FORMAT
        return decision.writes

    def refresh(self, now: int | None = None) -> Decision:
        """Announce this process, then decide from every live announcement (two commands in one round trip)."""
        now = now_ms() if now is None else now
        with self._lock, translated():
            pipe = self.client.pipeline(transaction=False)
            if not self._stop.is_set():  # a stopped gate decides without announcing again
                pipe.hset(keys.readers(), self.process, announcement(self.reads, self.role, now + ANNOUNCE_TTL_MS))
            pipe.hgetall(keys.readers())
            announced = pipe.execute()[-1]
        seen = list(self.seen())
        decision = decide(live_readers(announced, now, seen))
        if self._decision is not None and decision.writes != self._decision.writes:
            _log().info("format_switched", writes=decision.writes, was=self._decision.writes, reason=decision.reason())
        self._decision = decision
        self._prune(announced, now)
        return decision

    def announce(self, process: str | None = None, role: str | None = None) -> None:
        """Announce now and keep announcing (a worker, a server: processes that read before they
        write), under ``process`` if given (a worker: its RQ name, so RQ's registry and the
        announcements name it alike; the old announcement is taken away)."""
        if process is not None:
            with self._lock, translated():
                self.client.hdel(keys.readers(), self.process)
                self.process = process
        self.role = role or self.role
        self.refresh()
        self._start()

    def stop(self) -> None:
        """Stop refreshing and take this process's announcement away (the switch need not wait for it)."""
        self._stop.set()
        if self._decision is None:
            return
        bound = SOCKET_TIMEOUT_S + 1.5
        # after a refresh under way on the thread, so that its announcement never lands after the
        # removal (one stuck on a Redis gone is not waited for past the bound: it lapses by itself)
        if not self._lock.acquire(timeout=bound):
            _log().info("format_announcement_left", process=self.process, error="a refresh still under way")
            return
        try:
            # tried twice at most (the second on a fresh connection, for a pooled one gone stale), not for a
            # call's whole bound: a process closing on a Redis gone does not wait for it
            with translated(), one_bound(bound):
                self.client.hdel(keys.readers(), self.process)
        except Exception as exc:  # a Redis gone at shutdown: the announcement lapses by itself
            _log().info("format_announcement_left", process=self.process, error=str(exc))
        finally:
            self._lock.release()

    def _prune(self, announced: Mapping[Any, Any], now: int) -> None:
        old = [k for k, v in announced.items() if (parse(_s(k), _s(v)).lapses_at or 0) < now - PRUNE_AFTER_MS]
        if old:
            with translated():
                self.client.hdel(keys.readers(), *old)

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None or self._stop.is_set():
                return
            self._thread = threading.Thread(target=self._loop, name="parkway-formats", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(REFRESH_S):
            try:
                self.refresh()
            except Exception as exc:  # a Redis outage: the last decision stands, the next refresh tries again
                _log().warning("format_refresh_failed", process=self.process, error=str(exc))
