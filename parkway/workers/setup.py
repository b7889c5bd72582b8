"""Build what a client or worker needs from Settings: a store, a dispatcher, the token key."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Protocol

import redis
import structlog

from ..adapters.redis import keys
from ..adapters.redis.store import translated
from ..config import Settings
from ..runtime import executor
from ..runtime.store import Handoff, Store

log = structlog.get_logger("parkway")


class Dispatcher(Protocol):
    """Starts the job for a transition: RQ in production, a thread when embedded."""

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


def resolve_secret(settings: Settings, client: redis.Redis | None) -> bytes:
    """The token key: PARKWAY_SECRET; else per process (embedded) or shared through Redis, with a warning."""
    if settings.secret is not None:
        return settings.secret.encode()
    if client is None:
        return os.urandom(32)
    log.warning(
        "secret_from_redis",
        hint="PARKWAY_SECRET is unset: the token key is kept in Redis, so anyone who can read Redis "
        "can rebuild resume tokens; set PARKWAY_SECRET (32+ random characters) in production",
    )
    with translated():
        client.set(keys.secret(), os.urandom(32).hex(), nx=True)
        value: Any = client.get(keys.secret())
    return value.encode() if isinstance(value, str) else bytes(value)


def connect(settings: Settings) -> Backend:
    """The embedded backend (memory store, in-process executor) or the Redis one (Redis store, RQ)."""
    if settings.redis_url is None:
        from ..adapters.memory import MemoryStore
        from .inline import InlineExecutor, load

        log.warning("embedded_mode", hint="no PARKWAY_REDIS_URL: runs live in this process and nothing survives it")
        memory = MemoryStore(settings.limits)
        options = executor.Options(secret=resolve_secret(settings, None), loader=load, lease_ms=settings.lease_ms)
        return Backend(settings, memory, InlineExecutor(memory, options), options)
    from ..adapters.redis.store import RedisStore
    from .jobs import RQDispatcher

    store = RedisStore.from_url(settings.redis_url, settings.limits)
    options = executor.Options(secret=resolve_secret(settings, store.client), lease_ms=settings.lease_ms)
    return Backend(settings, store, RQDispatcher(store.client, settings), options)
