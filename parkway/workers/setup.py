"""Build what a client or worker needs from Settings: a store, a dispatcher, the token key."""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import redis

from ..adapters.redis import keys
from ..adapters.redis.store import translated
from ..config import Settings
from ..runtime import executor
from ..runtime.errors import ConfigError
from ..runtime.logger import get_logger
from ..runtime.store import Handoff, Store

if TYPE_CHECKING:
    from .embedded import Workflows

log = get_logger()


class Dispatcher(Protocol):
    """Starts the job for a transition (on RQ's queue, in production and embedded alike)."""

    def enqueue(self, run_id: str, step: int, fence: int) -> None:
        """Enqueue the job for ``fence``; enqueuing it twice is a no-op."""

    def is_pending(self, run_id: str, fence: int) -> bool:
        """Whether the job for ``fence`` still waits in the queue (and so will begin)."""

    def handoff(self, run_id: str, step: int, fence: int) -> Handoff | None:
        """The job for ``fence`` in a form the store can enqueue atomically with the transition
        that calls for it, or None when the store cannot (then ``enqueue`` it after the commit)."""


@dataclass
class Backend:
    settings: Settings
    store: Store
    dispatcher: Dispatcher
    options: executor.Options
    workflows: Workflows | None = None
    """embedded only: the workflows this process started runs of, found by reference"""
    stop: Callable[[], None] | None = None
    """embedded only: stops the in-process worker"""

    def close(self) -> None:
        """Stop the in-process worker (embedded), or close this process's connections (Redis)."""
        if self.stop is not None:
            self.stop()
        else:
            with translated():
                self.store.client.close()  # type: ignore[attr-defined]


def resolve_secret(settings: Settings, client: redis.Redis | None) -> bytes:
    """The token key: PARKWAY_SECRET; else per process (embedded) or shared through Redis, with a warning.

    On Redis, every client and worker checks the key against a fingerprint kept beside the runs
    (the first to start writes it): a process with another key would mint tokens that resume
    nothing, so it is refused at start instead."""
    if settings.secret is not None:
        key = settings.secret.encode()
    elif client is None:
        return os.urandom(32)
    else:
        log.warning(
            "secret_from_redis",
            hint="PARKWAY_SECRET is unset: the token key is kept in Redis, so anyone who can read Redis "
            "can rebuild resume tokens; set PARKWAY_SECRET (32+ random characters) in production",
        )
        with translated():
            client.set(keys.secret(), os.urandom(32).hex(), nx=True)
            value: Any = client.get(keys.secret())
        key = value.encode() if isinstance(value, str) else bytes(value)
    if client is not None:
        check_fingerprint(client, key, from_env=settings.secret is not None)
    return key


def fingerprint(key: bytes) -> str:
    """Names a token key without revealing it (an HMAC of a fixed text under the key)."""
    return hmac.new(key, b"parkway token key fingerprint v1", hashlib.sha256).hexdigest()[:32]


def check_fingerprint(client: redis.Redis, key: bytes, *, from_env: bool) -> None:
    mine = fingerprint(key)
    with translated():
        client.set(keys.key_fingerprint(), mine, nx=True)
        stored: Any = client.get(keys.key_fingerprint())
    theirs = stored.decode() if isinstance(stored, bytes) else str(stored)
    if not hmac.compare_digest(theirs, mine):
        source = "PARKWAY_SECRET" if from_env else "the key generated in Redis (PARKWAY_SECRET is unset here)"
        raise ConfigError(
            f"the token key of this process ({source}) is not the one this Redis's runs were started "
            "with: its tokens would resume nothing. Give every client and worker the same PARKWAY_SECRET. "
            f"(To start over with a new key, delete the key {keys.key_fingerprint()!r}: tokens already "
            "handed out stop working.)"
        )


def connect(settings: Settings) -> Backend:
    """The backend ``settings`` ask for: the Redis store and RQ on the server at ``redis_url``, or,
    without one, the same store and RQ's queue on an in-process Redis (embedded mode, DESIGN "One
    path"), worked by parkway's worker on a thread of this process."""
    if settings.redis_url is None:
        return _embedded(settings)
    from ..adapters.redis.store import RedisStore
    from .jobs import RQDispatcher

    store = RedisStore.from_url(settings.redis_url, settings.limits)
    options = executor.Options(
        secret=resolve_secret(settings, store.client), loader=settings.modules.load, lease_ms=settings.lease_ms
    )
    return Backend(settings, store, RQDispatcher(store.client, settings), options)


def _embedded(settings: Settings) -> Backend:
    from ..adapters.redis import embedded as inproc
    from ..adapters.redis.store import RedisStore
    from .embedded import EmbeddedDispatcher, WorkerThread, Workflows

    log.warning("embedded_mode", hint="no PARKWAY_REDIS_URL: runs live in this process and nothing survives it")
    server = inproc.server()
    client = inproc.client(server)
    workflows = Workflows(settings.modules)
    options = executor.Options(secret=resolve_secret(settings, None), loader=workflows.load, lease_ms=settings.lease_ms)
    worker = WorkerThread(server, settings, options)
    backend = Backend(
        settings, RedisStore(client, settings.limits), EmbeddedDispatcher(client, settings), options, workflows,
        worker.stop,
    )
    worker.start(owner=backend)
    return backend
